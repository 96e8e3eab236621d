"""The ``LaunchJob`` message of a batch job: each field a ``Job`` attribute as it
is, or one of the named computations here.

Why: ``agentlink.launch`` built the message field by field, so a field added to
``LaunchJob`` could stay at its default (a job launched without it) with no
test noticing. ``COPIED`` names the fields that are the job's own, ``COMPUTED``
the rest, and tests/unit/test_launchmsg.py holds the message's descriptor to
the two, so a new wire field fails that test until it is placed in one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from controller.gpushare import Shares
from controller.model import Job, Payload
from corral.config import SlurmConfig
from corral.wire import corral_pb2 as pb

__all__ = ["COMPUTED", "COPIED", "computed", "gpu_grant", "launch_job"]

#: LaunchJob fields that are a ``Job`` attribute unchanged (LaunchJob field -> Job
#: attribute). ``array_task_id`` is None outside arrays, which leaves the field unset.
COPIED: Final[dict[str, str]] = {
    "job_id": "job_id",
    "uid": "uid",
    "gid": "gid",
    "user": "user",
    "work_dir": "work_dir",
    "std_out": "std_out",
    "std_err": "std_err",
    "std_in": "std_in",
    "start_time": "start_time",
    "array_job_id": "array_job_id",
    "array_task_id": "array_task_id",
    "job_name": "name",
    "restarts": "restarts",
    "signal_num": "signal_num",
    "signal_time": "signal_time",
    "signal_batch_only": "signal_batch_only",
    "container": "container",
    "container_id": "container_id",
}

#: LaunchJob fields worked out at launch (``computed`` says from what).
COMPUTED: Final[frozenset[str]] = frozenset(
    {
        "node",
        "script",
        "argv",
        "environment",
        "node_list",
        "append",
        "time_limit",
        "kill_wait",
        "cpu_ids",
        "grant",
        "mem_mib",
    }
)


def computed(
    job: Job,
    payload: Payload,
    environment: Mapping[str, str],
    time_limit: int,
    conf: SlurmConfig,
    shares: Shares,
) -> dict[str, Any]:
    """The ``COMPUTED`` fields of ``job``'s launch: ``environment`` is the batch
    environment as the agent link made it, ``time_limit`` the job's limit cut at
    its reservation's end (``JobStore.time_limit_at_launch``)."""
    return {
        "node": job.nodes[0],  # the batch host
        "script": payload.script,  # the journal keeps the script apart from the job
        "argv": payload.argv,
        "environment": environment,
        "node_list": environment["SLURM_JOB_NODELIST"],
        "append": job.open_mode == "append" or (not job.open_mode and conf.job_file_append),
        "time_limit": time_limit,
        "kill_wait": conf.kill_wait,
        "cpu_ids": job.cpu_ids[0] if job.cpu_ids else (),  # its CPU ids on the batch host
        "grant": gpu_grant(job.gpus[0] if job.gpus else (), shares),  # what the fence opens
        "mem_mib": job.alloc_mem[0] if job.alloc_mem else 0,  # its memory cgroup's limit
    }


def gpu_grant(whole: Iterable[int], shares: Shares) -> pb.GpuGrant:
    """A launch's typed GPU grant on its node: its ``whole`` GPUs (the same indices as
    its SLURM_JOB_GPUS or SLURM_STEP_GPUS) and its ``shares``. The agent fences and
    serves MPS from this alone, since the environment is the submitter's to fill."""
    grant = pb.GpuGrant(
        gpus=whole,
        shared=shares.gpus,
        mps_percentage=shares.mps_percentage,
        pinned_mem_mib=shares.pinned_mib,
    )
    if shares.shards is not None:
        grant.shards = shares.shards
    return grant


def launch_job(
    job: Job,
    payload: Payload,
    environment: Mapping[str, str],
    time_limit: int,
    conf: SlurmConfig,
    shares: Shares,
) -> pb.LaunchJob:
    """``job``'s ``LaunchJob``: the ``COPIED`` attributes and the ``computed`` fields."""
    copied = {field: getattr(job, attribute) for field, attribute in COPIED.items()}
    fields = computed(job, payload, environment, time_limit, conf, shares)
    return pb.LaunchJob(**copied, **fields)
