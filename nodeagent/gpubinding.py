"""What a launch's typed GPU grant gives it on its node: the GPUs its device fence
admits, the MPS server it runs under (for a GPU share), its NeuronCores, and MIG
instances named by UUID. Batch scripts and steps are bound alike.

The grant (``GpuGrant`` in LaunchJob and LaunchStep) is the only source: the
launch's environment names GPUs too (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES and
the share variables), but it starts as the submitter's, so a stale or forged
variable there must not widen the fence. An absent grant is an empty one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from corral.wire import corral_pb2 as pb
from nodeagent.devcgroup import BINDING
from nodeagent.gpus.migbinding import bind_mig
from nodeagent.gpus.neuron import NeuronBinding
from nodeagent.mps import MpsServers

__all__ = ["bind_gpus", "granted", "mps_gpu", "task_bindings"]


def granted(grant: pb.GpuGrant) -> set[int]:
    """The node's GPUs (by index) a launch may open: those it was given whole and
    those it holds a share of (an MPS share, shard or fraction)."""
    return set(grant.gpus) | set(grant.shared)


def mps_gpu(grant: pb.GpuGrant) -> int | None:
    """The GPU whose MPS server a launch runs under: the one it shares, when its share
    is under MPS (an mps share or a fraction by memory); None otherwise. A job holds
    one MPS pipe directory, so shares of several GPUs get no server, as before."""
    if grant.mps_percentage and len(grant.shared) == 1:
        return int(grant.shared[0])
    return None


def bind_gpus(
    env: dict[str, str],
    node: str,
    job_id: int,
    grant: pb.GpuGrant,
    mps: MpsServers | None,
    neuron: NeuronBinding | None,
    mig: Mapping[str, Mapping[int, str]],
) -> None:
    """Complete ``env`` (a batch script's or a step's on ``node``) in place."""
    if mps is not None:
        env.update(mps.acquire(node, job_id, mps_gpu(grant)))
    if neuron is not None:
        env.update(neuron.environment(node, grant.gpus))
    bind_mig(env, mig.get(node, {}))


def task_bindings(
    node: str,
    tasks: Sequence[Sequence[int]],
    neuron: NeuronBinding | None,
    mig: Mapping[str, Mapping[int, str]],
) -> list[dict[str, str]]:
    """Each local task's own binding variables under --gpu-bind: the GPUs the
    controller bound it to (``controller/gpubind.py``) in the variables every
    vendor reads and SLURM_STEP_GPUS, as slurmstepd sets them per task; its
    NeuronCores, and MIG instances by UUID, as for the whole launch."""
    out = []
    for gpus in tasks:
        text = ",".join(map(str, gpus))
        env = {name: text for name in BINDING}
        env["SLURM_STEP_GPUS"] = text
        if neuron is not None:
            env.update(neuron.environment(node, gpus))
        bind_mig(env, mig.get(node, {}))
        out.append(env)
    return out
