"""What the controller knows of dbd's associations, users and QOS, and what it enforces.

The controller asks dbd for its cluster's associations, users and QOS every
few seconds (``controller.accounting``), in sacctmgr's own text form (the
rows ``sacctmgr show`` prints), and keeps the newest set in the journal, so
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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace

from controller.core.limits import Gate
from controller.jobstate import Reason
from controller.model import Job
from corral import errors, timefmt
from corral.errors import SlurmError

#: Slurm's message when a submission breaks a submit limit (ESLURM_ACCOUNTING_POLICY).
POLICY = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
ESLURM_ACCOUNTING_POLICY = 2050


def _count(text: str) -> int | None:
    return int(text) if text.strip() else None


def _minutes(text: str) -> int | None:
    return timefmt.parse_duration(text) if text.strip() else None


def _cpus(tres: str) -> int | None:
    """The ``cpu=N`` of a TRES list, if any."""
    for item in tres.split(","):
        name, _, value = item.partition("=")
        if name.strip().lower() == "cpu" and value.strip().isdigit():
            return int(value)
    return None


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
    max_cpus: int | None = None  # MaxTRES cpu=
    grp_jobs: int | None = None
    grp_submit: int | None = None
    grp_cpus: int | None = None  # GrpTRES cpu=
    grp_cpu_mins: int | None = None  # GrpTRESMins cpu=
    qos: tuple[str, ...] = ("normal",)
    def_qos: str = ""

    @classmethod
    def from_row(cls, row: Mapping[str, str]) -> Assoc:
        return cls(
            account=row["Account"],
            user=row["User"],
            partition=row["Partition"],
            parent=row.get("ParentName", ""),
            shares=-1 if row.get("Share") == "parent" else int(row.get("Share") or 1),
            max_jobs=_count(row.get("MaxJobs", "")),
            max_submit=_count(row.get("MaxSubmit", "")),
            max_wall=_minutes(row.get("MaxWall", "")),
            max_cpus=_cpus(row.get("MaxTRES", "")),
            grp_jobs=_count(row.get("GrpJobs", "")),
            grp_submit=_count(row.get("GrpSubmit", "")),
            grp_cpus=_cpus(row.get("GrpTRES", "")),
            grp_cpu_mins=_cpus(row.get("GrpTRESMins", "")),
            qos=tuple(q for q in row.get("QOS", "").split(",") if q),
            def_qos=row.get("Def QOS", ""),
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
    grp_cpus: int | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, str]) -> QosLimits:
        return cls(
            name=row["Name"],
            max_wall=_minutes(row.get("MaxWall", "")),
            max_jobs_pu=_count(row.get("MaxJobsPU", "")),
            max_submit_pu=_count(row.get("MaxSubmitPU", "")),
            max_jobs_pa=_count(row.get("MaxJobsPA", "")),
            grp_jobs=_count(row.get("GrpJobs", "")),
            grp_cpus=_cpus(row.get("GrpTRES", "")),
        )


@dataclass(frozen=True, slots=True)
class AssocSet:
    """One cluster's associations, users (name -> DefaultAccount) and QOS."""

    assocs: tuple[Assoc, ...] = ()
    users: Mapping[str, str] = field(default_factory=dict)
    qos: Mapping[str, QosLimits] = field(default_factory=dict)

    @classmethod
    def from_rows(
        cls,
        assocs: Iterable[Mapping[str, str]],
        users: Iterable[Mapping[str, str]],
        qos: Iterable[Mapping[str, str]],
    ) -> AssocSet:
        return cls(
            tuple(Assoc.from_row(r) for r in assocs),
            {r["User"]: r["Def Acct"] for r in users},
            {r["Name"]: QosLimits.from_row(r) for r in qos},
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "assocs": [asdict(a) for a in self.assocs],
                "users": dict(self.users),
                "qos": [asdict(q) for q in self.qos.values()],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> AssocSet:
        data = json.loads(text)
        return cls(
            tuple(Assoc(**{**a, "qos": tuple(a["qos"])}) for a in data["assocs"]),
            data["users"],
            {q["name"]: QosLimits(**q) for q in data["qos"]},
        )

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


def admit(job: Job, assocs: AssocSet, enforce: frozenset[str], queued: Iterable[Job]) -> Job:
    """``job`` with its account and QOS settled, or SlurmError as sbatch reports it."""
    account = job.account or assocs.users.get(job.user, "")
    for partition in job.partitions:
        assoc = assocs.find(job.user, account, partition)
        if assoc is None:
            raise SlurmError(errors.ESLURM_INVALID_ACCOUNT)
    assoc = assocs.find(job.user, account, job.partitions[0])
    assert assoc is not None
    qos = job.qos
    if "qos" in enforce:
        qos = job.qos if job.qos != "normal" or not assoc.def_qos else assoc.def_qos
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
    if qos is not None and qos.max_submit_pu is not None:
        theirs = [j for j in queued if j.user == job.user and j.qos == qos.name]
        if len(theirs) + 1 > qos.max_submit_pu:
            raise SlurmError(ESLURM_ACCOUNTING_POLICY, POLICY)


def gates(
    job: Job,
    assocs: AssocSet,
    used: Callable[[Assoc], float] = lambda _: 0.0,
    safe: bool = False,
) -> tuple[Gate, ...]:
    """The limits ``job`` must fit under to start (checked and counted by the core).

    ``used`` gives an association's decayed usage in CPU-seconds (its subtree's
    for an account), for GrpTRESMins: a job waits once the usage reaches the
    limit, and with ``safe`` (AccountingStorageEnforce=safe) also when its own
    CPUs for its whole time limit would pass it.
    """
    partition = job.partition or (job.partitions[0] if job.partitions else "")
    assoc = assocs.find(job.user, job.account, partition)
    if assoc is None:
        return ()
    cpus = job.cpus_needed
    wall = job.time_limit
    found: list[Gate] = []
    if assoc.max_wall is not None and (wall < 0 or wall > assoc.max_wall):
        found.append(Gate("", 0, 1, Reason.ASSOC_MAX_WALL))
    if assoc.max_cpus is not None and cpus > assoc.max_cpus:
        found.append(Gate("", 0, 1, Reason.ASSOC_MAX_CPU_PER_JOB))
    if assoc.max_jobs is not None:
        found.append(Gate(f"a:{assoc.key}:jobs", assoc.max_jobs, 1, Reason.ASSOC_MAX_JOBS))
    for parent in (assoc, *assocs.ancestors(assoc)):
        if parent.grp_cpu_mins is not None:
            ahead = cpus * max(wall, 0) if safe else 0
            if used(parent) / 60 + ahead >= parent.grp_cpu_mins:
                found.append(Gate("", 0, 1, Reason.ASSOC_GRP_CPU_MINUTES))
        if parent.grp_jobs is not None:
            found.append(Gate(f"g:{parent.key}:jobs", parent.grp_jobs, 1, Reason.ASSOC_GRP_JOBS))
        if parent.grp_cpus is not None:
            found.append(Gate(f"g:{parent.key}:cpus", parent.grp_cpus, cpus, Reason.ASSOC_GRP_CPU))
    qos = assocs.qos.get(job.qos)
    if qos is not None:
        if qos.max_wall is not None and (wall < 0 or wall > qos.max_wall):
            found.append(Gate("", 0, 1, Reason.QOS_MAX_WALL))
        if qos.max_jobs_pu is not None:
            found.append(
                Gate(f"q:{qos.name}:u:{job.user}", qos.max_jobs_pu, 1, Reason.QOS_MAX_JOBS_PER_USER)
            )
        if qos.max_jobs_pa is not None:
            found.append(
                Gate(
                    f"q:{qos.name}:a:{job.account}",
                    qos.max_jobs_pa,
                    1,
                    Reason.QOS_MAX_JOBS_PER_ACCOUNT,
                )
            )
        if qos.grp_jobs is not None:
            found.append(Gate(f"q:{qos.name}:jobs", qos.grp_jobs, 1, Reason.QOS_GRP_JOBS))
        if qos.grp_cpus is not None:
            found.append(Gate(f"q:{qos.name}:cpus", qos.grp_cpus, cpus, Reason.QOS_GRP_CPU))
    return tuple(found)
