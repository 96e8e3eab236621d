"""GPU options given as a comma list, kept as given for the record.

``--gpus=1,2`` asks two GPUs (a type named again keeps its last count, as Slurm
22.05 counts it, and as the clients send it: ``gpus``, ``gpu_type``, ``gpus_also``,
``gres``), but Slurm's ``scontrol show job`` shows the text as given:
``TresPerJob=gres:gpu:1,gres:gpu:2`` (22.05's spelling; 24.11's, which Corral
prints, is ``gres/gpu:1,gres/gpu:2``), and ``--gpus-per-node=1,2``
``TresPerNode=gres:gpu:1,gres:gpu:2`` (measured on Slurm 22.05,
tests/unit/test_gpu_lists.py). The clients send such a list's text beside the counts
(JobSpec ``gpus_listed``, ``gpus_per_node_listed``); the controller keeps it only
where it counts as the request does, and refuses it otherwise, so that the record
never shows what the job does not ask.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.core.gpus import also_items, gpu_items
from controller.jobspec import JobSpec
from corral import errors
from corral.errors import SlurmError

__all__ = ["check", "counts", "shown"]


def counts(text: str) -> dict[str, int]:
    """A list of ``[type:]count`` as Slurm counts it: each type once, its last count;
    ValueError if an item is malformed or the list has one item only."""
    items = text.split(",")
    if len(items) < 2:
        raise ValueError(text)
    out: dict[str, int] = {}
    for item in items:
        kind, _, count = item.rpartition(":")
        if not count.isdigit() or int(count) < 1 or ":" in kind or kind.startswith("gres"):
            raise ValueError(item)
        out[kind] = int(count)
    return out


def _total_counts(spec: JobSpec) -> dict[str, int]:
    """The totals ``spec`` asks by type (--gpus's, and ``gpus_also``'s)."""
    asked = {spec.gpu_type: spec.gpus} if spec.gpus else {}
    return asked | dict(also_items(spec.gpus_also))


def _node_counts(spec: JobSpec) -> dict[str, int]:
    """The GPUs ``spec`` asks on every node by type."""
    return {kind: count for name, kind, count in gpu_items(spec.gres)[0] if name == "gpu"}


def check(spec: JobSpec) -> None:
    """Refuse (Slurm's ``Invalid generic resource (gres) specification``) a list text
    that does not count as ``spec`` asks: --gpus's the totals exactly, and
    --gpus-per-node's each of its types on every node."""
    try:
        if spec.gpus_listed and counts(spec.gpus_listed) != _total_counts(spec):
            raise ValueError(spec.gpus_listed)
        if spec.gpus_per_node_listed:
            per_node = _node_counts(spec)
            listed = counts(spec.gpus_per_node_listed)
            if any(per_node.get(kind) != count for kind, count in listed.items()):
                raise ValueError(spec.gpus_per_node_listed)
    except ValueError:
        raise SlurmError(errors.ESLURM_INVALID_GRES) from None


def shown(text: str) -> str:
    """A list as Slurm's record shows it, in 24.11's spelling: ``gres/gpu:1,gres/gpu:2``."""
    return ",".join(f"gres/gpu:{item}" for item in text.split(","))


def per_node_shown(items: Iterable[str], listed: str) -> list[str]:
    """TresPerNode's items: the GPUs of the types ``listed`` names as it gives them, in
    the place of the first, the others (``gpu:a100:1`` beside ``v100:1,v100:2``,
    ``craynetwork:1``) as they are."""
    try:
        kinds = set(counts(listed)) if listed else set()
    except ValueError:  # admission refuses such a text: a record never holds one
        kinds = set()
    if not kinds:
        return list(items)
    out: list[str] = []
    for item in items:
        parts = item.removeprefix("gres/").removeprefix("gres:").split(":")
        if parts[0] == "gpu" and (parts[1] if len(parts) > 2 else "") in kinds:
            if listed:
                out += shown(listed).split(",")
                listed = ""
            continue
        out.append(item)
    return out
