"""Power saving: idle nodes suspended by SuspendProgram, resumed by ResumeProgram.

As slurm.conf(5) and Slurm's power_save guide describe it (22.05):

  on              a node's usual life (``NodeRuntime.power`` is "")
  power_down      ``scontrol update State=POWER_DOWN_ASAP``: drained, suspended
                  once its jobs end (sinfo ``!``)
  powering_down   idle for SuspendTime (or ``State=POWER_DOWN``): SuspendProgram ran
                  for it; nothing starts there for SuspendTimeout (sinfo ``%``)
  powered_down    after SuspendTimeout (``idle~``); a ``State=CLOUD`` node starts here.
                  The scheduler may allocate it: that resumes it
  powering_up     ResumeProgram ran for it (a job got it, or ``State=POWER_UP``);
                  jobs on it are CONFIGURING until every node of theirs registers
                  (sinfo ``#``, ``alloc#``); not back within ResumeTimeout: DOWN
                  (``ResumeTimeout reached``) and powered down, ResumeFailProgram
                  runs, and its jobs are requeued

The programs run as the controller's user (SlurmUser) with the nodes' hostlist as
their one argument, off the event loop; at most SuspendRate (ResumeRate) nodes a
minute are suspended (resumed), the others wait for the next minute. Nodes named
by SuspendExcNodes, in a partition of SuspendExcParts or in a state of
SuspendExcStates are never suspended for idleness. A partition's SuspendTime,
SuspendTimeout and ResumeTimeout apply to its nodes (the largest of a node's
partitions). The rules are pure functions of a node's ``NodeRuntime``;
``PowerSaver.advance`` applies them to the store each scheduling cycle.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller import resumefile
from controller.holdings import holds_nodes
from controller.jobstate import JobState, NodeFail
from controller.model import Job, NodeRuntime
from controller.store import JobStore
from corral import errors, hooks, hostlist
from corral.config import SlurmConfig
from corral.errors import SlurmError

log = logging.getLogger(__name__)

ON = ""
POWER_DOWN = "power_down"
POWERING_DOWN = "powering_down"
POWERED_DOWN = "powered_down"
POWERING_UP = "powering_up"

#: The NodeInfo state flag each power state shows as (sinfo's ``! % ~ #``).
FLAGS = {
    POWER_DOWN: "POWER_DOWN",
    POWERING_DOWN: "POWERING_DOWN",
    POWERED_DOWN: "POWERED_DOWN",
    POWERING_UP: "POWERING_UP",
}

#: ``scontrol update NodeName= State=`` values this module carries out.
UPDATE_STATES = ("POWER_DOWN", "POWER_DOWN_ASAP", "POWER_DOWN_FORCE", "POWER_UP")

#: slurm.conf(5)'s defaults.
SUSPEND_TIMEOUT = 30
RESUME_TIMEOUT = 60
SUSPEND_RATE = 60
RESUME_RATE = 300

#: The reason of a node that did not register within ResumeTimeout.
RESUME_TIMED_OUT = "ResumeTimeout reached"

#: SuspendExcStates words, each a test of a node's runtime.
_EXC_STATES: dict[str, Callable[[NodeRuntime], bool]] = {
    "DOWN": lambda n: n.state == "DOWN",
    "DRAIN": lambda n: n.drain,
    "NOT_RESPONDING": lambda n: not n.responding,
}


def _seconds(text: str, default: int) -> int:
    """A duration setting: seconds, -1 for NONE/INFINITE/-1, ``default`` when unset."""
    if not text:
        return default
    if text.upper() in ("NONE", "INFINITE", "UNLIMITED", "-1"):
        return -1
    return int(text) if text.isdigit() else default


@dataclass(frozen=True, slots=True)
class PowerSettings:
    """The power-saving keys of slurm.conf, as the controller applies them."""

    suspend_program: str = ""
    resume_program: str = ""
    resume_fail_program: str = ""
    suspend_time: int = -1  # -1: never suspended for idleness
    suspend_timeout: int = SUSPEND_TIMEOUT
    resume_timeout: int = RESUME_TIMEOUT
    suspend_rate: int = SUSPEND_RATE  # nodes a minute, 0: no limit
    resume_rate: int = RESUME_RATE
    exc_nodes: frozenset[str] = frozenset()
    exc_parts: frozenset[str] = frozenset()
    exc_states: frozenset[str] = frozenset()
    # a node's own SuspendTime, SuspendTimeout, ResumeTimeout from its partitions
    per_node: tuple[tuple[str, tuple[int, int, int]], ...] = ()

    @classmethod
    def of(cls, conf: SlurmConfig) -> PowerSettings:
        s = dict(conf.settings)
        suspend_time = _seconds(s.get("SuspendTime", ""), -1)
        suspend_timeout = _seconds(s.get("SuspendTimeout", ""), SUSPEND_TIMEOUT)
        resume_timeout = _seconds(s.get("ResumeTimeout", ""), RESUME_TIMEOUT)
        per_node: dict[str, tuple[int, int, int]] = {}
        for part in conf.partitions:
            own = dict(part.power)
            if not own:
                continue
            values = (
                _seconds(own.get("SuspendTime", ""), suspend_time),
                _seconds(own.get("SuspendTimeout", ""), suspend_timeout),
                _seconds(own.get("ResumeTimeout", ""), resume_timeout),
            )
            for name in part.nodes:
                old = per_node.get(name, values)
                per_node[name] = (
                    max(old[0], values[0]),
                    max(old[1], values[1]),
                    max(old[2], values[2]),
                )
        exc_parts = frozenset(p for p in s.get("SuspendExcParts", "").split(",") if p)
        exc_nodes = set(hostlist.expand(s.get("SuspendExcNodes", "")))
        exc_nodes.update(n for p in conf.partitions if p.name in exc_parts for n in p.nodes)
        return cls(
            suspend_program=s.get("SuspendProgram", ""),
            resume_program=s.get("ResumeProgram", ""),
            resume_fail_program=s.get("ResumeFailProgram", ""),
            suspend_time=suspend_time,
            suspend_timeout=suspend_timeout,
            resume_timeout=resume_timeout,
            suspend_rate=_seconds(s.get("SuspendRate", ""), SUSPEND_RATE),
            resume_rate=_seconds(s.get("ResumeRate", ""), RESUME_RATE),
            exc_nodes=frozenset(exc_nodes),
            exc_parts=exc_parts,
            exc_states=frozenset(w.upper() for w in s.get("SuspendExcStates", "").split(",") if w),
            per_node=tuple(sorted(per_node.items())),
        )

    def times(self, name: str) -> tuple[int, int, int]:
        """``name``'s (SuspendTime, SuspendTimeout, ResumeTimeout)."""
        for node, values in self.per_node:
            if node == name:
                return values
        return self.suspend_time, self.suspend_timeout, self.resume_timeout


class RateWindow:
    """At most ``rate`` nodes in any minute (0: no limit): Suspend/ResumeRate."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._times: deque[int] = deque()

    def room(self, now: int) -> int | None:
        """How many nodes may go now (None: any number)."""
        if self.rate <= 0:
            return None
        while self._times and now - self._times[0] >= 60:
            self._times.popleft()
        return max(self.rate - len(self._times), 0)

    def take(self, now: int, count: int) -> None:
        self._times.extend([now] * count)


# ------------------------------------------------------------ the rules


def usable(node: NodeRuntime) -> bool:
    """Whether the scheduler may give a node in power saving to a job: powered down
    or powering up (it is resumed for the job), never on its way down."""
    return node.power in (POWERED_DOWN, POWERING_UP)


def asleep(node: NodeRuntime) -> bool:
    """Whether no agent is expected to answer for ``node`` now: its silence is not a
    failure (SlurmdTimeout does not apply)."""
    return node.power in (POWERED_DOWN, POWERING_UP, POWERING_DOWN)


def suspendable(node: NodeRuntime, busy: bool, idle_for: int, settings: PowerSettings) -> bool:
    """Whether ``node`` goes down now: idle for its SuspendTime, or asked (ASAP) and
    idle; excluded nodes and states only for the idleness rule."""
    if busy or node.reboot or node.state != "UP":
        return False
    if node.power == POWER_DOWN:
        return True
    suspend_time = settings.times(node.name)[0]
    if node.power != ON or suspend_time < 0 or idle_for < suspend_time:
        return False
    if not settings.suspend_program or node.name in settings.exc_nodes:
        return False
    return not any(_EXC_STATES.get(word, _never)(node) for word in settings.exc_states)


def _never(_node: NodeRuntime) -> bool:
    return False


def suspending(node: NodeRuntime, now: int) -> NodeRuntime:
    """``node`` as SuspendProgram runs for it (an ASAP request's drain ends here)."""
    drain, reason = node.drain, node.reason
    if node.power == POWER_DOWN:
        drain, reason = False, ""
    return replace(node, power=POWERING_DOWN, power_time=now, drain=drain, reason=reason)


def resuming(node: NodeRuntime, now: int) -> NodeRuntime:
    return replace(node, power=POWERING_UP, power_time=now)


def resume_failed(node: NodeRuntime, now: int, slurm_user: str) -> NodeRuntime:
    """Not registered within ResumeTimeout: DOWN, and powered down again; the reason
    is SlurmUser's, as slurmctld sets it."""
    return replace(
        node,
        power=POWERED_DOWN,
        power_time=now,
        state="DOWN",
        reason=RESUME_TIMED_OUT,
        reason_time=now,
        reason_user=slurm_user,
        reason_uid=0,
    )


def registered(node: NodeRuntime) -> NodeRuntime:
    """Its agent registered: a node powering up (or found up while powered down) is
    on again, its idle time counted from now on; one powering down stays so until
    SuspendTimeout."""
    if node.power in (POWERING_UP, POWERED_DOWN):
        return replace(node, power=ON, power_time=0, idle_since=None)
    return node


def idle_for(node: NodeRuntime, now: int) -> int:
    """How long ``node`` has been idle by its record (0: busy or not yet seen)."""
    return 0 if node.idle_since is None else now - node.idle_since


def idle_noted(node: NodeRuntime, busy: bool, now: int) -> NodeRuntime:
    """``node`` with when it went idle: ``now`` if it just did, None while busy. On
    the journaled record, so that a restarted controller suspends it when SuspendTime
    has passed since, not since its own start; changed only when it changes."""
    if busy:
        return node if node.idle_since is None else replace(node, idle_since=None)
    return node if node.idle_since is not None else replace(node, idle_since=now)


def cloud(node: NodeRuntime) -> NodeRuntime:
    """A ``State=CLOUD`` node as slurm.conf brings it in: powered down and idle."""
    return replace(node, state="UP", power=POWERED_DOWN, reason="", responding=False)


def configuring(job: Job, nodes: Mapping[str, NodeRuntime]) -> bool:
    """Whether ``job`` waits for nodes to power up (Slurm's CONFIGURING)."""
    return any(
        (node := nodes.get(name)) is not None and node.power in (POWERED_DOWN, POWERING_UP)
        for name in job.nodes
    )


def requested(node: NodeRuntime, state: str, busy: bool) -> tuple[NodeRuntime, str]:
    """``scontrol update State=POWER_*`` of one node: the node, and what follows now
    ("suspend", "resume" or ""). A node powering up or idle goes down at once; a busy
    one once its jobs end (FORCE's job ends are the caller's, so it is idle)."""
    if state == "POWER_UP":
        return node, "resume" if node.power in (POWERED_DOWN, POWERING_DOWN) else ""
    if node.power in (POWERING_DOWN, POWERED_DOWN):
        return node, ""
    if node.power == POWERING_UP or not busy or state == "POWER_DOWN_FORCE":
        return node, "suspend"
    if state == "POWER_DOWN_ASAP":
        return replace(
            node, power=POWER_DOWN, drain=True, reason=node.reason or "POWER_DOWN_ASAP"
        ), ""
    return replace(node, power=POWER_DOWN), ""


# ------------------------------------------------------------ applied each cycle


class PowerSaver:
    """The cycle's power steps, the rate windows and the programs in flight."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._conf: SlurmConfig | None = None
        self.settings = PowerSettings()
        self.suspends = RateWindow(SUSPEND_RATE)
        self.resumes = RateWindow(RESUME_RATE)
        self._tasks: set[asyncio.Task[None]] = set()

    def _adopt(self) -> None:
        if self._conf is not self.store.conf:
            self._conf = self.store.conf
            self.settings = PowerSettings.of(self.store.conf)
            self.suspends.rate = self.settings.suspend_rate
            self.resumes.rate = self.settings.resume_rate

    def advance(self, now: int) -> bool:
        """Suspend idle nodes, resume allocated ones, time out both; whether any node
        changed."""
        self._adopt()
        store, settings = self.store, self.settings
        idle_rule = settings.suspend_time >= 0 or settings.per_node
        if not idle_rule and not any(node.power for node in store.nodes.values()):
            return False  # every cycle: without power saving, one look at each node
        held = {name for job in store.jobs.values() if holds_nodes(job) for name in job.nodes}
        changed = False
        to_suspend: list[str] = []
        to_resume: list[str] = []
        failed: list[str] = []
        for name, node in list(store.nodes.items()):
            busy = name in held
            if idle_rule and (noted := idle_noted(node, busy, now)) is not node:
                store.change_node(noted, now)
                node = noted
            _, suspend_timeout, resume_timeout = settings.times(name)
            if node.power == POWERING_DOWN and now - node.power_time >= suspend_timeout:
                store.change_node(replace(node, power=POWERED_DOWN, power_time=now), now)
                changed = True
            elif node.power == POWERING_UP and now - node.power_time > resume_timeout:
                failed.append(name)
            elif node.power == POWERED_DOWN and busy and node.state == "UP":
                to_resume.append(name)
            elif suspendable(node, busy, idle_for(node, now), settings):
                to_suspend.append(name)
        for name in failed:
            self._resume_failed(name, now)
        changed = bool(failed) or changed
        room = self.resumes.room(now)
        going = to_resume[:room] if room is not None else to_resume
        if going:
            self.resume(going, now)
            changed = True
        room = self.suspends.room(now)
        going = to_suspend[:room] if room is not None else to_suspend
        if going:
            self.suspend(going, now)
            changed = True
        return changed

    def suspend(self, names: list[str], now: int) -> None:
        for name in names:
            self.store.change_node(suspending(self.store.nodes[name], now), now)
        self.suspends.take(now, len(names))
        log.info("power save: suspending %s", hostlist.compress(names))
        self._run(self.settings.suspend_program, names, "SuspendProgram")

    def resume(self, names: list[str], now: int) -> None:
        """ResumeProgram for ``names``, told (SLURM_RESUME_FILE) the jobs they are
        woken for: those holding any of them now."""
        jobs = {job.job_id: job for name in names for job in self.store.jobs_on(name)}
        for name in names:
            self.store.change_node(resuming(self.store.nodes[name], now), now)
        self.resumes.take(now, len(names))
        log.info("power save: resuming %s", hostlist.compress(names))
        if self.settings.resume_program:
            text = resumefile.content(jobs.values(), names)
            self._spawn(self._program(self.settings.resume_program, names, "ResumeProgram", text))

    def _resume_failed(self, name: str, now: int) -> None:
        log.error("node %s not resumed by ResumeTimeout: marking DOWN", name)
        failed = resume_failed(self.store.nodes[name], now, self.store.conf.slurm_user)
        self.store.change_node(failed, now)
        for job in self.store.jobs_on(name):
            self.store.post(job.job_id, _node_fail(job, now))
        if self.settings.resume_fail_program:
            self._run(self.settings.resume_fail_program, [name], "ResumeFailProgram")

    def ask(self, names: Iterable[str], state: str, now: int) -> None:
        """``scontrol update NodeName= State=POWER_*`` (an operator's, the service
        checks): where slurm.conf names the programs that carry it out."""
        self._adopt()
        if not (self.settings.suspend_program and self.settings.resume_program):
            raise SlurmError(errors.ESLURM_DISABLED, "power saving is not configured")
        up: list[str] = []
        down: list[str] = []
        for name in names:
            if state == "POWER_DOWN_FORCE":
                self.store.fail_jobs_on(name, now)
            busy = bool(self.store.jobs_on(name))
            changed, then = requested(self.store.nodes[name], state, busy)
            self.store.change_node(changed, now)
            if then == "resume":
                up.append(name)
            elif then == "suspend":
                down.append(name)
        if up:
            self.resume(up, now)
        if down:
            self.suspend(down, now)

    def _run(self, program: str, names: list[str], what: str) -> None:
        if not program:
            return
        self._spawn(self._program(program, names, what))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _program(
        self, program: str, names: list[str], what: str, resume_file: str | None = None
    ) -> None:
        """Run ``program`` for ``names``; with ``resume_file``, SLURM_RESUME_FILE
        names a file of that text until it ends."""
        env = {"SLURM_CONF": self.store.conf.path}
        argv = [hostlist.compress(names)]
        if resume_file is None:
            result = await hooks.run_async(program, env, argv=argv)
        else:
            with resumefile.memory_file(resume_file) as path:
                env[resumefile.VARIABLE] = path
                result = await hooks.run_async(program, env, argv=argv)
        if not result.ok:
            log.error(
                "power save: %s %s failed: %s output:%s",
                what,
                hostlist.compress(names),
                result.describe(),
                result.output.strip(),
            )


def _node_fail(job: Job, now: int) -> NodeFail:
    """The event that ends ``job`` on a node that never came up: a batch job is
    requeued (its script never ran), an allocation ends NODE_FAIL."""
    return NodeFail(now, not job.interactive)


def node_up(store: JobStore, name: str, now: int) -> list[Job]:
    """``name``'s agent registered: a node powering up (or powered down) is on again;
    the running jobs that no longer wait for any node, to be launched now."""
    node = store.nodes.get(name)
    if node is None or node.power not in (POWERING_UP, POWERED_DOWN):
        return []
    log.info("node %s powered up", name)
    store.change_node(registered(node), now)
    return [
        job
        for job in store.jobs_on(name)
        if job.state is JobState.RUNNING and not configuring(job, store.nodes)
    ]
