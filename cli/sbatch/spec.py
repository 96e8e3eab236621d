"""Turning sbatch's settings into the ``JobSpec`` the controller receives.

This is where sbatch completes what the options leave open, as Slurm's client
does before it submits: the working directory and file names made absolute,
the default job name, node counts implied by ``-w`` and capped by ``-n``, the task
count implied by sockets or threads per node on a fixed node count (sbatch's and
salloc's, not srun's: ``sockettasks.py``), the job's environment, and where and
how the job was submitted. The controller applies the cluster's defaults to
whatever is still unset.

``--array`` and ``--dependency`` are checked here too, so that a malformed one
fails before anything is sent, with the message the controller would give.
"""

from __future__ import annotations

import os
import sys

from cli.failure import Failure
from cli.sbatch import gpuopts, hintopts, layoutopts, nodeinfo, sockettasks
from cli.sbatch.environment import job_environment
from cli.sbatch.settings import Settings

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Fields copied from the settings unchanged when they were given.
_PASSED = (
    "num_tasks", "cpus_per_task", "ntasks_per_node", "mem_per_node", "mem_per_cpu",
    "time_limit", "time_min", "hold", "begin_time", "nice", "comment", "requeue", "open_mode",
    "signal_num", "signal_time", "signal_batch_only", "constraint", "exclusive", "account",
    "qos", "gres", "kill_on_invalid_dep", "priority", "deadline", "oversubscribe", "reservation",
    "run_as_uid", "run_as_gid", "clusters", "prefer", "licenses", "elastic_signal", "mail_type",
    "mail_user",
    "switches", "switch_wait", "segment", "topology_required", "topology_preferred",
    "ntasks_per_socket",
)  # fmt: skip

_DEPENDENCY_TYPES = frozenset(
    {"after", "afterany", "afterok", "afternotok", "aftercorr", "afterburstbuffer", "expand"}
)
# The array and dependency grammars are scanned with string methods: ``re``, with
# the ``enum`` it imports, would cost about 5 ms of every sbatch's start-up.
_DIGITS = "0123456789"


class Script:
    """The batch script and how it was given: ``path`` is None for stdin and --wrap."""

    __slots__ = ("args", "path", "text", "wrapped")

    def __init__(self, text: str, path: str | None, args: list[str], wrapped: bool) -> None:
        self.text = text
        self.path = path
        self.args = args
        self.wrapped = wrapped

    def default_name(self) -> str:
        """Slurm's job name when -J is not given."""
        if self.wrapped:
            return "wrap"
        return os.path.basename(self.path) if self.path else "sbatch"


def build(
    settings: Settings,
    script: Script,
    *,
    cwd: str,
    environ: Mapping[str, str],
    command_line: list[str],
    socket_tasks: bool = True,
) -> dict[str, Any]:
    """The ``JobSpec`` dict for ``settings``; unset optional fields are left out.
    ``socket_tasks``: whether sockets or threads per node imply ``-n`` (sbatch's and
    salloc's rule; srun, which builds its allocation here too, has none)."""
    fields = settings.fields
    chdir = fields.get("chdir")
    work_dir = cwd if chdir is None else os.path.join(cwd, chdir)
    spec: dict[str, Any] = {name: fields[name] for name in _PASSED if name in fields}
    spec.update(
        name=fields.get("name") or script.default_name(),
        script=script.text,
        argv=script.args,
        command=script.path or "",
        work_dir=work_dir,
        std_out=_absolute(fields.get("std_out", ""), work_dir),
        std_err=_absolute(fields.get("std_err", ""), work_dir),
        std_in=_absolute(fields.get("std_in", ""), work_dir),
        partitions=fields.get("partitions", []),
        export_env=fields.get("export", ""),
        submit_host=os.uname().nodename.split(".")[0],
        submit_dir=cwd,
        submit_line=" ".join(["sbatch", *command_line]),
    )
    listed = _nodes(spec, fields)
    low = spec.get("min_nodes", listed)
    tasks = sockettasks.implied_tasks(fields, low, spec.get("max_nodes", 0))
    if socket_tasks and tasks is not None:
        spec["num_tasks"] = tasks
    if spec.get("elastic_signal") and spec.get("max_nodes", 0) <= spec.get("min_nodes", 1):
        raise Failure("--elastic needs a range of nodes: -N min-max")
    if "cpus_per_task" in fields and fields.get("min_cpus", 0) < fields["cpus_per_task"]:
        spec["min_cpus"] = fields["cpus_per_task"]
    elif "min_cpus" in fields:
        spec["min_cpus"] = fields["min_cpus"]
    gpuopts.check(_with_listed_nodes(fields, listed))
    spec.update(gpuopts.spec_fields(fields))
    spec.update(gpuopts.list_texts(settings.texts))
    layoutopts.check(fields)
    if fields.get("distribution"):
        spec["distribution"] = fields["distribution"]
    nodeinfo.check(fields)
    if hintopts.threads(fields):
        spec["threads_per_core"] = hintopts.threads(fields)
    if hintopts.cores(fields):
        spec["cores_per_socket"] = hintopts.cores(fields)
    if "sockets_per_node" in fields:
        spec["sockets_per_node"] = hintopts.sockets(fields)
    if not fields.get("hint") or hintopts.dropped(fields):  # a hint that holds drops -B's
        zeros = [name for name in nodeinfo.FIELDS[:2] if nodeinfo.zero(fields, name)]
        if zeros:
            spec["node_info_zeros"] = zeros
    if fields.get("container"):
        spec["container"] = _container(fields["container"], cwd)
    if fields.get("container_id"):
        spec["container_id"] = fields["container_id"]
    dependency = fields.get("dependency")
    if dependency:
        check_dependency(dependency)
        spec["dependency"] = dependency
    if fields.get("array"):
        check_array(fields["array"])
        spec["array"] = fields["array"]
    spec["environment"] = job_environment(
        export=fields.get("export"),
        export_file=fields.get("export_file"),
        environ=environ,
        submit_dir=cwd,
        dependency=dependency,
        get_user_env=fields.get("get_user_env", False),
    )
    spec["environment"].update(gpuopts.environment(fields, settings.texts))
    spec["environment"].update(layoutopts.environment(fields))
    spec["environment"].update(hintopts.environment(fields))
    return spec


def _container(path: str, cwd: str) -> str:
    """``--container``'s bundle, absolute; Failure when it is not an OCI bundle."""
    from cli.bundle import absolute, bundle_error

    bundle = absolute(path, cwd)
    error = bundle_error(bundle)
    if error is not None:
        raise Failure(error)
    return bundle


def _absolute(path: str, work_dir: str) -> str:
    """A file name relative to the job's working directory, made absolute; "" stays ""."""
    if not path or path.startswith("/"):
        return path
    return os.path.join(work_dir, path)


def _nodes(spec: dict[str, Any], fields: Mapping[str, Any]) -> int:
    """Node list and node counts: ``-n`` caps the node count. ``-w`` alone names nodes
    the job must have and sets no count: the controller adds nodes where the tasks need
    more (Slurm 22.05 runs ``-w n1 -n10`` on two 8-CPU nodes). Returns how many nodes
    ``-w`` names (0: none), which the rules that take them as a fixed count use."""
    for field in ("req_nodes", "exc_nodes"):
        if fields.get(field):
            spec[field] = node_list(fields[field])
    listed = 0
    if spec.get("req_nodes"):
        from corral.hostlist import expand

        listed = len(set(expand(spec["req_nodes"])))
    low = fields.get("min_nodes")
    high = fields.get("max_nodes", 0)
    tasks = fields.get("num_tasks")
    if tasks is not None and tasks < (listed if low is None else low):
        print(
            f"sbatch: warning: can't run {tasks} processes on {low or listed} nodes, "
            f"setting nnodes to {tasks}",
            file=sys.stderr,
        )
        low = high = tasks
    elif low is not None and tasks is not None and high and tasks < high:
        high = tasks
    if low is not None:
        spec["min_nodes"] = low
    if high:
        spec["max_nodes"] = high
    return listed


def _with_listed_nodes(fields: Mapping[str, Any], listed: int) -> Mapping[str, Any]:
    """``fields`` with ``-w``'s ``listed`` node count as ``-N`` where ``-N`` was not
    given: Slurm 22.05's sbatch checks GPU totals against it (``--gpus=1 -n10 -w
    n3,n4`` is "--gpus < -N", as with ``-N2``)."""
    if "min_nodes" in fields or not listed:
        return fields
    return {**fields, "min_nodes": listed}


def node_list(text: str) -> str:
    """A ``-w``/``-x`` host list, read from a file when it contains ``/``; checked."""
    from corral.hostlist import expand

    if "/" in text:
        text = _node_file(text)
    try:
        expand(text)
    except ValueError:
        raise Failure("Invalid node list specified", status=1, level="fatal") from None
    return text


def _node_file(path: str) -> str:
    """The hosts named in a node file, one or more per line, ``#`` starting a comment."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        raise Failure(f"Unable to open file {path}") from None
    names = [line.split("#", 1)[0].strip() for line in lines]
    return ",".join(name for name in names if name)


def check_array(text: str) -> None:
    """Check an ``--array`` spec: ``0-15``, ``0,6,16-32``, ``0-15:4``, ``[1-9]%2``.

    The largest index is the controller's to check (MaxArraySize).
    """
    items, percent, throttle = text.partition("%")
    given = [item for item in items.split(",") if item]
    valid = bool(given) and (not percent or (throttle.isascii() and throttle.isdigit()))
    for item in given:
        numbers = _array_item(item)
        valid = valid and numbers is not None and _ascending(numbers)
    if not valid:
        raise Failure("Batch job submission failed: Invalid job array specification")


def _digit_run(text: str) -> str:
    """The ASCII digits ``text`` starts with."""
    return text[: len(text) - len(text.lstrip(_DIGITS))]


def _array_item(item: str) -> list[str] | None:
    """The numbers of one ``--array`` item, ``N``, ``LO-HI`` or ``LO-HI:STEP``, else None.

    Slurm tolerates brackets: a ``[`` before the item and a ``]`` after any number.
    """
    numbers: list[str] = []
    rest = item.removeprefix("[")
    for separator in ("", "-", ":"):
        if separator:
            if not rest.startswith(separator):
                break
            rest = rest[1:]
        digits = _digit_run(rest)
        if not digits:
            return None
        numbers.append(digits)
        rest = rest[len(digits) :].removeprefix("]")
    return None if rest else numbers


def _ascending(numbers: list[str]) -> bool:
    """A range's end is not below its start, and its step is positive."""
    if len(numbers) == 1:
        return True
    step_ok = len(numbers) == 2 or numbers[2].strip("0") != ""
    return _number_key(numbers[1]) >= _number_key(numbers[0]) and step_ok


def _number_key(digits: str) -> tuple[int, str]:
    """Order decimal strings by value without converting them (they may be huge)."""
    significant = digits.lstrip("0")
    return len(significant), significant


def check_dependency(text: str) -> None:
    """Check a ``--dependency`` list's grammar.

    Items are ``type:job[:job...]``, a bare job id (``afterany``) or
    ``singleton``, joined all by ``,`` (all must hold) or all by ``?`` (any
    may); a job is ``ID``, ``ID_TASK`` or ``ID_*``, optionally ``+MINUTES``.
    Whether the jobs exist is the controller's to check.
    """
    if text == "0":
        return
    separators = {sep for sep in ",?" if sep in text}
    items = text.replace("?", ",").split(",")
    if len(separators) > 1 or not all(_dependency_item(item) for item in items):
        raise Failure("Batch job submission failed: Job dependency problem")


def _dependency_item(item: str) -> bool:
    if item.lower() == "singleton":
        return True
    kind, colon, jobs = item.partition(":")
    if not colon:
        return 0 < _job_ref_length(item) == len(item)
    if kind.lower() not in _DEPENDENCY_TYPES:
        return False
    for job in jobs.split(":"):
        length = _job_ref_length(job)
        if length == 0:
            return False
        delay = job[length:]  # "" or +MINUTES
        if delay and not (delay[0] == "+" and _is_positive(delay[1:])):
            return False
    return True


def _is_positive(text: str) -> bool:
    """Decimal digits, not all zeros (leading zeros allowed)."""
    return text.strip("0") != "" and not text.strip(_DIGITS)


def _job_ref_length(text: str) -> int:
    """How much of ``text`` is a job reference at its start: ``ID``, ``ID_TASK``, ``ID_*``.

    0 when it starts with none. ``ID`` is a positive number (leading zeros allowed).
    """
    job = _digit_run(text)
    if not _is_positive(job):
        return 0
    length = len(job)
    if text[length : length + 1] == "_":
        task = _digit_run(text[length + 1 :])
        if task:
            length += 1 + len(task)
        elif text[length + 1 : length + 2] == "*":
            length += 2
    return length
