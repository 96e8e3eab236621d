"""What the controller knows of dbd's associations, users and QOS, and what it enforces.

The controller asks dbd for its cluster's associations, users and QOS every
few seconds (``controller.accounting``), as typed messages
(``Accounting.Associations``, built by ``dbd.enforced``), and keeps the newest
set in the journal, so
it enforces the same rules while dbd is away and after a restart, as
slurmctld does with its association cache.

With ``AccountingStorageEnforce``:

* ``associations`` (implied by ``limits``, ``qos`` and ``safe``): a job runs
  under an association of its user, account (else the user's DefaultAccount)
  and partition, or is refused at submission;
* ``qos``: its QOS must be one the association allows (default: the
  association's DefaultQOS, else ``normal``);
* ``limits``: the association's and QOS's limits hold, as pending reasons
  (``AssocMaxJobsLimit``, ``QOSMaxWallDurationPerJobLimit``, ...; see
  ``gates``) or, for submit limits, as a refused submission.

A user's association holds the Max* limits and Priority it leaves unset as its
account (or the nearest account above) sets them, as slurmdbd fills them for
slurmctld (``associnherit``); Grp* limits stay on their own account, which counts
everything below it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from controller import associnherit, assocrows, jobtres
from controller.core.limits import Gate
from controller.jobstate import Reason
from controller.model import Job
from corral import errors
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb

#: Slurm's message when a submission breaks a submit limit (ESLURM_ACCOUNTING_POLICY).
POLICY = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
ESLURM_ACCOUNTING_POLICY = 2050
#: sacctmgr's AdminLevels that give rights in the controller (None gives none).
ADMIN_LEVELS = ("Operator", "Administrator")


def _optional(message: Any, name: str) -> int | None:
    """An optional limit of a typed message: None where dbd stores no limit."""
    return int(getattr(message, name)) if message.HasField(name) else None


@dataclass(frozen=True, slots=True)
class Assoc:
    account: str
    user: str
    partition: str
    parent: str
    shares: int = 1  # Fairshare (-1: "parent")
    max_jobs: int | None = None
    max_submit: int | None = None
    max_wall: int | None = None  # minutes
    grp_jobs: int | None = None
    grp_submit: int | None = None
    grp_wall: int | None = None  # minutes
    grp_tres: Mapping[str, int] = field(default_factory=dict)
    grp_tres_mins: Mapping[str, int] = field(default_factory=dict)
    max_tres: Mapping[str, int] = field(default_factory=dict)  # per job
    max_tres_node: Mapping[str, int] = field(default_factory=dict)
    max_tres_mins: Mapping[str, int] = field(default_factory=dict)  # per job
    qos: tuple[str, ...] = ("normal",)
    def_qos: str = ""

    @classmethod
    def from_message(cls, m: pb.AssociationLimits) -> Assoc:
        return cls(
            account=m.account,
            user=m.user,
            partition=m.partition,
            parent=m.parent,
            shares=m.shares,
            max_jobs=_optional(m, "max_jobs"),
            max_submit=_optional(m, "max_submit"),
            max_wall=_optional(m, "max_wall"),
            grp_jobs=_optional(m, "grp_jobs"),
            grp_submit=_optional(m, "grp_submit"),
            grp_wall=_optional(m, "grp_wall"),
            grp_tres=dict(m.grp_tres),
            grp_tres_mins=dict(m.grp_tres_mins),
            max_tres=dict(m.max_tres),
            max_tres_node=dict(m.max_tres_per_node),
            max_tres_mins=dict(m.max_tres_mins),
            qos=tuple(m.qos),
            def_qos=m.def_qos,
        )

    @property
    def key(self) -> str:
        return f"{self.account}/{self.user}/{self.partition}"


@dataclass(frozen=True, slots=True)
class QosLimits:
    name: str
    max_wall: int | None = None
    max_jobs_pu: int | None = None
    max_submit_pu: int | None = None
    max_jobs_pa: int | None = None
    grp_jobs: int | None = None
    grp_tres: Mapping[str, int] = field(default_factory=dict)
    max_tres: Mapping[str, int] = field(default_factory=dict)  # per job
    max_tres_node: Mapping[str, int] = field(default_factory=dict)
    max_tres_mins: Mapping[str, int] = field(default_factory=dict)  # per job
    max_tres_pu: Mapping[str, int] = field(default_factory=dict)
    max_tres_pa: Mapping[str, int] = field(default_factory=dict)
    preempt: frozenset[str] = frozenset()  # the QOS whose jobs this one's may preempt
    max_submit_pa: int | None = None
    grp_submit: int | None = None
    priority: int = 0  # the multifactor QOS factor's numerator
    grp_tres_mins: Mapping[str, int] = field(default_factory=dict)
    grp_wall: int | None = None  # minutes
    usage_factor: float = 1.0  # what fair share charges its jobs' use by
    # Preemption of its jobs under preempt/qos: GraceTime (seconds), PreemptExemptTime
    # (seconds; None: slurm.conf's) and PreemptMode ("" or "cluster": slurm.conf's).
    grace_time: int = 0
    preempt_exempt_time: int | None = None
    preempt_mode: str = ""

    @classmethod
    def from_message(cls, m: pb.QosLimitsRecord) -> QosLimits:
        return cls(
            name=m.name,
            max_wall=_optional(m, "max_wall"),
            max_jobs_pu=_optional(m, "max_jobs_pu"),
            max_submit_pu=_optional(m, "max_submit_pu"),
            max_jobs_pa=_optional(m, "max_jobs_pa"),
            grp_jobs=_optional(m, "grp_jobs"),
            grp_tres=dict(m.grp_tres),
            max_tres=dict(m.max_tres),
            max_tres_node=dict(m.max_tres_per_node),
            max_tres_mins=dict(m.max_tres_mins),
            max_tres_pu=dict(m.max_tres_pu),
            max_tres_pa=dict(m.max_tres_pa),
            preempt=frozenset(m.preempt),
            max_submit_pa=_optional(m, "max_submit_pa"),
            grp_submit=_optional(m, "grp_submit"),
            priority=m.priority,
            grp_tres_mins=dict(m.grp_tres_mins),
            grp_wall=_optional(m, "grp_wall"),
            usage_factor=m.usage_factor,
            grace_time=m.grace_time,
            preempt_exempt_time=_optional(m, "preempt_exempt_time"),
            preempt_mode=m.preempt_mode,
        )


class Spent(NamedTuple):
    """Decayed usage: billing-seconds (fair share's), wall-clock seconds (a job counts
    once), and seconds held of each TRES (``cpu``, ``mem`` in MiB, ``gres/gpu``...)."""

    billing: float
    wall: float
    tres: Mapping[str, float]


NOTHING_SPENT = Spent(0.0, 0.0, {})


@dataclass(frozen=True, slots=True)
class AssocSet:
    """One cluster's associations, users (name -> DefaultAccount), QOS, users'
    AdminLevel (Operator or Administrator; None is left out) and coordinators
    (user -> the accounts they were made coordinator of).

    ``reply`` is dbd's ``AssociationsReply`` as fetched, serialized: what the
    journal keeps, so that a newer controller re-reads it with its own
    understanding of each field. ``remote_licenses``: the licenses served from
    outside (``sacctmgr add resource``) this cluster may use, ``name@server`` ->
    count (``controller.remotelicenses`` merges them into slurm.conf's).
    """

    assocs: tuple[Assoc, ...] = ()
    users: Mapping[str, str] = field(default_factory=dict)
    qos: Mapping[str, QosLimits] = field(default_factory=dict)
    admin_levels: Mapping[str, str] = field(default_factory=dict)
    coordinators: Mapping[str, frozenset[str]] = field(default_factory=dict)
    reply: bytes = field(default=b"", compare=False)
    remote_licenses: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, reply: pb.AssociationsReply) -> AssocSet:
        coords: dict[str, set[str]] = {}
        for c in reply.coordinators:
            coords.setdefault(c.user, set()).add(c.account)
        return cls(
            tuple(Assoc.from_message(m) for m in associnherit.filled(reply.associations)),
            {u.name: u.default_account for u in reply.users},
            {q.name: QosLimits.from_message(q) for q in reply.qos},
            {u.name: u.admin_level for u in reply.users if u.admin_level in ADMIN_LEVELS},
            {user: frozenset(accounts) for user, accounts in coords.items()},
            reply.SerializeToString(deterministic=True),
            {f"{r.name}@{r.server}": r.count for r in reply.remote_licenses},
        )

    @classmethod
    def from_rows(
        cls,
        assocs: Iterable[Mapping[str, str]],
        users: Iterable[Mapping[str, str]],
        qos: Iterable[Mapping[str, str]],
        coordinators: Iterable[Mapping[str, str]] = (),
    ) -> AssocSet:
        """A set from sacctmgr's rows (``controller.assocrows``), as journals written
        before dbd sent typed messages keep it."""
        return cls.from_reply(assocrows.reply(assocs, users, qos, coordinators))

    def coordinated(self, user: str) -> frozenset[str]:
        """The accounts ``user`` coordinates, with every account below them (as Slurm,
        a coordinator of an account is one of its sub-accounts too)."""
        tops = self.coordinators.get(user)
        if not tops:
            return frozenset()
        parents = {a.account: a.parent for a in self.assocs if not a.user}
        found = set()
        for account in parents:
            seen: set[str] = set()
            name = account
            while name and name not in seen:
                if name in tops:
                    found.add(account)
                    break
                seen.add(name)
                name = parents.get(name, "")
        return frozenset(found | tops)

    def to_json(self) -> str:
        return json.dumps({"reply": base64.b64encode(self.reply).decode()})

    @classmethod
    def from_json(cls, text: str) -> AssocSet:
        """The set ``to_json`` wrote (or an older controller's rows); ValueError (or
        KeyError) if ``text`` is not one."""
        data = json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("reply"), str):
            return cls.from_reply(pb.AssociationsReply.FromString(base64.b64decode(data["reply"])))
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise ValueError("not a Corral association record")
        # Sets journaled before coordinators were fetched have three kinds of rows.
        assocs, users, qos, *coordinators = data["rows"]
        return cls.from_rows(assocs, users, qos, *coordinators[:1])

    def find(self, user: str, account: str, partition: str) -> Assoc | None:
        """The user's association in ``account`` for ``partition`` (else for any)."""
        best = None
        for assoc in self.assocs:
            if assoc.user == user and assoc.account == account:
                if assoc.partition == partition:
                    return assoc
                if not assoc.partition:
                    best = assoc
        return best

    def ancestors(self, assoc: Assoc) -> list[Assoc]:
        """``assoc``'s account and the accounts above it (whose Grp* limits cover it)."""
        accounts = {a.account: a for a in self.assocs if not a.user}
        chain: list[Assoc] = []
        name = assoc.account if assoc.user else assoc.parent
        while name in accounts and len(chain) < 64:
            chain.append(accounts[name])
            name = accounts[name].parent
        return chain


def enforcing(enforce: Iterable[str]) -> frozenset[str]:
    """AccountingStorageEnforce's words, with what each implies (limits -> associations)."""
    words = frozenset(w.strip().lower() for w in enforce)
    if words & {"limits", "qos", "safe", "wckeys"}:
        words |= {"associations"}
    if "safe" in words:
        words |= {"limits"}
    return words


def admit(
    job: Job,
    assocs: AssocSet,
    enforce: frozenset[str],
    queued: Iterable[Job],
    *,
    qos_given: bool = True,
) -> Job:
    """``job`` with its account and QOS settled, or SlurmError as sbatch reports it.
    ``qos_given``: the submitter named the QOS (else the association's DefaultQOS
    replaces ``normal``, the QOS a job gets when none is asked for)."""
    account = job.account or assocs.users.get(job.user, "")
    for partition in job.partitions:
        assoc = assocs.find(job.user, account, partition)
        if assoc is None:
            raise SlurmError(errors.ESLURM_INVALID_ACCOUNT)
    assoc = assocs.find(job.user, account, job.partitions[0])
    assert assoc is not None
    qos = job.qos
    if "qos" in enforce:
        qos = assoc.def_qos if assoc.def_qos and not qos_given else job.qos
        if qos not in assoc.qos:
            raise SlurmError(errors.ESLURM_INVALID_QOS)
    if "limits" in enforce:
        _check_submit_limits(job, assoc, assocs, assocs.qos.get(qos), list(queued))
    return replace(job, account=account, qos=qos)


def _check_submit_limits(
    job: Job, assoc: Assoc, assocs: AssocSet, qos: QosLimits | None, queued: list[Job]
) -> None:
    mine = [j for j in queued if j.user == job.user and j.account == assoc.account]
    if assoc.max_submit is not None and len(mine) + 1 > assoc.max_submit:
        raise SlurmError(ESLURM_ACCOUNTING_POLICY, POLICY)
    for parent in assocs.ancestors(assoc):
        if parent.grp_submit is not None:
            under = [j for j in queued if j.account == parent.account]
            if len(under) + 1 > parent.grp_submit:
                raise SlurmError(ESLURM_ACCOUNTING_POLICY, POLICY)
    if qos is None:
        return
    in_qos = [j for j in queued if j.qos == qos.name]
    caps = (
        (qos.max_submit_pu, [j for j in in_qos if j.user == job.user]),
        (qos.max_submit_pa, [j for j in in_qos if j.account == assoc.account]),
        (qos.grp_submit, in_qos),
    )
    for cap, counted in caps:
        if cap is not None and len(counted) + 1 > cap:
            raise SlurmError(ESLURM_ACCOUNTING_POLICY, POLICY)


def _class(tres: str) -> str:
    """The family of a TRES for Slurm's reason names ("" for TRES not enforced)."""
    if tres.startswith("gres/"):
        return "gres"
    if tres.startswith("license/"):
        return "license"
    return tres if tres in ("cpu", "mem", "node", "billing") else ""


def _table(*reasons: Reason | None) -> dict[str, Reason]:
    families = ("cpu", "mem", "node", "gres", "billing", "license")
    return {k: r for k, r in zip(families, reasons, strict=True) if r}


R = Reason
#: Per kind of limit, Slurm's reason for each TRES family (cpu, mem, node, gres, billing,
#: license: libslurm 22.05's words, e.g. ``AssocGrpLicense``; per node, ``...UnknownPerNode``).
ASSOC_GRP = _table(R.ASSOC_GRP_CPU, R.ASSOC_GRP_MEM, R.ASSOC_GRP_NODE, R.ASSOC_GRP_GRES,
                   R.ASSOC_GRP_BILLING, R.ASSOC_GRP_LICENSE)  # fmt: skip
ASSOC_JOB = _table(R.ASSOC_MAX_CPU_PER_JOB, R.ASSOC_MAX_MEM_PER_JOB, R.ASSOC_MAX_NODE_PER_JOB,
                   R.ASSOC_MAX_GRES_PER_JOB, R.ASSOC_MAX_BILLING_PER_JOB,
                   R.ASSOC_MAX_LICENSE_PER_JOB)  # fmt: skip
ASSOC_NODE = _table(R.ASSOC_MAX_CPU_PER_NODE, R.ASSOC_MAX_MEM_PER_NODE, None,
                    R.ASSOC_MAX_GRES_PER_NODE, R.ASSOC_MAX_BILLING_PER_NODE,
                    R.ASSOC_MAX_UNKNOWN_PER_NODE)  # fmt: skip
ASSOC_MINS = _table(R.ASSOC_MAX_CPU_MINUTES_PER_JOB, R.ASSOC_MAX_MEM_MINUTES_PER_JOB,
                    R.ASSOC_MAX_NODE_MINUTES_PER_JOB, R.ASSOC_MAX_GRES_MINUTES_PER_JOB,
                    R.ASSOC_MAX_BILLING_MINUTES_PER_JOB,
                    R.ASSOC_MAX_LICENSE_MINUTES_PER_JOB)  # fmt: skip
ASSOC_GRP_MINS = _table(R.ASSOC_GRP_CPU_MINUTES, R.ASSOC_GRP_MEM_MINUTES, R.ASSOC_GRP_NODE_MINUTES,
                        R.ASSOC_GRP_GRES_MINUTES, R.ASSOC_GRP_BILLING_MINUTES,
                        R.ASSOC_GRP_LICENSE_MINUTES)  # fmt: skip
QOS_GRP = _table(R.QOS_GRP_CPU, R.QOS_GRP_MEM, R.QOS_GRP_NODE, R.QOS_GRP_GRES, R.QOS_GRP_BILLING,
                 R.QOS_GRP_LICENSE)  # fmt: skip
QOS_GRP_MINS = _table(R.QOS_GRP_CPU_MINUTES, R.QOS_GRP_MEM_MINUTES, R.QOS_GRP_NODE_MINUTES,
                      R.QOS_GRP_GRES_MINUTES, R.QOS_GRP_BILLING_MINUTES,
                      R.QOS_GRP_LICENSE_MINUTES)  # fmt: skip
QOS_JOB = _table(R.QOS_MAX_CPU_PER_JOB, R.QOS_MAX_MEM_PER_JOB, R.QOS_MAX_NODE_PER_JOB,
                 R.QOS_MAX_GRES_PER_JOB, R.QOS_MAX_BILLING_PER_JOB,
                 R.QOS_MAX_LICENSE_PER_JOB)  # fmt: skip
QOS_NODE = _table(R.QOS_MAX_CPU_PER_NODE, R.QOS_MAX_MEM_PER_NODE, None,
                  R.QOS_MAX_GRES_PER_NODE, R.QOS_MAX_BILLING_PER_NODE,
                  R.QOS_MAX_UNKNOWN_PER_NODE)  # fmt: skip
QOS_MINS = _table(R.QOS_MAX_CPU_MINUTES_PER_JOB, R.QOS_MAX_MEM_MINUTES_PER_JOB,
                  R.QOS_MAX_NODE_MINUTES_PER_JOB, R.QOS_MAX_GRES_MINUTES_PER_JOB,
                  R.QOS_MAX_BILLING_MINUTES_PER_JOB,
                  R.QOS_MAX_LICENSE_MINUTES_PER_JOB)  # fmt: skip
QOS_USER = _table(R.QOS_MAX_CPU_PER_USER, R.QOS_MAX_MEM_PER_USER, R.QOS_MAX_NODE_PER_USER,
                  R.QOS_MAX_GRES_PER_USER, R.QOS_MAX_BILLING_PER_USER,
                  R.QOS_MAX_LICENSE_PER_USER)  # fmt: skip
QOS_ACCOUNT = _table(R.QOS_MAX_CPU_PER_ACCOUNT, R.QOS_MAX_MEM_PER_ACCOUNT,
                     R.QOS_MAX_NODE_PER_ACCOUNT, R.QOS_MAX_GRES_PER_ACCOUNT,
                     R.QOS_MAX_BILLING_PER_ACCOUNT, R.QOS_MAX_LICENSE_PER_ACCOUNT)  # fmt: skip


class _Gates:
    """The gates of one job, built limit by limit."""

    def __init__(self, job: Job) -> None:
        self.tres = jobtres.of_job(job)
        self.wall = job.time_limit
        self.found: list[Gate] = []

    def hold(self, reason: Reason) -> None:
        """A limit the job breaks by itself."""
        self.found.append(Gate("", 0, 1, reason))

    def over(
        self, limits: Mapping[str, int], amounts: Mapping[str, int], table: Mapping[str, Reason]
    ) -> None:
        for name, cap in limits.items():
            reason = table.get(_class(name))
            if reason and amounts.get(name, 0) > cap:
                self.hold(reason)

    def over_minutes(self, limits: Mapping[str, int], table: Mapping[str, Reason]) -> None:
        """MaxTRESMins: the job's TRES times its time limit (no limit breaks any)."""
        for name, cap in limits.items():
            reason = table.get(_class(name))
            amount = self.tres.total.get(name, 0)
            if reason and amount and (self.wall < 0 or amount * self.wall > cap):
                self.hold(reason)

    def over_usage(
        self, used: Spent, limits: Mapping[str, int], safe: bool, table: Mapping[str, Reason]
    ) -> None:
        """GrpTRESMins against decayed usage (billing from fair share's charge, every
        other TRES held): the job waits once it is reached, and with ``safe`` once its
        own whole run would pass it."""
        for name, cap in limits.items():
            reason = table.get(_class(name))
            spent = used.billing if name == "billing" else used.tres.get(name, 0.0)
            ahead = self.tres.total.get(name, 0) * max(self.wall, 0) if safe else 0
            if reason and spent / 60 + ahead >= cap:
                self.hold(reason)

    def over_wall(self, used: Spent, cap: int | None, safe: bool, reason: Reason) -> None:
        """GrpWall (minutes) against decayed wall-clock usage, as ``over_usage``."""
        ahead = max(self.wall, 0) if safe else 0
        if cap is not None and used.wall / 60 + ahead >= cap:
            self.hold(reason)

    def counted(self, limits: Mapping[str, int], prefix: str, table: Mapping[str, Reason]) -> None:
        """Limits on the sum over running jobs (``prefix`` names whose sum)."""
        for name, cap in limits.items():
            reason = table.get(_class(name))
            if reason:
                self.found.append(
                    Gate(f"{prefix}:{name}", cap, self.tres.total.get(name, 0), reason)
                )


def gates(
    job: Job,
    assocs: AssocSet,
    used: Callable[[Assoc], Spent] = lambda _: NOTHING_SPENT,
    safe: bool = False,
    qos_used: Callable[[str], Spent] = lambda _: NOTHING_SPENT,
) -> tuple[Gate, ...]:
    """The limits ``job`` must fit under to start (checked and counted by the core).

    ``used`` gives an association's decayed usage (``Spent``; its subtree's
    for an account), for GrpTRESMins and GrpWall: a job waits
    once the usage reaches the limit, and with ``safe``
    (AccountingStorageEnforce=safe) also when its own request for its whole
    time limit would pass it. ``qos_used`` is the same for a QOS's own.
    """
    partition = job.partition or (job.partitions[0] if job.partitions else "")
    assoc = assocs.find(job.user, job.account, partition)
    if assoc is None:
        return ()
    g = _Gates(job)
    wall = job.time_limit
    if assoc.max_wall is not None and (wall < 0 or wall > assoc.max_wall):
        g.hold(Reason.ASSOC_MAX_WALL)
    g.over(assoc.max_tres, g.tres.total, ASSOC_JOB)
    g.over(assoc.max_tres_node, g.tres.per_node, ASSOC_NODE)
    g.over_minutes(assoc.max_tres_mins, ASSOC_MINS)
    if assoc.max_jobs is not None:
        g.found.append(Gate(f"a:{assoc.key}:jobs", assoc.max_jobs, 1, Reason.ASSOC_MAX_JOBS))
    for parent in (assoc, *assocs.ancestors(assoc)):
        g.over_usage(used(parent), parent.grp_tres_mins, safe, ASSOC_GRP_MINS)
        g.over_wall(used(parent), parent.grp_wall, safe, Reason.ASSOC_GRP_WALL)
        if parent.grp_jobs is not None:
            g.found.append(Gate(f"g:{parent.key}:jobs", parent.grp_jobs, 1, Reason.ASSOC_GRP_JOBS))
        g.counted(parent.grp_tres, f"g:{parent.key}", ASSOC_GRP)
    qos = assocs.qos.get(job.qos)
    if qos is not None:
        g.over_usage(qos_used(qos.name), qos.grp_tres_mins, safe, QOS_GRP_MINS)
        g.over_wall(qos_used(qos.name), qos.grp_wall, safe, Reason.QOS_GRP_WALL)
        if qos.max_wall is not None and (wall < 0 or wall > qos.max_wall):
            g.hold(Reason.QOS_MAX_WALL)
        g.over(qos.max_tres, g.tres.total, QOS_JOB)
        g.over(qos.max_tres_node, g.tres.per_node, QOS_NODE)
        g.over_minutes(qos.max_tres_mins, QOS_MINS)
        user, account = f"q:{qos.name}:u:{job.user}", f"q:{qos.name}:a:{job.account}"
        if qos.max_jobs_pu is not None:
            g.found.append(Gate(f"{user}:jobs", qos.max_jobs_pu, 1, Reason.QOS_MAX_JOBS_PER_USER))
        if qos.max_jobs_pa is not None:
            g.found.append(
                Gate(f"{account}:jobs", qos.max_jobs_pa, 1, Reason.QOS_MAX_JOBS_PER_ACCOUNT)
            )
        if qos.grp_jobs is not None:
            g.found.append(Gate(f"q:{qos.name}:jobs", qos.grp_jobs, 1, Reason.QOS_GRP_JOBS))
        g.counted(qos.grp_tres, f"q:{qos.name}", QOS_GRP)
        g.counted(qos.max_tres_pu, user, QOS_USER)
        g.counted(qos.max_tres_pa, account, QOS_ACCOUNT)
    return tuple(g.found)
