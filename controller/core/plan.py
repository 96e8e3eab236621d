"""What one scheduling cycle decided."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from controller.jobstate import Reason

_EMPTY: Mapping[int, Any] = MappingProxyType({})


def _empty() -> Mapping[int, Any]:
    return _EMPTY


@dataclass(frozen=True, slots=True)
class Alternative:
    """One of a job's flavors (core/flavors.py) and what a pass found for it."""

    label: str  # "gpu:h100:8", "gpu:h100:8 --prefer=nvlink"
    gres: str  # the --gres it asks
    # "starts" (the chosen one, starting now), "awaited" (the one the job waits for),
    # "borrows" (it fits, but would borrow: passed over), "untried", or the pending
    # reason it could not start now with ("Resources", "QueueCohortFull", ...).
    outcome: str
    start: int = 0  # its expected start (backfill's plan); 0: none


@dataclass(frozen=True, slots=True)
class Choice:
    """Which of a job's flavors a pass chose (to start, or to wait for) and why."""

    chosen: int  # index into ``alternatives``
    alternatives: tuple[Alternative, ...]
    # first: its first choice; next: the ones before could not start now; borrowing:
    # none fits without borrowing (WhenCanBorrow=TryNextFlavor); soonest: expected to
    # start soonest; preempting: preemption may make room (WhenCanPreempt=MayStopSearch);
    # waiting: none can start now and none has an expected start.
    why: str

    @property
    def gres(self) -> str:
        return self.alternatives[self.chosen].gres


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
    # The GPUs it gets on each node by index (() when it has none), and the CPU ids it
    # gets there (near those GPUs first); core/devices.py names both.
    gpus: tuple[tuple[int, ...], ...] = ()
    cpu_ids: tuple[tuple[int, ...], ...] = ()
    # How core/devices.py names them (core/gpus.py): CPUs near its GPUs only
    # (--gres-flags=enforce-binding), GPUs spread over this many sockets (--gpus-per-socket).
    enforce: bool = False
    sockets: int = 0
    flavor: Choice | None = None  # of a job naming alternatives: the one it gets, and why
    # How core/cpupick.py takes its CPUs: its tasks' -c, its distribution over sockets
    # ("" cyclic, block, fcyclic), and --gpus-per-task when its GPUs follow its tasks.
    cpt: int = 1
    dist: str = ""
    task_gpus: int = 0
    # The CPUs of ``cpus`` it may use on each node where fewer (core/threads.py); ().
    used: tuple[int, ...] = ()
    # On which nodes its CPUs follow the distribution alone, not its GPUs (a GPU total
    # or GPUs per node that took cores beyond its GPUs' sockets: core/gpusocketcap.py).
    spread: tuple[bool, ...] = ()
    # Free cores a socket must have for its CPUs to come from it (--cores-per-socket or
    # -B above 1: core/cpupick.py ``socket_room``); 0: any socket.
    socket_cores: int = 0
    # GPUs per socket where they are all the job's GPUs (core/socketspread.py: its CPUs
    # are laid out first, and it gets these near each socket they are on); 0: none.
    socket_gpus: int = 0
    # --ntasks-per-socket: at most this many of its tasks on each socket, their CPUs
    # as core/taskspersocket.py lays them out; 0: any.
    socket_tasks: int = 0


@dataclass(frozen=True, slots=True)
class Expected:
    """When and where a waiting job is expected to start (its backfill reservation)."""

    start_time: int
    partition: str
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """What one pass decided, whole and unchangeable once ``schedule`` returns it:
    starts to commit, for every pending job the reason it waits, the jobs to end and
    the running jobs to preempt with what is done to each. The store only re-checks
    it against the ledger and applies it."""

    now: int
    starts: tuple[Start, ...] = ()
    reasons: Mapping[int, Reason] = field(default_factory=_empty)
    details: Mapping[int, str] = field(default_factory=_empty)  # e.g. "UnavailableNodes:n3"
    expected: Mapping[int, Expected] = field(default_factory=_empty)  # from backfill
    # Pending jobs to end: past their --deadline, or never runnable under --kill-on-invalid-dep.
    ended: Mapping[int, Reason] = field(default_factory=_empty)
    backfilled: bool = False  # a backfill pass ran: jobs not in ``expected`` have no estimate
    main_starts: int = 0  # how many of ``starts`` the main pass made (the rest: backfill)
    # Running jobs to preempt: victim -> the waiting job it makes room for; those in
    # ``requeued`` go back to pending (PreemptMode=REQUEUE, a job that may requeue),
    # those in ``suspended`` are suspended (PreemptMode=SUSPEND: their CPUs lent, their
    # memory and GRES kept), the others are cancelled.
    preempted: Mapping[int, int] = field(default_factory=_empty)
    requeued: frozenset[int] = frozenset()
    suspended: frozenset[int] = frozenset()
    # Victims with a GraceTime: victim -> seconds they are given after the warning.
    grace: Mapping[int, int] = field(default_factory=_empty)
    # Victims of a queue's reclaim: victim -> why, in a line (core/queueplan.py).
    why: Mapping[int, str] = field(default_factory=_empty)
    # Waiting jobs that name alternatives: which one each waits for, and why.
    choices: Mapping[int, Choice] = field(default_factory=_empty)
    # Jobs of a StrictFIFO queue waiting (Priority) behind its head, which could not
    # start this pass: job -> the head (core/queueplan.py).
    behind: Mapping[int, int] = field(default_factory=_empty)
    # Jobs with --switches considered for the first time: job -> now, when their wait
    # for a placement on few enough leaf switches begins (core/topology.py).
    switch_waits: Mapping[int, int] = field(default_factory=_empty)
    # Elastic jobs (core/elastic.py): running ones that grow, with what they get on
    # their new nodes (a ``Start`` of those nodes alone); and those that shrink under
    # pressure, with the nodes they give back and the waiting job they make room for.
    grown: Mapping[int, Start] = field(default_factory=_empty)
    shrunk: Mapping[int, tuple[str, ...]] = field(default_factory=_empty)
    shrunk_for: Mapping[int, int] = field(default_factory=_empty)


@dataclass(slots=True)
class Draft:
    """A plan while a pass fills it in (the main pass, backfill, preemption)."""

    now: int
    starts: list[Start] = field(default_factory=list)
    reasons: dict[int, Reason] = field(default_factory=dict)
    details: dict[int, str] = field(default_factory=dict)
    expected: dict[int, Expected] = field(default_factory=dict)
    ended: dict[int, Reason] = field(default_factory=dict)
    backfilled: bool = False
    main_starts: int = 0
    preempted: dict[int, int] = field(default_factory=dict)
    requeued: set[int] = field(default_factory=set)
    suspended: set[int] = field(default_factory=set)
    grace: dict[int, int] = field(default_factory=dict)
    why: dict[int, str] = field(default_factory=dict)
    choices: dict[int, Choice] = field(default_factory=dict)
    behind: dict[int, int] = field(default_factory=dict)
    switch_waits: dict[int, int] = field(default_factory=dict)
    grown: dict[int, Start] = field(default_factory=dict)
    shrunk: dict[int, tuple[str, ...]] = field(default_factory=dict)
    shrunk_for: dict[int, int] = field(default_factory=dict)

    def freeze(self) -> Plan:
        return Plan(
            now=self.now,
            starts=tuple(self.starts),
            reasons=MappingProxyType(self.reasons),
            details=MappingProxyType(self.details),
            expected=MappingProxyType(self.expected),
            ended=MappingProxyType(self.ended),
            backfilled=self.backfilled,
            main_starts=self.main_starts,
            preempted=MappingProxyType(self.preempted),
            requeued=frozenset(self.requeued),
            suspended=frozenset(self.suspended),
            grace=MappingProxyType(self.grace),
            why=MappingProxyType(self.why),
            choices=MappingProxyType(self.choices),
            behind=MappingProxyType(self.behind),
            switch_waits=MappingProxyType(self.switch_waits),
            grown=MappingProxyType(self.grown),
            shrunk=MappingProxyType(self.shrunk),
            shrunk_for=MappingProxyType(self.shrunk_for),
        )
