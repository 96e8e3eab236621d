"""What one scheduling cycle decided."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.jobstate import Reason


@dataclass(frozen=True, slots=True)
class Start:
    job_id: int
    partition: str
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]  # MiB on each node


@dataclass(slots=True)
class Plan:
    """Starts to commit, and for every pending job the reason it waits."""

    now: int
    starts: list[Start] = field(default_factory=list)
    reasons: dict[int, Reason] = field(default_factory=dict)
    details: dict[int, str] = field(default_factory=dict)  # e.g. "UnavailableNodes:n3"
