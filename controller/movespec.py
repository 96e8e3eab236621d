"""Which pending jobs may move to another cluster, and what is sent there.

Issue 20 asks beyond Slurm that a job waiting in one cluster move, once and before
it starts, to another of the clusters its ``-M`` list named, where it would start
sooner (Kueue's MultiKueue; docs/federation.md, "A pending job moves"). This module
holds the rules as pure functions; ``controller/moves.py`` applies them every
MoveInterval.

A movable job keeps its submission's wire ``JobSpec`` (without script, arguments
and environment, which its payload holds already) so that the other cluster gets
the very request its user made, not one rebuilt from the job record.
"""

from __future__ import annotations

from dataclasses import replace

from controller.jobspec import JobSpec, to_wire
from controller.jobstate import JobState
from controller.model import Job, Payload
from corral.wire import corral_pb2 as pb

#: Slurm's variable naming the cluster a job runs in when it was sent there
#: (``cli/clusters.py`` sets it for sbatch -M): its clients talk to that cluster.
WORKING_CLUSTER = "SLURM_WORKING_CLUSTER"


def names(clusters: str) -> list[str]:
    """The clusters an -M list names, lower case, each once, in its order."""
    return list(dict.fromkeys(n.strip().lower() for n in clusters.split(",") if n.strip()))


def movable(spec: JobSpec) -> bool:
    """Whether a job so submitted may move: a batch job (no array: its tasks share one
    record and payload) whose -M list named several clusters."""
    return len(names(spec.clusters)) > 1 and not spec.array and not spec.interactive


def kept(spec: JobSpec) -> bytes:
    """What a movable job keeps of its request besides the payload: the wire spec, as
    its user's own (``--uid``/``--gid``, which root alone may give, were applied), and
    not held (a held job does not move; one released is no longer held)."""
    rest = replace(
        spec, script="", argv=(), environment={}, run_as_uid=None, run_as_gid=None, hold=False
    )
    data: bytes = to_wire(rest, pb.JobSpec()).SerializeToString()
    return data


def may_move(job: Job) -> bool:
    """Whether ``job`` may still move: pending, never started, not held, not a
    heterogeneous component, named several clusters, neither moving nor moved here."""
    return (
        job.state is JobState.PENDING
        and bool(job.clusters)
        and not job.moved_to
        and not job.moved_from
        and not job.start_time
        and not job.restarts
        and not job.held
        and not job.het_job_id
    )


def key(cluster: str, job_id: int) -> str:
    """The move's key, which the other cluster's controller keeps on the job it makes
    (``SubmitRequest.moved_from``): a retried move finds that job again."""
    return f"{cluster}:{job_id}"


def valid_key(text: str) -> bool:
    """Whether ``text`` is a move's key as ``key`` makes it (a cluster name, a job id)."""
    cluster, sep, job_id = text.rpartition(":")
    return bool(sep and cluster) and len(text) <= 80 and job_id.isascii() and job_id.isdigit()


def request(job: Job, payload: Payload, origin: str, working: str) -> pb.SubmitRequest:
    """The submission sent to the other cluster: the job's own request, and in its
    environment ``SLURM_WORKING_CLUSTER`` (``working``: "name:host:port:version")."""
    spec = pb.JobSpec.FromString(payload.spec)
    spec.script = payload.script
    spec.argv.extend(payload.argv)
    spec.environment.update(dict(payload.environment))
    spec.environment[WORKING_CLUSTER] = working
    return pb.SubmitRequest(spec=spec, moved_from=key(origin, job.job_id))
