"""``scontrol show assoc_mgr`` (the AssocMgr RPC): the controller's association cache.

slurmctld answers it from its assoc_mgr: every association, user and QOS it
holds from slurmdbd, each with what its jobs use now. Here the cache is the
``AssocSet`` fetched from dbd (its typed reply carries ids, parent ids and
tree positions), and the use is computed on the spot from what the
controller knows: the jobs in the store (running ones hold TRES and count
toward GrpJobs, pending ones toward GrpSubmitJobs) and fair share's decayed
usage (``PriorityKeeper``: UsageRaw, GrpTRESMins' and GrpWall's use). An
account's use includes every account and user below it, as Slurm's does. Each
record shows the limits it inherits from the accounts above it as its own
(``associnherit``), as slurmctld holds them.

Who sees what follows slurmctld: with PrivateData ``usage`` a caller who is no
operator sees only their own user associations and those of the accounts
they coordinate; with ``users``, only their own user record. QOS records are
shown to all.
"""

from __future__ import annotations

import pwd
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller import associnherit, assoclimits, jobtres
from controller.associations import AssocSet
from controller.core.fairshare import ShareTree, Usage
from controller.core.priority import TRES_ORDER
from controller.jobstate import JobState
from controller.model import Job
from controller.principal import Principal
from corral.wire import corral_pb2 as pb

#: AssocMgrRequest's flags (Slurm's ASSOC_MGR_INFO_FLAG_*).
ASSOC, USERS, QOS = 1, 2, 4
#: Slurm's NO_VAL: the uid of a user name the system does not know.
NO_VAL = 0xFFFFFFFE
#: Fairshare=parent as Slurm stores it (SLURMDB_FS_USE_PARENT).
FS_USE_PARENT = 0x7FFFFFFF
#: The states whose jobs hold their TRES (Slurm counts suspended jobs as running).
HOLDING = (JobState.RUNNING, JobState.SUSPENDED)


def uid_of(user: str) -> int:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return NO_VAL


@dataclass(slots=True)
class _Use:
    """What the jobs of one association, QOS, or QOS's account or user use now."""

    jobs: int = 0
    submitted: int = 0
    accruing: int = 0
    tres: dict[str, int] = field(default_factory=dict)
    run_secs: dict[str, int] = field(default_factory=dict)

    def add(self, job: Job, now: int) -> None:
        self.submitted += 1
        if job.state in HOLDING:
            self.jobs += 1
            remaining = _remaining(job, now)
            for name, count in jobtres.of_job(job).total.items():
                self.tres[name] = self.tres.get(name, 0) + count
                self.run_secs[name] = self.run_secs.get(name, 0) + count * remaining
        elif _accruing(job, now):
            self.accruing += 1


def _remaining(job: Job, now: int) -> int:
    """Seconds left of a running job's time limit (none for an unlimited one)."""
    if job.time_limit < 0 or not job.start_time:
        return 0
    ran = now - job.start_time - job.suspended_secs
    if job.state == JobState.SUSPENDED and job.suspend_time:
        ran -= now - job.suspend_time
    return max(job.time_limit * 60 - ran, 0)


def _accruing(job: Job, now: int) -> bool:
    """A pending job that accrues age priority: eligible, and not held."""
    return (
        job.state == JobState.PENDING
        and not job.held
        and bool(job.eligible_time)
        and job.eligible_time <= now
    )


def _usage(use: _Use, wall: float, tres_secs: Mapping[str, float]) -> pb.AssocMgrUsage:
    return pb.AssocMgrUsage(
        jobs=use.jobs,
        submitted=use.submitted,
        accruing=use.accruing,
        wall=wall,
        tres=use.tres,
        tres_secs={name: int(secs) for name, secs in tres_secs.items()},
        run_secs=use.run_secs,
    )


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the request asks for, and what PrivateData leaves the caller."""

    users: frozenset[str] = frozenset()  # lower case; empty: all
    accounts: frozenset[str] = frozenset()
    qos: tuple[str, ...] = ()
    flags: int = ASSOC | USERS | QOS
    hide_usage: bool = False  # PrivateData=usage, for a caller who is no operator
    hide_users: bool = False  # PrivateData=users, likewise

    @classmethod
    def of(cls, req: pb.AssocMgrRequest, who: Principal, private: frozenset[str]) -> Wanted:
        return cls(
            frozenset(u.lower() for u in req.users),
            frozenset(a.lower() for a in req.accounts),
            tuple(req.qos),
            req.flags or ASSOC | USERS | QOS,
            "usage" in private and not who.is_operator,
            "users" in private and not who.is_operator,
        )


def reply(
    cluster: str,
    assocs: AssocSet | None,
    jobs: Iterable[Job],
    tree: ShareTree,
    usage: Usage,
    wanted: Wanted,
    who: Principal,
    now: int,
) -> pb.AssocMgrReply:
    """The records ``wanted`` asks for and ``who`` may see, with their use now."""
    if assocs is None or not assocs.reply:
        return pb.AssocMgrReply(cluster=cluster, tres=TRES_ORDER)
    cache = pb.AssociationsReply.FromString(assocs.reply)
    jobs = [j for j in jobs if j.state in (*HOLDING, JobState.PENDING)]
    out = pb.AssocMgrReply(cluster=cluster)
    if wanted.flags & ASSOC:
        out.associations.extend(_associations(cache, assocs, jobs, tree, usage, wanted, who, now))
    if wanted.flags & QOS:
        out.qos.extend(_qos(cache, jobs, usage, wanted, now))
    if wanted.flags & USERS:
        for user in cache.users:
            if wanted.hide_users and user.name != who.user:
                continue
            if wanted.users and user.name.lower() not in wanted.users:
                continue
            out.users.append(pb.AssocMgrUser(user=user, uid=uid_of(user.name)))
    out.tres.extend(_tres_names(out))
    return out


def _associations(
    cache: pb.AssociationsReply,
    assocs: AssocSet,
    jobs: list[Job],
    tree: ShareTree,
    usage: Usage,
    wanted: Wanted,
    who: Principal,
    now: int,
) -> list[pb.AssocMgrAssoc]:
    parents = {a.account: a.parent for a in assocs.assocs if not a.user}
    uses: dict[tuple[str, str, str], _Use] = {}
    for job in jobs:
        partition = job.partition or (job.partitions[0] if job.partitions else "")
        mine = assocs.find(job.user, job.account, partition)
        if mine is None:
            continue
        uses.setdefault((mine.account, mine.user, mine.partition), _Use()).add(job, now)
        name, seen = mine.account, set()
        while name and name not in seen:  # the accounts above count it too
            seen.add(name)
            uses.setdefault((name, "", ""), _Use()).add(job, now)
            name = parents.get(name, "")
    rows = {(r.account, r.user): r for r in tree.rows}
    spent = assoclimits.used_by(assocs, usage)
    by_key = {a.key: a for a in assocs.assocs}
    level: dict[str, int] = {}
    for m in cache.associations:
        if m.account != "root" or m.user:
            above = m.account if m.user else m.parent
            level[above] = level.get(above, 0) + max(m.shares, 1)
    found: list[pb.AssocMgrAssoc] = []
    for m in sorted(associnherit.filled(cache.associations), key=lambda a: a.lft):
        if m.user and wanted.users and m.user.lower() not in wanted.users:
            continue
        if wanted.accounts and m.account.lower() not in wanted.accounts:
            continue
        if wanted.hide_usage and m.user != who.user and m.account not in who.coordinates:
            continue
        row = rows.get((m.account, m.user))
        key = f"{m.account}/{m.user}/{m.partition}"
        used = spent(by_key[key]) if key in by_key else None
        record = pb.AssocMgrAssoc(
            limits=m,
            uid=uid_of(m.user) if m.user else 0,
            is_default=bool(m.user) and assocs.users.get(m.user) == m.account,
            level_shares=level.get(m.account if m.user else m.parent, 1),
            norm_shares=row.norm_shares if row is not None else 0.0,
            fs_factor=(row.fairshare or 0.0) if row is not None else 0.0,
            usage_raw=row.raw_usage if row is not None else 0.0,
            usage_norm=1.0 if row is None or row.norm_usage is None else row.norm_usage,
            usage_efctv=row.effective_usage if row is not None else 0.0,
            used=_usage(
                uses.get((m.account, m.user, m.partition), _Use()),
                used.wall if used is not None else 0.0,
                {
                    **(used.tres if used is not None else {}),
                    "billing": used.billing if used is not None else 0.0,
                },
            ),
        )
        if m.account == "root" and not m.user:
            record.level_shares = 1  # root has no siblings (Slurm's NO_VAL prints 1)
        found.append(record)
    return found


def _qos(
    cache: pb.AssociationsReply, jobs: list[Job], usage: Usage, wanted: Wanted, now: int
) -> list[pb.AssocMgrQos]:
    records = {q.name: q for q in cache.qos}
    folded = {name.lower(): name for name in records}  # names match in any case
    names = [folded[n.lower()] for n in wanted.qos if n.lower() in folded]
    if not wanted.qos:
        names = list(records)
    spent = assoclimits.qos_used_by(usage)
    found: list[pb.AssocMgrQos] = []
    for name in names:
        mine = [j for j in jobs if j.qos == name]
        total = _Use()
        per_account: dict[str, _Use] = {}
        per_user: dict[tuple[str, int], _Use] = {}
        for job in mine:
            total.add(job, now)
            per_account.setdefault(job.account, _Use()).add(job, now)
            per_user.setdefault((job.user, job.uid), _Use()).add(job, now)
        used = spent(name)
        found.append(
            pb.AssocMgrQos(
                limits=records[name],
                usage_raw=used.billing,
                used=_usage(total, used.wall, {**used.tres, "billing": used.billing}),
                accounts=[_qos_use(a, 0, u) for a, u in sorted(per_account.items())],
                users=[_qos_use(n, uid, u) for (n, uid), u in sorted(per_user.items())],
            )
        )
    return found


def _qos_use(name: str, uid: int, use: _Use) -> pb.AssocMgrQosUse:
    return pb.AssocMgrQosUse(
        name=name,
        uid=uid,
        jobs=use.jobs,
        submitted=use.submitted,
        accruing=use.accruing,
        tres=use.tres,
    )


def _tres_names(out: pb.AssocMgrReply) -> list[str]:
    """The cluster's TRES: Slurm's eight, then every other one a limit or a use
    names (gres/gpu...), by name."""
    seen: set[str] = set()
    limits = [a.limits for a in out.associations] + [q.limits for q in out.qos]
    for m in limits:
        for table in (m.grp_tres, m.grp_tres_mins, m.max_tres, m.max_tres_per_node):
            seen.update(table)
    for a in out.associations:
        seen.update(a.used.tres)
    for q in out.qos:
        seen.update(q.used.tres)
    return [*TRES_ORDER, *sorted(seen - set(TRES_ORDER))]
