"""Stopping a ``corral up`` cluster so that nothing of it is left running.

Stopping the daemons alone does not end the jobs: a job's supervisor outlives
the node agent on purpose (an agent restart must not kill running jobs, as
with slurmd and slurmstepd), and whatever a job starts can outlive its
supervisor once it leaves the job's process group. So ``corral down`` ends
the cluster as an administrator would:

1. every job is cancelled through the controller, as ``scancel`` would cancel
   it (on the nodes: CONT and TERM, KILL after KillWait); the jobs end
   CANCELLED and accounting records them so. The wait for them to finish is
   bounded by KillWait plus :data:`END_MARGIN_S`;
2. the daemons get SIGTERM, dbd last so that the controller's last records
   can still reach it, and SIGKILL after :data:`DAEMON_WAIT_S`;
3. what is still running of the cluster's jobs is ended (:func:`sweep`): a
   supervisor or step runner of the cluster's spool, or any process whose
   environment carries the cluster's ``SLURM_CONF`` and ``SLURMD_NODENAME``
   (set only on the node side of a job), wherever it went; a process that
   also cleared its environment is beyond this (cgroups close that gap). The
   user's own shells with ``SLURM_CONF`` exported, salloc's among them, have
   no ``SLURMD_NODENAME`` and are left alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cli import processes
from cli.processes import Process

#: Beyond KillWait, how long ``corral down`` waits for cancelled jobs to finish.
END_MARGIN_S = 10.0
#: How long a daemon has to exit after SIGTERM before it gets SIGKILL.
DAEMON_WAIT_S = 15.0
#: How long a leftover process has to exit after SIGTERM before it gets SIGKILL.
LEFTOVER_WAIT_S = 2.0
#: The states a job has not ended in (every other one is an end: CANCELLED, COMPLETED, ...).
UNFINISHED = ("PENDING", "RUNNING", "SUSPENDED")
#: How long a controller call may take (one that does not answer is skipped).
CALL_TIMEOUT_S = 5.0


@dataclass
class Report:
    """What ending a cluster did, for the lines ``corral down`` prints."""

    cancelled: list[str] = field(default_factory=list)  # job ids the controller cancelled
    unfinished: list[str] = field(default_factory=list)  # still not finished when the wait ended
    unreachable: str = ""  # why the controller could not be asked, if it could not
    ended: list[Process] = field(default_factory=list)  # leftovers ended by signal
    survivors: list[Process] = field(default_factory=list)  # leftovers that outlived SIGKILL

    def lines(self) -> list[str]:
        """The report as ``corral down`` prints it."""
        out = []
        if self.unreachable:
            out.append(f"could not cancel the jobs: {self.unreachable}")
        elif self.cancelled:
            out.append(f"cancelled {len(self.cancelled)} job(s): {','.join(self.cancelled)}")
        if self.unfinished:
            out.append(f"job(s) still ending when the wait was over: {','.join(self.unfinished)}")
        if self.ended:
            out.append(f"ended {len(self.ended)} process(es) the jobs left running:")
            out += [f"  {p.describe()}" for p in self.ended]
        if self.survivors:
            out.append(f"{len(self.survivors)} process(es) could not be ended:")
            out += [f"  {p.describe()}" for p in self.survivors]
        return out


def _active(job: Mapping[str, Any]) -> bool:
    """Not finished yet, or finished with processes still being ended on its nodes."""
    return job["state"] in UNFINISHED or "COMPLETING" in job["state_flags"]


def cancel_jobs(conf_path: str, report: Report) -> None:
    """Cancel every job of the cluster and wait (bounded) until they have finished."""
    from corral.client import Client, socket_path
    from corral.config import ConfigError, load
    from corral.errors import SlurmError

    try:
        conf = load(conf_path)
    except (ConfigError, OSError) as exc:
        report.unreachable = str(exc)
        return
    client = Client(socket_path(conf.state_save_location), timeout=CALL_TIMEOUT_S)
    listing = {"filter": {}, "all_partitions": True, "expand_arrays": True}
    try:
        reply = client.call("Signal", {"filter": {}, "signal": 0})
        report.cancelled = [r["job_id"] for r in reply["results"] if not int(r["code"])]
        deadline = time.monotonic() + conf.kill_wait + END_MARGIN_S
        while True:
            jobs = client.call("Jobs", listing)["jobs"]
            left = [str(j["job_id"]) for j in jobs if _active(j)]
            if not left or time.monotonic() >= deadline:
                report.unfinished = left
                return
            time.sleep(0.1)
    except SlurmError as exc:
        report.unreachable = str(exc)


def spool_root(conf_path: str) -> str:
    """The directory that holds every node's spool (SlurmdSpoolDir up to its first %)."""
    from corral.config import ConfigError, load

    try:
        spool = load(conf_path).slurmd_spool_dir
    except (ConfigError, OSError):  # corral up's own layout, then
        return os.path.join(os.path.dirname(conf_path), "spool")
    if "%" in spool:
        spool = os.path.dirname(spool.split("%", 1)[0] + "x")
    return spool.rstrip(os.sep) or os.sep


def of_cluster(conf_path: str, spool: str) -> list[Process]:
    """The live processes of the cluster's jobs: see the module (step 3)."""

    def keep(process: Process) -> bool:
        if processes.mentions(process.argv, spool):
            return True
        env = process.environ()
        return env.get("SLURM_CONF") == conf_path and "SLURMD_NODENAME" in env

    return processes.scan(keep)


def sweep(conf_path: str, report: Report) -> None:
    """End what is still running of the cluster's jobs."""
    found = of_cluster(conf_path, spool_root(conf_path))
    left = processes.end(found, LEFTOVER_WAIT_S)
    report.ended = [p for p in found if p not in left]
    report.survivors += left


def stop_daemons(conf_path: str, pids: list[int], report: Report) -> None:
    """SIGTERM the daemons (dbd once the others have exited), SIGKILL after a while.

    A pid counts only while its command line names the cluster's directory
    (``-f DIR/slurm.conf``): not a process that got the pid of a daemon gone.
    """
    directory = os.path.dirname(conf_path)
    daemons = processes.scan(lambda p: p.pid in pids and processes.mentions(p.argv, directory))
    dbd = [p for p in daemons if "dbd.main" in p.argv]
    others = [p for p in daemons if p not in dbd]
    for group in (others, dbd):
        left = processes.end(group, DAEMON_WAIT_S)
        report.survivors += left


def down(conf_path: str, pids: list[int]) -> Report:
    """End the cluster of ``conf_path`` whose daemons are ``pids`` (see the module)."""
    report = Report()
    if pids:
        cancel_jobs(conf_path, report)
        stop_daemons(conf_path, pids, report)
    sweep(conf_path, report)
    return report
