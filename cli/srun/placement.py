"""srun's placement options, checked where srun runs and put in the step request:
``-m/--distribution`` (SLURM_DISTRIBUTION, SLURM_DIST_PLANESIZE; ``arbitrary``
with SLURM_HOSTFILE or ``-w``), ``-r/--relative`` and ``--multi-prog``.

The controller lays the tasks out (controller/tasklayout.py); srun refuses in
Slurm's words what Slurm's srun refuses before it asks for a step: a bad
distribution (exit 255, as Slurm's), a hostfile with too few names, ``-r``
beside ``-w``/``-x`` or beyond the allocation, a ``--multi-prog`` file that
does not name each task once (corral/multiprog.py).
"""

from __future__ import annotations

from cli.halt import Halt

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

PROG = "srun"


def distribution_fields(
    options: Mapping[str, str | None], env: Mapping[str, str], ntasks: int
) -> dict[str, Any]:
    """The request's ``distribution`` (and, for ``arbitrary``, ``task_nodes`` and
    ``ntasks``); {} when none was asked for."""
    text = options.get("distribution") or env.get("SLURM_DISTRIBUTION", "")
    if not text:
        return {}
    from corral import distribution

    try:
        dist = distribution.parse(text, env.get("SLURM_DIST_PLANESIZE", ""))
    except ValueError as exc:
        raise Halt(255, *(f"{PROG}: error: {line}" for line in str(exc).splitlines())) from None
    fields: dict[str, Any] = {"distribution": text}
    if dist.method == "arbitrary":
        names = _arbitrary_nodes(options, env)
        count = ntasks or len(names)
        if len(names) < count:
            raise Halt(
                1,
                f"{PROG}: error: Too few NodeNames in Slurm Hostfile",
                f"{PROG}: error: Failure getting NodeNames from hostfile",
            )
        fields["task_nodes"] = names[:count]
        fields["ntasks"] = count
    return fields


def _arbitrary_nodes(options: Mapping[str, str | None], env: Mapping[str, str]) -> list[str]:
    """Each task's node, in order: SLURM_HOSTFILE's (one a line, or comma-separated,
    each a host list), else ``-w``'s."""
    from corral import hostlist

    path = env.get("SLURM_HOSTFILE", "")
    if path:
        try:
            with open(path) as handle:
                text = handle.read()
        except OSError as exc:
            raise Halt(
                1,
                f"{PROG}: error: error opening file {path}, {exc.strerror}",
                f"{PROG}: error: Failure getting NodeNames from hostfile",
            ) from None
        words = [w for line in text.splitlines() for w in line.split(",") if w.strip()]
        return [name for word in words for name in hostlist.expand(word.strip())]
    nodelist = options.get("nodelist") or ""
    if not nodelist:
        raise Halt(
            1,
            f"{PROG}: error: With Arbitrary distribution you need to specify a nodelist or "
            "hostfile with the -w option",
        )
    return list(hostlist.expand(nodelist))


def node_count(nodes: int, ntasks: int) -> int:
    """``-N``, or ``-n`` when fewer tasks than nodes were asked for (said, as Slurm's
    srun says it: a node without a task would be wasted)."""
    if ntasks and nodes > ntasks:
        import sys

        print(
            f"{PROG}: Warning: can't run {ntasks} processes on {nodes} nodes, "
            f"setting nnodes to {ntasks}",
            file=sys.stderr,
        )
        return ntasks
    return nodes


def relative(options: Mapping[str, str | None], env: Mapping[str, str], in_job: bool) -> int:
    """``-r N``: the step's first node among the job's (0 without)."""
    text = options.get("relative")
    if text is None:
        return 0
    if not in_job:
        raise Halt(1, f"{PROG}: fatal: --relative option invalid for job allocation request")
    if "nodelist" in options or "exclude" in options:
        raise Halt(
            1, f"{PROG}: error: -r,--relative not allowed with -w,--nodelist or -x,--exclude."
        )
    if not text.isdigit():
        raise Halt(1, f'{PROG}: error: Invalid numeric value "{text}" for --relative.')
    first = int(text)
    total = int(env.get("SLURM_JOB_NUM_NODES", env.get("SLURM_NNODES", "0")) or 0)
    nodes = (options.get("nodes") or "").split("-")[0]
    if total and nodes.isdigit() and first + int(nodes) > total:
        raise Halt(
            1,
            f"{PROG}: error: --relative and --nodes option incompatible with count of "
            f"allocated nodes ({first}+{nodes}>{total})",
        )
    if total and first >= total:
        raise Halt(
            1,
            f"{PROG}: error: --relative and SLURM_JOB_NUM_NODES option incompatible with "
            f"count of allocated nodes ({first}+1>{total})",
        )
    return first


def multi_prog(command: list[str], env: Mapping[str, str], ntasks: int) -> dict[str, Any]:
    """``--multi-prog FILE``: the file's text, checked against the step's ``ntasks``
    (``-n``, else SLURM_NTASKS, else 1), and that count."""
    from corral import multiprog

    path = command[0]
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        raise Halt(1, f"{PROG}: error: Could not open multi_prog config file {path}") from None
    count = ntasks or int(env.get("SLURM_NTASKS", "0") or 0) or 1
    try:
        multiprog.verify(text, path, count)
    except multiprog.MultiProgError as exc:
        raise Halt(1, *(f"{PROG}: error: {line}" for line in exc.lines)) from None
    return {"multi_prog": text, "ntasks": count}


#: ``--hint``'s types and the binding each gives a step's tasks: all cores, one
#: thread each (compute_bound); a core each, consecutive tasks on other sockets
#: (memory_bound: the default cyclic dealing over sockets); a thread each, a
#: core's threads together (multithread) or one thread per core first
#: (nomultithread).
HINTS = {
    "compute_bound": "cores",
    "memory_bound": "cores",
    "multithread": "threads",
    "nomultithread": "threads",
}
#: Options more specific than ``--hint``, which drop it (cli/sbatch/hintopts.py).
HINT_DROPPERS = ("extra-node-info", "ntasks-per-core", "threads-per-core")


def hint(
    options: Mapping[str, str | None], env: Mapping[str, str], cpu_bind: str
) -> dict[str, Any]:
    """``--hint`` (or SLURM_HINT) as the request's ``cpu_bind`` (and, for multithread,
    the core level of its distribution); {} without one, or beside an option it
    cannot go with: the hint ignored, as Slurm's srun does, which says so only under
    -v (``hintopts.DROPPED``, measured on Slurm 22.05)."""
    text = options.get("hint") or env.get("SLURM_HINT", "")
    if not text:
        return {}
    kind = HINTS.get(text.lower())
    if kind is None:
        raise Halt(1, f'{PROG}: error: unrecognized --hint argument "{text}", see --hint=help')
    from corral.cpubind import parse

    if any(key in options for key in HINT_DROPPERS) or parse(cpu_bind).kind:
        if "verbose" in options:
            import sys

            from cli.sbatch.hintopts import DROPPED

            print(f"{PROG}: {DROPPED}", file=sys.stderr)
        return {}
    verbose = "verbose," if parse(cpu_bind).verbose else ""
    fields: dict[str, Any] = {"cpu_bind": verbose + kind}
    if text.lower() == "multithread" and not options.get("distribution"):
        fields["distribution"] = "*:*:block"
    return fields
