"""What a process given GPUs gains on its node beyond the controller's binding
variables: its MPS server's pipe (for a GPU share), its NeuronCores, and MIG
instances named by UUID. Batch scripts and steps are bound alike; only the
variable naming their GPUs differs (SLURM_JOB_GPUS, SLURM_STEP_GPUS)."""

from __future__ import annotations

from collections.abc import Mapping

from nodeagent.gpus.migbinding import bind_mig
from nodeagent.gpus.neuron import NeuronBinding
from nodeagent.mps import MpsServers

__all__ = ["bind_gpus"]


def bind_gpus(
    env: dict[str, str],
    node: str,
    job_id: int,
    gpus_key: str,
    mps: MpsServers | None,
    neuron: NeuronBinding | None,
    mig: Mapping[str, Mapping[int, str]],
) -> None:
    """Complete ``env`` (a batch script's or a step's on ``node``) in place."""
    if mps is not None:
        env.update(mps.acquire(node, job_id, env))
    if neuron is not None:
        env.update(neuron.environment(node, env, gpus_key))
    bind_mig(env, mig.get(node, {}))
