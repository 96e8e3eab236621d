"""Interactive allocations: what salloc, and srun outside a job, do with one.

The job is submitted like sbatch's (the same option checks and fields, see
cli/sbatch/settings.py) but marked interactive: the controller runs no batch
script on it. The client waits for it to start (``Allocation`` answers its
state, then its SLURM_* environment), runs its command or step, and gives it
back (``JobControl`` action ``complete`` with the exit status). A client
interrupted while waiting cancels the job; one killed outright leaves the
allocation until its time limit, which the controller then enforces.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from cli.halt import Halt
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

#: Job options salloc and srun share with sbatch (the keys of sbatch's SETTERS).
JOB_OPTIONS = (
    "account", "chdir", "constraint", "cores-per-socket", "cpus-per-gpu", "cpus-per-task",
    "dependency", "elastic",
    "exclude", "exclusive", "extra-node-info",
    "gpu-bind", "gpus", "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres",
    "gres-flags", "hint", "job-name", "licenses", "mail-type", "mail-user", "mem", "mem-per-cpu",
    "mem-per-gpu", "nodefile", "nodelist", "nodes",
    "ntasks", "ntasks-per-gpu", "ntasks-per-node",
    "ntasks-per-socket", "partition", "prefer", "qos", "reservation",
    "sockets-per-node", "threads-per-core", "time", "switches", "segment", "topology-level",
)  # fmt: skip


def _settings(options: Mapping[str, str | None]) -> Any:
    """Sbatch's settings for the job options among ``options``, applied in their order
    (the order they were last given, ``options.put_last``): where two set the same
    count the last given wins, as in Slurm 22.05's salloc and srun (``-B 2
    --sockets-per-node=1`` is Socks/Node=1, ``--sockets-per-node=1 -B 2`` 2)."""
    from cli.sbatch.settings import Settings

    settings = Settings()
    for key, value in options.items():
        if key in JOB_OPTIONS:
            settings.apply(key, value, "command line")
    return settings


def gpu_environment(options: Mapping[str, str | None]) -> dict[str, str]:
    """What salloc tells its command of its GPU options (SLURM_GPUS, ...), as Slurm's
    salloc sets them (cli/sbatch/gpuopts.py)."""
    from cli.sbatch.gpuopts import environment

    settings = _settings(options)
    return environment(settings.fields, settings.texts)


def elastic_signal(options: Mapping[str, str | None]) -> int:
    """The signal ``--elastic[=SIG]`` asks for (0: not elastic)."""
    signal: int = _settings(options).fields.get("elastic_signal", 0)
    return signal


def hint_environment(options: Mapping[str, str | None]) -> dict[str, str]:
    """What salloc tells its command of ``--hint`` and ``--threads-per-core``
    (SLURM_HINT, SLURM_THREADS_PER_CORE), as Slurm's salloc sets them
    (cli/sbatch/hintopts.py)."""
    from cli.sbatch.hintopts import environment

    return environment(_settings(options).fields)


def submit(
    client: Any,
    prog: str,
    options: Mapping[str, str | None],
    name: str,
    line: list[str],
    het: Sequence[Mapping[str, str | None]] = (),
) -> int:
    """Ask for the allocation; its job id (Halt with Slurm's words if refused). ``het``:
    the options of a heterogeneous job's further components (salloc ``:``), each
    taking the options Slurm propagates from the one before."""
    from cli.sbatch.options import PROPAGATED

    specs = [_spec(prog, options, name, line)]
    previous = options
    for more in het:
        previous = {**{k: v for k, v in previous.items() if k in PROPAGATED}, **more}
        specs.append(_spec(prog, previous, name, line))
    try:
        reply = client.call("Submit", {"spec": specs[0], "het_components": specs[1:]})
    except SlurmError as exc:
        # Slurm 22.05's words: salloc's, and srun's own; the controller's line first.
        failed = "Unable to allocate resources" if prog == "srun" else "Job submit/allocate failed"
        detail = [f"{prog}: error: {exc.detail}"] if exc.detail else []
        raise Halt(1, *detail, f"{prog}: error: {failed}: {exc}") from None
    return int(reply["job_id"])


def choose_cluster(
    prog: str,
    options: Mapping[str, str | None],
    name: str,
    line: list[str],
    het: Sequence[Mapping[str, str | None]] = (),
) -> None:
    """salloc/srun ``-M``: the cluster the allocation goes to, of several the one whose
    plan starts it first (as sbatch's); for another cluster than this one, named in
    SLURM_WORKING_CLUSTER, so that this process's connections (``boundary.connect``)
    and those of what runs in the allocation (its environment) go there."""
    from cli import clusters
    from cli.sbatch.options import PROPAGATED

    wanted = options.get("clusters") or ""
    specs = [_spec(prog, options, name, line)]
    previous = options
    for more in het:
        previous = {**{k: v for k, v in previous.items() if k in PROPAGATED}, **more}
        specs.append(_spec(prog, previous, name, line))
    ask = {"spec": specs[0], "test_only": True, "het_components": specs[1:]}
    try:
        chosen, _ = clusters.soonest(clusters.clients(wanted), ask)
    except SlurmError as exc:
        failed = "Unable to allocate resources" if prog == "srun" else "Job submit/allocate failed"
        raise Halt(1, f"{prog}: error: {failed}: {exc}") from None
    if not clusters.local(chosen):
        os.environ[clusters.WORKING_CLUSTER] = clusters.working(chosen, wanted)


def _spec(
    prog: str, options: Mapping[str, str | None], name: str, line: list[str]
) -> dict[str, Any]:
    """The JobSpec of an allocation with ``options`` (Halt with Slurm's words if refused)."""
    from cli.failure import Failure, Refused
    from cli.sbatch.spec import Script, build, check_dependency

    try:
        check_dependency(options.get("dependency") or "0")
    except Failure:  # sbatch says "Batch job submission failed"; salloc says this
        raise Halt(
            1, f"{prog}: error: Job submit/allocate failed: Job dependency problem"
        ) from None
    try:
        settings = _settings(options)
        settings.verify()
        spec = build(
            settings, Script("", None, [], False), cwd=os.getcwd(), environ=os.environ,
            command_line=line, socket_tasks=prog != "srun",
        )  # fmt: skip
    except Refused as exc:  # what Slurm's controller refuses, in salloc's/srun's words
        failed = "Unable to allocate resources" if prog == "srun" else "Job submit/allocate failed"
        raise Halt(1, f"{prog}: error: {failed}: {exc.reason}") from None
    except Failure as exc:  # in Slurm's words and level (a GPU option's two lines)
        lines = [f"{prog}: {exc.level}: {line}" for line in exc.lines]
        raise Halt(exc.status or 1, *lines) from None
    spec.update(interactive=True, name=settings.fields.get("name") or name)
    spec["submit_line"] = " ".join([prog, *line])
    return spec


def wait_for_start(client: Any, prog: str, job_id: int, quiet: bool) -> dict[str, str]:
    """The allocation's environment once it runs; Halt if it ends first or on Ctrl-C."""
    told = False
    delay = 0.05
    # The controller schedules in its own cycle, a moment after the submission:
    # only a job still pending after that waits for resources, as Slurm says it.
    quiet_until = time.monotonic() + 0.5
    try:
        while True:
            reply = client.call("Allocation", {"job_id": job_id})
            state = reply["state"]
            if state == "RUNNING":
                if told and not quiet:
                    print(f"{prog}: job {job_id} has been allocated resources", file=sys.stderr)
                return dict(reply["environment"])
            if state not in ("PENDING", "CONFIGURING"):  # CONFIGURING: PrologSlurmctld runs
                raise Halt(1, f"{prog}: error: Job allocation {job_id} has been revoked.")
            if state == "PENDING" and not told and not quiet and time.monotonic() >= quiet_until:
                if prog == "salloc":
                    print(f"{prog}: Pending job allocation {job_id}", file=sys.stderr)
                print(f"{prog}: job {job_id} queued and waiting for resources", file=sys.stderr)
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    except KeyboardInterrupt:
        cancel(client, job_id)
        raise Halt(1, f"{prog}: Job allocation {job_id} has been revoked.") from None


def release(client: Any, job_id: int, status: int) -> None:
    """Give the allocation back; the job ends with ``status`` (a wait status)."""
    request = {
        "action": "complete",
        "job_ids": [str(job_id)],
        "updates": {"exit_status": str(status)},
    }
    with contextlib.suppress(SlurmError):  # already ended: cancelled or past its limit
        client.call("JobControl", request)


def cancel(client: Any, job_id: int) -> None:
    with contextlib.suppress(SlurmError):
        client.call("Signal", {"filter": {"job_ids": [str(job_id)]}, "signal": 0})


#: How often a running allocation's client asks for scontrol notify's messages.
NOTICE_POLL = 1.0


def print_notices(client: Any, prog: str, job_id: int) -> Callable[[], None]:
    """Print each ``scontrol notify`` message for the allocation on stderr as
    ``<prog>: <message>`` (Slurm's salloc and srun print SRUN_USER_MSG so), from
    a thread that polls ``Allocation``; the function returned stops it."""
    import threading

    stop = threading.Event()

    def poll() -> None:
        seen = 0
        while not stop.wait(NOTICE_POLL):
            try:
                notices = client.call("Allocation", {"job_id": job_id, "notices_seen": seen})
            except SlurmError:
                continue  # the controller restarts, or the job ended: the main loop sees it
            for text in notices["notices"]:
                print(f"{prog}: {text}", file=sys.stderr, flush=True)
            seen += len(notices["notices"])

    thread = threading.Thread(target=poll, name="notices", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join()

    return halt
