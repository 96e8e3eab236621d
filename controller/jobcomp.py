"""JobCompType=jobcomp/filetxt: one line per finished job, in Slurm's format.

Sites without a database (or beside one) keep this log and feed it to their
own tools, so the line is Slurm's word for word: ``Key=Value`` pairs in a
fixed order, times as ``YYYY-MM-DDTHH:MM:SS`` local time, TimeLimit in
minutes or ``UNLIMITED``, exit codes as ``code:signal``, and a space before
the newline. Lines are appended with O_APPEND, so concurrent readers never
see half a line.
"""

from __future__ import annotations

import logging
import os
import time

from controller.model import Job
from corral import hostlist

log = logging.getLogger("corral.jobcomp")


def _when(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch)) if epoch else "Unknown"


def _exit(status: int) -> str:
    return f"{status >> 8 & 0xFF}:{status & 0x7F}"


def line(job: Job, cluster: str) -> str:
    """The filetxt record of a finished ``job``."""
    cpus = sum(job.cpus)
    nodes = len(job.nodes)
    memory = sum(job.alloc_mem)
    tres = f"cpu={cpus},mem={memory}M,node={nodes},billing={cpus}" if nodes else ""
    array = (
        f" ArrayJobId={job.array_job_id} ArrayTaskId={job.array_task_id}"
        if job.array_job_id and job.array_task_id is not None
        else ""
    )
    fields = [
        f"JobId={job.job_id}",
        f"UserId={job.user}({job.uid})",
        f"GroupId={job.group}({job.gid})",
        f"Name={job.name}",
        f"JobState={job.state.name}",
        f"Partition={job.partition or ','.join(job.partitions)}",
        f"TimeLimit={'UNLIMITED' if job.time_limit < 0 else job.time_limit}",
        f"StartTime={_when(job.start_time)}",
        f"EndTime={_when(job.end_time)}",
        f"NodeList={hostlist.compress(job.nodes) if nodes else '(null)'}",
        f"NodeCnt={nodes}",
        f"ProcCnt={cpus}",
        f"WorkDir={job.work_dir}",
        "ReservationName=",
        f"Tres={tres}",
        f"Account={job.account}",
        f"QOS={job.qos}",
        "WcKey=",
        f"Cluster={cluster}",
        f"SubmitTime={_when(job.submit_time)}",
        f"EligibleTime={_when(job.eligible_time)}{array}",
        f"DerivedExitCode={_exit(job.exit_status)}",
        f"ExitCode={_exit(job.exit_status)}",
    ]
    return " ".join(fields) + " \n"


def append(path: str, text: str) -> None:
    """Append ``text`` to the log; a failure is logged, never raised into the caller."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        log.error("JobCompLoc %s: %s", path, exc.strerror)
