"""``scontrol update job`` as a typed event: scontrol's keys parsed once, then applied.

``parse`` reads the KEY=VALUE pairs scontrol sends (keys in any case) into a
``JobUpdate`` at the service boundary, refusing a value that is not one with
Slurm's error (ESLURM_INVALID_TIME_LIMIT, ESLURM_INVALID_NODE_COUNT,
ESLURM_INVALID_PARTITION_NAME, EINVAL) and a key Corral does not update.
``changes`` turns it into one job's new fields, or the error Slurm gives when the
job's state or the caller's rights forbid it: a field only a pending job may
change, or a longer time limit, a lower nice or a priority asked by someone
without rights over the job's account. What needs the cluster (partitions
existing, access and limits, a reshaped job that no partition could run) is the
service's recheck.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller import bounds
from controller.jobstate import JobState
from controller.model import Job
from corral import errors, timefmt, units
from corral.errors import SlurmError

__all__ = ["JobUpdate", "changes", "checkpointed", "parse", "shrinks_to"]

#: The Job fields whose change can make a job unable to run anywhere.
RESHAPING = frozenset(
    {"partitions", "min_nodes", "max_nodes", "min_cpus", "mem_per_node", "mem_per_cpu"}
)


@dataclass(frozen=True, slots=True)
class NodeCount:
    """``NumNodes=N[-M]`` (``most``: N without M) or ``MinNodes=N[-M]`` (``most``: None
    without M, the job's maximum kept)."""

    least: int
    most: int | None


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """What one ``scontrol update job`` asks; None (or absent) where it asks nothing."""

    time_limit: int | None = None  # minutes; negative: UNLIMITED
    partitions: tuple[str, ...] | None = None
    account: str | None = None
    qos: str | None = None
    nodes: NodeCount | None = None
    min_cpus: int | None = None
    mem_per_node: int | None = None  # MiB; setting one memory kind clears the other
    mem_per_cpu: int | None = None
    nice: int | None = None
    name: str | None = None
    comment: str | None = None
    admin_priority: int | None = None
    dependency: str | None = None
    begin_time: int | None = None
    requeue: bool | None = None
    # Checkpointed=now (Corral's): the running job saved its state at this time, so
    # preemption, which prefers victims with the least work since one, counts from it.
    checkpointed: int | None = None
    # Switches=N[@max-time] (topology/tree): the count and the wait in seconds (None:
    # the cluster's max_switch_wait, as at submission).
    switches: tuple[int, int | None] | None = None
    # Licenses=: the job's new -L as given ("" none); the service checks the names
    # against Licenses= (controller/licenseadmit.py).
    licenses: str | None = None

    @property
    def pending_only(self) -> bool:
        """Whether it changes what only a pending job may change."""
        return any(
            value is not None
            for value in (
                self.partitions,
                self.account,
                self.qos,
                self.nodes,
                self.min_cpus,
                self.mem_per_node,
                self.mem_per_cpu,
                self.switches,
                self.licenses,
            )
        )


def _node_count(text: str, keep_max: bool) -> NodeCount:
    low, _, high = text.partition("-")
    if not low.isdigit() or (high and not high.isdigit()):
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)
    least = int(low)
    most = int(high) if high else (None if keep_max else least)
    if least < 1 or (most and most < least):
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)
    return NodeCount(least, most)


def _amount(key: str, value: str) -> int:
    try:
        return int(value) if key == "mincpusnode" else units.parse_memory(value)
    except ValueError:
        raise SlurmError(errors.EINVAL) from None


def _field(key: str, raw_key: str, value: str, now: int) -> dict[str, Any]:
    """One scontrol key as ``JobUpdate`` fields."""
    if key == "timelimit":
        try:
            return {"time_limit": timefmt.parse_duration(value)}
        except ValueError:
            raise SlurmError(errors.ESLURM_INVALID_TIME_LIMIT) from None
    if key == "partition":
        names = tuple(p for p in value.split(",") if p)
        if not names:
            raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME)
        return {"partitions": names}
    if key in ("account", "qos"):
        return {key: value}
    if key in ("numnodes", "reqnodes") and value.upper() == "ALL":
        return {}  # Slurm's: no change; scontrol then writes the resize scripts
    if key in ("numnodes", "reqnodes") and value == "0":
        return {"nodes": NodeCount(0, 0)}  # an expansion job's nodes given (expansion.merge)
    if key in ("numnodes", "reqnodes", "minnodes"):  # ReqNodes: NumNodes (scontrol(1))
        return {"nodes": _node_count(value, keep_max=key == "minnodes")}
    if key == "mincpusnode":
        return {"min_cpus": _amount(key, value)}
    if key == "minmemorynode":
        return {"mem_per_node": _amount(key, value), "mem_per_cpu": None}
    if key == "minmemorycpu":
        return {"mem_per_cpu": _amount(key, value), "mem_per_node": None}
    if key == "nice":
        if not value.lstrip("-").isdigit():
            raise SlurmError(errors.EINVAL)
        return {"nice": int(value)}
    if key in ("name", "jobname"):
        return {"name": value}
    if key == "comment":
        return {"comment": value}
    if key == "priority":
        if not value.isdigit():
            raise SlurmError(errors.EINVAL)
        return {"admin_priority": int(value)}
    if key == "dependency":
        return {"dependency": bounds.check_dependency(value)}
    if key in ("starttime", "begintime", "eligibletime"):
        try:
            return {"begin_time": timefmt.parse_timestamp(value, now)}
        except ValueError:
            raise SlurmError(errors.EINVAL) from None
    if key == "requeue":
        return {"requeue": value not in ("0", "no", "NO")}
    if key == "checkpointed":
        try:
            return {"checkpointed": min(timefmt.parse_timestamp(value, now, past=True), now)}
        except ValueError:
            raise SlurmError(errors.EINVAL) from None
    if key == "switches":
        return {"switches": _switches(value)}
    if key == "licenses":
        return {"licenses": value}
    raise SlurmError(errors.EINVAL, f"Update of {raw_key} is not supported")


def _switches(value: str) -> tuple[int, int | None]:
    """``N[@max-time]`` as ``--switches`` takes it."""
    number, at, wait = value.partition("@")
    if not number.isdigit():
        raise SlurmError(errors.EINVAL)
    try:
        return int(number), timefmt.parse_seconds(wait) if at else None
    except ValueError:
        raise SlurmError(errors.EINVAL) from None


def parse(updates: Mapping[str, str], now: int) -> JobUpdate:
    """scontrol's pairs as one ``JobUpdate`` (a later key overrides an earlier one)."""
    fields: dict[str, Any] = {}
    for raw_key, value in updates.items():
        fields.update(_field(raw_key.lower(), raw_key, value, now))
    return JobUpdate(**fields)


def checkpointed(job: Job, when: int) -> int:
    """The Checkpointed= time a report of a checkpoint at ``when`` (no later than now)
    gives ``job``: held at its start, as a time before it is of no checkpoint of this
    run; SlurmError unless the job runs. One rule for both reports, scontrol's and the
    node agent's (a touched CORRAL_CHECKPOINT_FILE)."""
    if job.state is JobState.PENDING:
        raise SlurmError(errors.ESLURM_JOB_PENDING)
    if job.state is not JobState.RUNNING:
        raise SlurmError(errors.ESLURM_ALREADY_DONE)
    return max(when, job.start_time)


def shrinks_to(job: Job, update: JobUpdate) -> int | None:
    """The node count a ``NumNodes=`` update leaves a running ``job`` with (None: it
    asks no such change). Slurm lets a running job shrink, never grow, by update:
    a count above what it holds is ``ESLURM_INVALID_NODE_COUNT``; a suspended job
    keeps its size (Slurm's FAQ: a job changing size must not be suspended)."""
    nodes = update.nodes
    if nodes is None or nodes.most is None or job.state is JobState.PENDING:
        return None
    if job.state.finished or not job.nodes:
        raise SlurmError(errors.ESLURM_ALREADY_DONE)
    if job.state is JobState.SUSPENDED:
        raise SlurmError(errors.ESLURM_DISABLED)
    if nodes.least > len(job.nodes):
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)
    return nodes.least


def changes(job: Job, update: JobUpdate, privileged: bool) -> dict[str, Any]:
    """``job``'s new fields; SlurmError where its state or the caller's rights
    (``privileged``: operator, administrator or coordinator of its account) forbid."""
    count = shrinks_to(job, update)
    others = replace(update, nodes=None) if count is not None else update
    if others.pending_only and job.state is not JobState.PENDING:
        raise SlurmError(errors.ESLURM_JOB_NOT_PENDING)
    out: dict[str, Any] = {}
    if count is not None and update.nodes is not None:
        # Its range after the shrink: never above the count it is left with, unless an
        # elastic job is given a new maximum (NumNodes=K-M); never a minimum above it.
        ceiling = update.nodes.most if job.elastic_signal and update.nodes.most else count
        out.update(min_nodes=min(job.min_nodes, count), max_nodes=max(ceiling, count))
        update = others
    if update.time_limit is not None:
        minutes = update.time_limit
        longer = minutes < 0 or (job.time_limit >= 0 and minutes > job.time_limit)
        if longer and not privileged:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        out["time_limit"] = minutes
        if job.state in (JobState.RUNNING, JobState.SUSPENDED):
            # The time it spent suspended does not count against its limit.
            end = job.start_time + minutes * 60 + job.suspended_secs
            out["end_time"] = 0 if minutes < 0 else end
    for kind, missing in (
        ("account", errors.ESLURM_INVALID_ACCOUNT),
        ("qos", errors.ESLURM_INVALID_QOS),
    ):
        value = getattr(update, kind)
        if value is not None:
            if not value:
                raise SlurmError(missing)
            out[kind] = value
    if update.nodes is not None:
        least, most = update.nodes.least, update.nodes.most
        if most is None:  # MinNodes without a maximum keeps the job's
            most = job.max_nodes if job.max_nodes is not None else least
            if most and most < least:
                raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)
        out.update(min_nodes=least, max_nodes=most, nodes_given=True)
        if not job.tasks_given:  # one task per node unless tasks were asked for
            out["num_tasks"] = least * (job.ntasks_per_node or 1)
    if update.nice is not None:
        if update.nice < job.nice and not privileged:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        out["nice"] = update.nice
    if update.checkpointed is not None:
        out["checkpointed"] = checkpointed(job, update.checkpointed)
    if update.admin_priority is not None and not privileged:
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)
    if update.mem_per_node is not None or update.mem_per_cpu is not None:
        out.update(mem_per_node=update.mem_per_node, mem_per_cpu=update.mem_per_cpu)
    for name in (
        "partitions",
        "min_cpus",
        "name",
        "comment",
        "admin_priority",
        "dependency",
        "begin_time",
        "requeue",
        "licenses",  # as given: the service checks it against Licenses= and rewrites it
    ):
        value = getattr(update, name)
        if value is not None:
            out[name] = value
    return out
