"""Event triggers (strigger): programs run when a node or a job does something.

``TriggerBook`` holds the cluster's triggers, as slurmctld's trigger_mgr.c
does, and decides when each fires; ``controller/triggerrun.py`` runs the
programs and ``controller/triggerops.py`` answers strigger. The store owns the
book and journals it (``TRIGGERS_KEY``), so triggers outlive a restart.

How a trigger goes, in Slurm's words:

* set: it watches a node event (``down``, ``up``, ``drained``, ``fail``,
  ``idle``, ``reconfig``) on some nodes or any (``res_id`` ``*``), or a job
  event (``time``, ``fini``, or ``down``/``fail``/``up`` of the job's nodes);
* pulled: at a check the event has happened; ``due`` is when its program runs
  (``offset`` seconds after the event; ``time`` fires ``-offset`` seconds
  before the time limit, ``idle`` once a node has been idle ``offset``
  seconds), with ``arg`` the nodes concerned or the job id;
* run: at the first check at or after ``due`` its program runs, once; then it
  is gone, unless ``perm`` (``--flags=PERM``), which sets it again as it was.

Node events are recorded as they happen (``note_node``, called by the store
for every change of a node's state) and forgotten at each check, so that a
node that went down and came back between two checks still fires its
``down`` trigger, as Slurm's event bitmaps do; DRAINED and idle depend on
the jobs too and are seen at the checks. Like them they live in memory only: a
restart forgets events not yet checked, never a trigger.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace

from controller.drain import usable
from controller.holdings import holds_nodes
from controller.jobstate import COMPLETING, JobState
from controller.journal import record_from_row
from controller.model import Job, NodeRuntime
from corral import errors, hostlist
from corral.errors import SlurmError

#: The events a trigger of each resource type may watch (strigger's flags).
NODE_TYPES = ("up", "down", "drained", "fail", "idle", "reconfig")
JOB_TYPES = ("up", "down", "fail", "time", "fini")
#: The controller's link to dbd: it failed, it works again (Slurm's slurmdbd triggers).
DBD_FAIL = "primary_slurmdbd_failure"
DBD_RESUMED = "primary_slurmdbd_resumed_operation"
DBD_TYPES = (DBD_FAIL, DBD_RESUMED)
#: The events a trigger of each resource type may watch.
TYPES = {"node": NODE_TYPES, "job": JOB_TYPES, "slurmdbd": DBD_TYPES}
#: Slurm's ESLURM_TRIGGER_DUP and ESRCH: "Duplicate event trigger", "No such process".
ESLURM_TRIGGER_DUP = 2089
ESRCH = 3


@dataclass(frozen=True, slots=True)
class Trigger:
    id: int
    res_type: str  # "node", "job" or "slurmdbd"
    res_id: str  # "*", a hostlist, the job id, or "" (slurmdbd)
    types: tuple[str, ...]
    offset: int
    uid: int
    gid: int
    user: str
    program: str
    perm: bool = False
    due: int = 0  # 0: waiting for its event; else when its program is to run
    arg: str = ""  # what the program is given: the nodes concerned or the job id

    @property
    def job_id(self) -> int:
        return int(self.res_id) if self.res_type == "job" else 0

    def same_as(self, other: Trigger) -> bool:
        """Slurm's duplicate test: everything equal but the id and the pulled state."""
        return replace(other, id=self.id, due=self.due, arg=self.arg, gid=self.gid) == self


@dataclass(slots=True)
class Events:
    """Node events seen since the last check (Slurm's trigger_*_nodes_bitmap)."""

    down: set[str] = field(default_factory=set)
    up: set[str] = field(default_factory=set)
    drained: set[str] = field(default_factory=set)
    fail: set[str] = field(default_factory=set)
    reconfig: bool = False
    dbd: set[str] = field(default_factory=set)  # DBD_FAIL, DBD_RESUMED

    def of(self, kind: str) -> set[str]:
        named: dict[str, set[str]] = {
            "down": self.down,
            "up": self.up,
            "drained": self.drained,
            "fail": self.fail,
        }
        return named[kind]


class TriggerBook:
    """The cluster's triggers by id, with the events seen since the last check."""

    def __init__(self) -> None:
        self.by_id: dict[int, Trigger] = {}
        self.next_id = 1
        self.events = Events()
        self.idle_since: dict[str, int] = {}  # idle nodes -> since when (seen at checks)
        self.drained: set[str] | None = None  # DRAINED at the last check (None: no check yet)

    # ------------------------------------------------------------ strigger

    def add(self, trigger: Trigger, node_names: Iterable[str], job: Job | None) -> Trigger:
        """``trigger`` set (its id is given here), after slurmctld's checks: the job
        exists and runs or waits, the nodes exist, no equal trigger is set."""
        if trigger.res_type == "job":
            if job is None:
                raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
            if job.state.finished:
                raise SlurmError(errors.ESLURM_ALREADY_DONE)
        elif trigger.res_type == "node" and trigger.res_id != "*":
            try:
                named = hostlist.expand(trigger.res_id)
            except ValueError:
                raise SlurmError(errors.ESLURM_INVALID_NODE_NAME) from None
            if not named or not set(named) <= set(node_names):
                raise SlurmError(errors.ESLURM_INVALID_NODE_NAME)
        if any(t.same_as(trigger) for t in self.by_id.values()):
            raise SlurmError(ESLURM_TRIGGER_DUP, "Duplicate event trigger")
        trigger = replace(trigger, id=self.next_id)
        self.next_id += 1
        self.by_id[trigger.id] = trigger
        return trigger

    def clear(self, uid: int, trig_id: int, job_id: int, owner: int | None) -> list[Trigger]:
        """Remove the triggers matching ``trig_id``, ``job_id`` and ``owner`` (0 and
        None: any) that caller ``uid`` may remove: root, or the trigger's owner.
        Slurm's errors: ESRCH when none matched, access denied when all that
        matched belong to others."""
        matched = [
            t
            for t in self.by_id.values()
            if (not trig_id or t.id == trig_id)
            and (not job_id or t.job_id == job_id)
            and (owner is None or t.uid == owner)
        ]
        allowed = [t for t in matched if uid in (0, t.uid)]
        if matched and not allowed:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        if not allowed:
            raise SlurmError(ESRCH, "No such process")
        for t in allowed:
            del self.by_id[t.id]
        return allowed

    def listed(self) -> list[Trigger]:
        """What ``strigger --get`` shows: triggers not yet fired, and PERM ones."""
        return [t for t in self.by_id.values() if not t.due or t.perm]

    # ------------------------------------------------------------ events

    def note_node(self, old: NodeRuntime | None, new: NodeRuntime) -> None:
        """A node changed (the store calls this for every change): record its events."""
        if old is None:
            return
        if new.state == "DOWN" and old.state != "DOWN":
            self.events.down.add(new.name)
        elif old.state == "DOWN" and new.state != "DOWN":
            self.events.up.add(new.name)

    def note_fail(self, name: str) -> None:
        """``scontrol update state=FAIL``: the node is failing (Slurm's FAIL flag)."""
        self.events.fail.add(name)

    def note_reconfig(self) -> None:
        """slurm.conf was read again."""
        self.events.reconfig = True

    def note_dbd(self, reachable: bool) -> None:
        """The accounting delivery lost dbd, or reached it again after losing it."""
        self.events.dbd.add(DBD_RESUMED if reachable else DBD_FAIL)

    # ------------------------------------------------------------ checks

    def check(self, now: int, nodes: Mapping[str, NodeRuntime], jobs: Mapping[int, Job]) -> bool:
        """Pull every trigger whose event has happened (set ``due`` and ``arg``) and
        forget the events seen; whether any trigger changed (to be journaled).

        A node's jobs are not part of its state, so DRAINED (drained, running
        nothing) and idle are seen here, from the jobs that hold nodes, and only
        while some trigger is set: a node drained before, or idle since before,
        the first trigger counts from that trigger's first check."""
        if not self.by_id:
            self.events, self.drained = Events(), None
            self.idle_since.clear()
            return False
        busy = {name for job in jobs.values() if holds_nodes(job) for name in job.nodes}
        drained = {name for name, node in nodes.items() if node.drain and name not in busy}
        if self.drained is not None:
            self.events.drained |= drained - self.drained
        self.drained = drained
        for name, node in nodes.items():
            if usable(node) and name not in busy:
                self.idle_since.setdefault(name, now)
            else:
                self.idle_since.pop(name, None)
        changed = False
        for trigger in list(self.by_id.values()):
            if trigger.due:
                continue
            if trigger.res_type == "job":
                pulled = self._job_event(trigger, now, jobs.get(trigger.job_id))
            elif trigger.res_type == "slurmdbd":
                pulled = self._dbd_event(trigger, now)
            else:
                pulled = self._node_event(trigger, now)
            if pulled is not trigger:
                changed = True
                if pulled is None:
                    del self.by_id[trigger.id]
                else:
                    self.by_id[trigger.id] = pulled
        self.events = Events()
        return changed

    def _node_event(self, trigger: Trigger, now: int) -> Trigger:
        watched = None if trigger.res_id == "*" else set(hostlist.expand(trigger.res_id))
        for kind in trigger.types:
            if kind == "reconfig":
                if self.events.reconfig:
                    return replace(trigger, due=now + trigger.offset, arg="reconfig")
                continue
            if kind == "idle":
                since = now - trigger.offset
                seen = {n for n, t in self.idle_since.items() if t <= since}
                due = now
            else:
                seen = self.events.of(kind)
                due = now + trigger.offset
            hit = seen if watched is None else seen & watched
            if hit:
                return replace(trigger, due=max(due, 1), arg=hostlist.compress(sorted(hit)))
        return trigger

    def _dbd_event(self, trigger: Trigger, now: int) -> Trigger:
        for kind in trigger.types:
            if kind in self.events.dbd:
                return replace(trigger, due=max(now + trigger.offset, 1), arg=kind)
        return trigger

    def _job_event(self, trigger: Trigger, now: int, job: Job | None) -> Trigger | None:
        done = job is None or (job.state.finished and COMPLETING not in job.flags)
        if "fini" in trigger.types and done:
            return replace(trigger, due=max(now + trigger.offset, 1), arg=trigger.res_id)
        if job is None or done:
            # A defunct job's trigger goes, as in Slurm; so does one of a job that
            # ended, whose time limit and nodes can no longer concern it.
            return None
        if (
            "time" in trigger.types
            and job.state in (JobState.RUNNING, JobState.SUSPENDED)
            and job.end_time > 0
            and job.end_time - now <= -trigger.offset
        ):
            return replace(trigger, due=now, arg=trigger.res_id)
        for kind in ("down", "fail", "up"):
            if kind in trigger.types and self.events.of(kind) & set(job.nodes):
                return replace(trigger, due=max(now + trigger.offset, 1), arg=trigger.res_id)
        return trigger

    def take_due(self, now: int) -> list[Trigger]:
        """The pulled triggers whose time has come, as they fired: each is removed,
        or, PERM, set again to wait for its next event. A job's time limit and end
        come once: a PERM trigger watching them goes when it fires (set again, it
        would fire at every check, as slurmctld's does)."""
        due = [t for t in self.by_id.values() if t.due and t.due <= now]
        for trigger in due:
            if trigger.perm and not {"time", "fini"} & set(trigger.types):
                self.by_id[trigger.id] = replace(trigger, due=0, arg="")
            else:
                del self.by_id[trigger.id]
        return due

    # ------------------------------------------------------------ journal

    def to_json(self) -> str:
        return json.dumps(
            {"next_id": self.next_id, "triggers": [asdict(t) for t in self.by_id.values()]}
        )

    @classmethod
    def from_json(cls, text: str) -> TriggerBook:
        data = json.loads(text)
        book = cls()
        book.next_id = int(data["next_id"])
        for row in data["triggers"]:
            trigger = record_from_row(Trigger, row)
            book.by_id[trigger.id] = trigger
        return book
