"""What sdiag shows: the controller's counters, kept where they happen.

``RpcStats`` counts each client request by Slurm's message type and by user
(``Handlers.dispatch`` feeds it); ``SchedulerStats`` the scheduling cycles
(``SchedulerLoop`` feeds it): every cycle under "Main schedule statistics",
and the cycles that ran backfill under "Backfilling stats" (Corral's pass
does both in one call, so a backfill cycle's time includes its main pass).
``reply`` gathers them with the job counters and queue sizes into the
``DiagReply`` that ``sdiag`` lays out; ``sdiag -r`` resets what Slurm resets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.principal import user_name
from corral.wire import corral_pb2 as pb

#: The Slurm message type each Controller RPC stands for, with its number.
MESSAGE_TYPES = {
    "Submit": ("REQUEST_SUBMIT_BATCH_JOB", 4003),
    "Jobs": ("REQUEST_JOB_INFO", 2003),
    "Nodes": ("REQUEST_NODE_INFO", 2007),
    "Partitions": ("REQUEST_PARTITION_INFO", 2009),
    "Signal": ("REQUEST_KILL_JOB", 5032),
    "JobControl": ("REQUEST_UPDATE_JOB", 3001),
    "NodeUpdate": ("REQUEST_UPDATE_NODE", 3002),
    "Config": ("REQUEST_BUILD_INFO", 2001),
    "Ping": ("REQUEST_PING", 1008),
    "Reconfigure": ("REQUEST_RECONFIGURE", 1003),
    "Shutdown": ("REQUEST_SHUTDOWN", 1005),
    "Priorities": ("REQUEST_PRIORITY_FACTORS", 2026),
    "Shares": ("REQUEST_SHARE_INFO", 2022),
    "Diag": ("REQUEST_STATS_INFO", 2035),
    "Token": ("REQUEST_AUTH_TOKEN", 5039),
    "StepStats": ("REQUEST_JOB_STEP_INFO", 2005),
    "Licenses": ("REQUEST_LICENSE_INFO", 1021),
    "AssocMgr": ("REQUEST_ASSOC_MGR_INFO", 2043),
    "Triggers": ("REQUEST_TRIGGER_GET", 2030),
    # Accounting, which Slurm's clients ask slurmdbd for: its message types.
    "History": ("DBD_GET_JOBS_COND", 1444),
    "AcctAdmin": ("DBD_GET_ASSOCS", 1410),
    "Report": ("DBD_GET_ASSOC_USAGE", 1411),
}


#: Histogram bounds (seconds) of pass and RPC durations, and of jobs started a pass.
SECONDS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)
STARTS = (0.0, 1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0)


@dataclass
class Buckets:
    """A histogram kept as plain counts (what the metrics endpoint renders)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bound, then +Inf
    total: float = 0.0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        index = next((i for i, b in enumerate(self.bounds) if value <= b), len(self.bounds))
        self.counts[index] += 1
        self.total += value


@dataclass
class RpcStats:
    by_method: dict[str, list[int]] = field(default_factory=dict)  # -> [count, total us]
    by_uid: dict[int, list[int]] = field(default_factory=dict)
    latency: dict[str, Buckets] = field(default_factory=dict)  # per method, seconds

    def count(self, method: str, uid: int, took_us: int) -> None:
        for entry in (
            self.by_method.setdefault(method, [0, 0]),
            self.by_uid.setdefault(uid, [0, 0]),
        ):
            entry[0] += 1
            entry[1] += took_us
        self.latency.setdefault(method, Buckets(SECONDS)).observe(took_us / 1e6)


@dataclass
class AgentStats:
    """How long the controller spends on each agent heartbeat (the node-liveness work
    of an agent that serves thousands of nodes): its histogram and the longest."""

    heartbeat: Buckets = field(default_factory=lambda: Buckets(SECONDS))
    heartbeat_max_s: float = 0.0

    def heard(self, took_s: float) -> None:
        self.heartbeat.observe(took_s)
        self.heartbeat_max_s = max(self.heartbeat_max_s, took_s)


@dataclass
class SchedulerStats:
    cycles: int = 0
    last_us: int = 0
    max_us: int = 0
    total_us: int = 0
    last_queue: int = 0
    total_depth: int = 0
    hit_depth: int = 0
    bf_cycles: int = 0
    bf_jobs: int = 0
    bf_last_when: int = 0
    bf_last_us: int = 0
    bf_max_us: int = 0
    bf_total_us: int = 0
    bf_last_depth: int = 0
    bf_last_queue: int = 0
    bf_hit_max_test: int = 0
    pass_seconds: Buckets = field(default_factory=lambda: Buckets(SECONDS))
    bf_seconds: Buckets = field(default_factory=lambda: Buckets(SECONDS))
    started: Buckets = field(default_factory=lambda: Buckets(STARTS))

    def reset(self) -> None:
        """sdiag -r: start counting again."""
        for name, value in vars(SchedulerStats()).items():
            setattr(self, name, value)

    def cycle(self, took_us: int, queue: int, tried: int, started: int = 0) -> None:
        self.pass_seconds.observe(took_us / 1e6)
        self.started.observe(started)
        self.cycles += 1
        self.last_us = took_us
        self.max_us = max(self.max_us, took_us)
        self.total_us += took_us
        self.last_queue = queue
        self.total_depth += tried
        self.hit_depth += tried < queue

    def backfill(self, now: int, took_us: int, queue: int, tried: int, started: int) -> None:
        self.bf_seconds.observe(took_us / 1e6)
        self.bf_cycles += 1
        self.bf_jobs += started
        self.bf_last_when = now
        self.bf_last_us = took_us
        self.bf_max_us = max(self.bf_max_us, took_us)
        self.bf_total_us += took_us
        self.bf_last_depth = tried
        self.bf_last_queue = queue
        self.bf_hit_max_test += tried < queue


def reply(
    now: int,
    since: int,
    counters: dict[str, int],
    pending: int,
    running: int,
    scheduler: SchedulerStats,
    rpcs: RpcStats,
    agents: tuple[int, int],
    dbd_queue: int,
) -> pb.DiagReply:
    """The DiagReply of these counters (``agents``: connected, messages queued)."""
    s = scheduler
    out = pb.DiagReply(
        now=now,
        since=since,
        agent_count=agents[0],
        agent_queue=agents[1],
        dbd_queue=dbd_queue,
        jobs_submitted=counters["submitted"],
        jobs_started=counters["started"],
        jobs_completed=counters["completed"],
        jobs_canceled=counters["canceled"],
        jobs_failed=counters["failed"],
        jobs_pending=pending,
        jobs_running=running,
        sched_last_us=s.last_us,
        sched_max_us=s.max_us,
        sched_cycles=s.cycles,
        sched_total_us=s.total_us,
        sched_last_queue=s.last_queue,
        sched_total_depth=s.total_depth,
        bf_total_jobs=s.bf_jobs,
        bf_cycles=s.bf_cycles,
        bf_last_when=s.bf_last_when,
        bf_last_us=s.bf_last_us,
        bf_max_us=s.bf_max_us,
        bf_total_us=s.bf_total_us,
        bf_last_depth=s.bf_last_depth,
        bf_last_queue=s.bf_last_queue,
        sched_hit_depth=s.hit_depth,
        bf_hit_max_test=s.bf_hit_max_test,
    )
    for method, (count, total) in sorted(rpcs.by_method.items(), key=lambda kv: -kv[1][0]):
        name, number = MESSAGE_TYPES.get(method, (method, 0))
        out.rpcs.add(name=name, id=number, count=count, total_us=total)
    for uid, (count, total) in sorted(rpcs.by_uid.items(), key=lambda kv: -kv[1][0]):
        out.users.add(user=user_name(uid), uid=uid, count=count, total_us=total)
    return out
