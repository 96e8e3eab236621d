"""What one scheduling cycle decided."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.jobstate import Reason


@dataclass(frozen=True, slots=True)
class Start:
    """Start ``job_id``; for an array's record, its pending task ``task`` (None: the first)."""

    job_id: int
    partition: str
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]  # MiB on each node
    # (name, type, count) generic resources on each node; () when the job has none.
    gres: tuple[tuple[tuple[str, str, int], ...], ...] = ()
    share: int = 0  # the job shares its CPUs, up to this many jobs per CPU (0: it does not)
    task: int | None = None


@dataclass(frozen=True, slots=True)
class Expected:
    """When and where a waiting job is expected to start (its backfill reservation)."""

    start_time: int
    partition: str
    nodes: tuple[str, ...]


@dataclass(slots=True)
class Plan:
    """Starts to commit, and for every pending job the reason it waits."""

    now: int
    starts: list[Start] = field(default_factory=list)
    reasons: dict[int, Reason] = field(default_factory=dict)
    details: dict[int, str] = field(default_factory=dict)  # e.g. "UnavailableNodes:n3"
    expected: dict[int, Expected] = field(default_factory=dict)  # from backfill
    # Pending jobs to end: past their --deadline, or never runnable under --kill-on-invalid-dep.
    ended: dict[int, Reason] = field(default_factory=dict)
    backfilled: bool = False  # a backfill pass ran: jobs not in ``expected`` have no estimate
    main_starts: int = 0  # how many of ``starts`` the main pass made (the rest: backfill)
    # Running jobs to preempt (requeue or cancel): victim -> the waiting job it makes room for.
    preempted: dict[int, int] = field(default_factory=dict)
