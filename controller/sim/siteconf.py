"""``corral sim -f slurm.conf``: replay a trace on a site's own cluster and policies.

Without ``-f`` a replay runs on the cluster the trace's header describes (one
partition ``batch``, FIFO). With it, the replay takes from slurm.conf (and the
``--set Key=Value`` lines given after it, as ``corral up --set`` adds them):

* the nodes (CPUs, weight, features) and partitions (their nodes, MaxTime,
  PriorityTier, PriorityJobFactor, OverSubscribe), through the controller's own
  ``admission.partition_view``;
* SchedulerType and SchedulerParameters (``bf_window``, ``bf_resolution``,
  ``bf_max_job_test``, ``bf_max_job_user``, ``bf_job_part_count_reserve``):
  the default policy and the backfill every backfilling policy runs with;
* PriorityType and PriorityWeight*/PriorityDecayHalfLife/PriorityMaxAge/...:
  the controller's ``PriorityKeeper`` ranks pending jobs every
  PriorityCalcPeriod of simulated time, fair share decaying with the usage the
  replay's own jobs accrue (controller/sim/sitecluster.py);
* AccountingStorageEnforce: which accounting limits hold.

Accounts, users and their shares and limits come from ``--accounts FILE``, a
``sacctmgr dump`` file (read by sacctmgr's own parser, cli/sacctmgr/file.py);
who each trace job is, and the QOS, from ``--map FILE`` (sitemap.py). Without
a dump, each account the jobs use gets an association under root (Fairshare=1)
and each user one in it, allowed every QOS: the flat tree of a site that never
ran sacctmgr.

What the sim does not model is refused, never ignored: submit limits
(MaxSubmit*, GrpSubmit: the sim has no submission to reject), preemption
(PreemptType), and memory (the sim gives jobs none, so DefMemPerCPU and the
like do not apply; docs/simconfig.md lists this).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from cli.halt import Halt
from cli.sacctmgr import file as dumpfile
from controller.admission import partition_view
from controller.associations import AssocSet, enforcing, gates
from controller.core import BackfillParams, NodeView, PartitionView
from controller.model import Job
from controller.schedparams import scheduler_settings
from controller.sim.errors import SimError
from controller.sim.replay import swf_job
from controller.sim.sitemap import SiteMap
from controller.sim.swf import Record, Trace
from corral import config
from corral.config import PartitionConfig, SlurmConfig
from corral.confsyntax import ConfigError

__all__ = ["Identity", "Site", "load", "load_conf"]

#: Why a record is not replayed on a configured cluster (beside replay.SKIP_*).
SKIP_PARTITION_CPUS = "more processors than its partition has (or MaxNodes gives it)"
SKIP_PARTITION_ACCESS = "its partition denies its user, group, account or QOS"
SKIP_PARTITION_TIME = "time limit over its partition's MaxTime"
SKIP_PARTITION_DOWN = "its partition is not UP"
SKIP_ACCOUNT = "invalid account or account/partition combination"
SKIP_QOS = "invalid qos specification"
SKIP_LIMIT = "over an accounting limit by itself (it would pend forever)"

#: Dump options the sim cannot honour: it has no submissions to refuse.
_SUBMIT_LIMITS = ("maxsubmitjobs", "grpsubmitjobs")
_QOS_SUBMIT = ("MaxSubmitPU", "MaxSubmitPA", "GrpSubmit")


def bare_job(record: Record) -> Job:
    """A pending job for ``record`` as the replay makes it, before ``Site.dress``."""
    return swf_job(record, record.position + 1, ())


def load_conf(path: str, sets: tuple[str, ...] = ()) -> SlurmConfig:
    """slurm.conf at ``path`` with the ``--set`` lines after it, checked as the controller
    checks it (a ConfigError's file and line become a SimError's)."""
    try:
        with open(path, encoding="utf-8") as src:
            text = src.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    for line in sets:
        key, eq, value = line.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise SimError(f"--set wants Key=Value, got {line!r}")
    own = len(text.splitlines())
    text = "\n".join([*text.splitlines(), *sets]) + "\n"
    try:
        conf = config.parse(text, path)
    except ConfigError as exc:
        if exc.path == path and exc.line is not None and exc.line > own:
            raise SimError(f"--set {sets[exc.line - own - 1]}: {exc.message}") from None
        raise SimError(str(exc)) from None
    # What the controller would log at start (an unknown key ignored, a value it
    # corrects), with a --set line named as the line it came from.
    named = {f"{path}:{i}: ": f"--set {line}: " for i, line in enumerate(sets, own + 1)}
    warnings = []
    for warning in conf.warnings:
        where, colon, rest = warning.partition(": ")
        prefix = f"{where}{colon}"
        warnings.append(named[prefix] + rest if prefix in named else warning)
    conf = replace(conf, warnings=tuple(warnings))
    if not conf.nodes or not conf.partitions:
        raise SimError(f"{path}: the sim needs at least one NodeName and one PartitionName")
    preempt = dict(conf.settings).get("PreemptType", "preempt/none").lower()
    if preempt != "preempt/none":
        raise SimError(f"{path}: PreemptType={preempt}: the sim does not model preemption")
    return conf


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a trace job is on the configured cluster."""

    user: str
    group: str
    account: str
    partition: str
    qos: str
    qos_given: bool  # a rule named the QOS (else an association's DefaultQOS applies)


@dataclass(slots=True)
class Site:
    """A configured cluster, its accounting and the trace's users on it."""

    conf: SlurmConfig
    sitemap: SiteMap
    dump: tuple[list[dict[str, str]], list[dict[str, str]]] | None  # assoc rows, user rows
    assocs: AssocSet | None = None  # set by ``prepare`` (synthesized without a dump)
    identities: dict[tuple[int, int], Identity] = field(default_factory=dict)

    @property
    def enforce(self) -> frozenset[str]:
        return enforcing(self.conf.accounting.enforce)

    @property
    def backfill(self) -> BackfillParams:
        """The bf_* parameters the backfilling policies run with."""
        return scheduler_settings(self.conf).backfill or BackfillParams()

    @property
    def default_policy(self) -> str:
        """The policy slurm.conf asks for: sched/builtin (or bf_interval=-1) is fcfs,
        bf_job_part_count_reserve=1 easy, else conservative."""
        params = scheduler_settings(self.conf).backfill
        if params is None:
            return "fcfs"
        return "easy" if params.easy else "conservative"

    def node_views(self) -> dict[str, NodeView]:
        """Every configured node, idle, in configuration order."""
        return {
            node.name: NodeView(
                name=node.name,
                cpus=node.cpus,
                real_memory=node.real_memory,
                weight=node.weight,
                features=frozenset(node.features),
                free_cpus=node.cpus,
                free_memory=node.real_memory,
                usable=True,
                idle=True,
                rank=rank,
            )
            for rank, node in enumerate(self.conf.nodes)
        }

    def partition_views(self) -> dict[str, PartitionView]:
        """The partitions as the controller's snapshot shows them, less memory defaults."""
        return {
            p.name: replace(
                partition_view(self.conf, p.name, "UP"),
                def_mem_per_cpu=0,
                def_mem_per_node=0,
                max_mem_per_node=0,
            )
            for p in self.conf.partitions
        }

    @property
    def total_cpus(self) -> int:
        return sum(node.cpus for node in self.conf.nodes)

    def identity(self, record: Record) -> Identity:
        """Who ``record``'s job is (``prepare`` worked it out)."""
        return self.identities[(record.user, record.group)]

    def prepare(self, trace: Trace) -> tuple[Trace, dict[str, int]]:
        """The trace's records this cluster can run, and how many it cannot, why.

        Settles each job's identity, builds the associations, and skips what
        Slurm would refuse at submission or never start: an account or QOS the
        associations do not allow (when AccountingStorageEnforce says so) or
        the partition does not (AllowAccounts, AllowGroups, AllowQos, their Deny
        lists, RootOnly: the trace's users are ``uN`` in groups ``gN``), more
        processors than the partition has (at most MaxNodes nodes of it, each
        at most MaxCPUsPerNode), a time limit over its MaxTime, a partition
        that is not UP.
        """
        default = self.conf.default_partition or self.conf.partitions[0]
        users_default = {row["User"]: row["Def Acct"] for row in self.dump[1]} if self.dump else {}
        for record in trace.records:
            key = (record.user, record.group)
            if key in self.identities:
                continue
            rule = self.sitemap.rule(record.user, record.group)
            user = rule.name or f"u{record.user}"
            group = f"g{record.group}"
            account = rule.account or (users_default.get(user, "") if self.dump else group)
            self.identities[key] = Identity(
                user,
                group,
                account,
                rule.partition or default.name,
                rule.qos or "normal",
                bool(rule.qos),
            )
        self.assocs = self._associations()
        capacity = {p.name: self._capacity(p) for p in self.conf.partitions}
        kept: list[Record] = []
        skipped: Counter[str] = Counter()
        allowed = {key: self._allowed(who) for key, who in self.identities.items()}
        limited = "limits" in self.enforce
        for record in trace.records:
            who = self.identities[(record.user, record.group)]
            part = self.conf.partition(who.partition)
            assert part is not None  # ``load`` checked the map's partitions
            why = allowed[(record.user, record.group)]
            if why:
                skipped[why] += 1
            elif part.state != "UP":
                skipped[SKIP_PARTITION_DOWN] += 1
            elif record.procs > capacity[part.name]:
                skipped[SKIP_PARTITION_CPUS] += 1
            elif part.max_time >= 0 and -(-record.limit // 60) > part.max_time:
                skipped[SKIP_PARTITION_TIME] += 1
            elif limited and self._never(self.dress(bare_job(record), record)):
                skipped[SKIP_LIMIT] += 1
            else:
                kept.append(record)
        return replace(trace, records=tuple(kept)), dict(skipped)

    def dress(self, job: Job, record: Record) -> Job:
        """``job`` (the replay's for ``record``) as its trace user's on this site."""
        who = self.identity(record)
        return replace(
            job,
            uid=record.user,
            gid=record.group,
            user=who.user,
            group=who.group,
            partitions=(who.partition,),
            account=who.account,
            qos=who.qos,
            eligible_time=record.submit,
        )

    def _never(self, job: Job) -> bool:
        """Whether ``job`` passes an accounting limit alone, so never starts."""
        assert self.assocs is not None
        return any(not gate.key or gate.amount > gate.cap for gate in gates(job, self.assocs))

    def _capacity(self, part: PartitionConfig) -> int:
        """The most CPUs one job can have in ``part``: its MaxNodes biggest nodes, each
        capped at MaxCPUsPerNode."""
        cpus = {node.name: node.cpus for node in self.conf.nodes}
        per_node = sorted((cpus[name] for name in part.nodes), reverse=True)
        if part.max_cpus_per_node is not None:
            per_node = [min(n, part.max_cpus_per_node) for n in per_node]
        return sum(per_node[: part.max_nodes] if part.max_nodes is not None else per_node)

    def _allowed(self, who: Identity) -> str:
        """Why Slurm refuses a job of ``who`` at submission ("" when it does not)."""
        part = self.conf.partition(who.partition)
        assert part is not None
        if (
            part.root_only
            or (part.allow_groups is not None and who.group not in part.allow_groups)
            or (part.allow_accounts is not None and who.account not in part.allow_accounts)
            or who.account in part.deny_accounts
            or (part.allow_qos is not None and who.qos not in part.allow_qos)
            or who.qos in part.deny_qos
        ):
            return SKIP_PARTITION_ACCESS
        assocs, enforce = self.assocs, self.enforce
        if assocs is None or "associations" not in enforce:
            return ""
        assoc = assocs.find(who.user, who.account, who.partition)
        if assoc is None:
            return SKIP_ACCOUNT
        if "qos" in enforce:
            qos = assoc.def_qos if assoc.def_qos and not who.qos_given else who.qos
            if qos not in assoc.qos:
                return SKIP_QOS
        return ""

    def _associations(self) -> AssocSet:
        """The dump's associations (else one per account and user the jobs are), with
        the map's QOS."""
        qos_rows = [dict(columns) for columns in self.sitemap.qos.values()]
        if "normal" not in self.sitemap.qos:
            qos_rows.append({"Name": "normal"})
        if self.dump is not None:
            assoc_rows, user_rows = self.dump
            return AssocSet.from_rows(assoc_rows, user_rows, qos_rows)
        every_qos = ",".join(row["Name"] for row in qos_rows)
        rows = [{"Account": "root", "User": "", "Partition": "", "ParentName": ""}]
        accounts = sorted({who.account for who in self.identities.values() if who.account})
        rows += [
            {"Account": a, "User": "", "Partition": "", "ParentName": "root", "QOS": every_qos}
            for a in accounts
        ]
        pairs = sorted({(w.account, w.user) for w in self.identities.values() if w.account})
        rows += [
            {"Account": a, "User": u, "Partition": "", "ParentName": a, "QOS": every_qos}
            for a, u in pairs
        ]
        users = {u: a for a, u in reversed(pairs)}  # a user's first account is its default
        user_rows = [{"User": u, "Def Acct": a} for u, a in sorted(users.items())]
        return AssocSet.from_rows(rows, user_rows, qos_rows)


def load(
    conf_path: str,
    sets: tuple[str, ...] = (),
    accounts: str | None = None,
    mapping: SiteMap | None = None,
) -> Site:
    """The site: slurm.conf with ``sets``, the ``sacctmgr dump`` file ``accounts``, the map.

    Every partition, account and QOS the map names must exist; a dump's submit
    limits are refused (the sim has no submission to reject).
    """
    conf = load_conf(conf_path, sets)
    sitemap = mapping or SiteMap()
    dump = _read_dump(accounts) if accounts is not None else None
    known_accounts = {row["Account"] for row in dump[0]} if dump else None
    for what, name in sorted(sitemap.named()):
        if what == "partition" and conf.partition(name) is None:
            raise SimError(f"the map names partition {name!r}, which {conf_path} does not have")
        if what == "account" and known_accounts is not None and name not in known_accounts:
            raise SimError(f"the map names account {name!r}, which {accounts} does not have")
        if what == "qos" and name != "normal" and name not in sitemap.qos:
            raise SimError(f"the map names QOS {name!r} but defines it in no qos line")
    for name, columns in sitemap.qos.items():
        for column in _QOS_SUBMIT:
            if column in columns:
                raise SimError(f"QOS {name}: {column}: the sim has no submissions to refuse")
    return Site(conf, sitemap, dump)


def _read_dump(path: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The association and user rows of a ``sacctmgr dump`` file, as sacctmgr shows them."""
    try:
        with open(path, encoding="utf-8") as src:
            content = src.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        head, entries = dumpfile.parse_file(content)
    except Halt as exc:
        raise SimError(f"{path}:" + " ".join(exc.lines).rstrip()) from None
    root = {"Account": "root", "User": "", "Partition": "", "ParentName": "", **_limits(head)}
    root.setdefault("QOS", "normal")
    assocs = [root]
    # What a new association takes from its parent when the line names none, as
    # sacctmgr add gives it: QOS and DefaultQOS (a dump lists parents first).
    inherited = {"root": {k: root[k] for k in ("QOS", "Def QOS") if k in root}}
    users: dict[str, str] = {}
    for entry in (head, *entries):
        for key, value in entry.options.items():
            where = f"{path}:{entry.number}: {entry.object} {entry.name}: {key}"
            if key in _SUBMIT_LIMITS:
                raise SimError(
                    f"{where}: the sim has no submissions to refuse; remove it from the copy "
                    f"you replay"
                )
            if key not in _COLUMNS and key not in _DESCRIPTIVE:
                raise SimError(f"{where}: a limit the sim does not model")
            if value.startswith("+"):
                raise SimError(f"{where}: a dump sets values with '=', not '+='")
        if entry is head:
            continue
        row = {"Partition": entry.options.get("partition", ""), **_limits(entry)}
        for column, value in inherited.get(entry.parent, {}).items():
            row.setdefault(column, value)
        if entry.object == "User":
            row.update(Account=entry.parent, User=entry.name)
            default = entry.options.get("defaultaccount", "")
            users.setdefault(entry.name, default or entry.parent)
        else:
            row.update(Account=entry.name, User="", ParentName=entry.parent)
            inherited[entry.name] = {k: row[k] for k in ("QOS", "Def QOS") if k in row}
        assocs.append(row)
    return assocs, [{"User": u, "Def Acct": a} for u, a in users.items()]


#: Dump options that limit nothing (who the entity is, who manages it).
_DESCRIPTIVE = frozenset(
    (
        "description",
        "organization",
        "defaultaccount",
        "adminlevel",
        "coordinator",
        "wckeys",
        "defaultwckey",
        "partition",
    )
)

#: Dump options that are association columns as sacctmgr shows them.
_COLUMNS: Mapping[str, str] = {
    "fairshare": "Share",
    "grptresmins": "GrpTRESMins",
    "grptres": "GrpTRES",
    "grpjobs": "GrpJobs",
    "grpwall": "GrpWall",
    "maxtresmins": "MaxTRESMins",
    "maxtres": "MaxTRES",
    "maxtrespernode": "MaxTRESPerNode",
    "maxjobs": "MaxJobs",
    "maxwall": "MaxWall",
    "qos": "QOS",
    "defaultqos": "Def QOS",
}


def _limits(entry: dumpfile.Entry) -> dict[str, str]:
    """An entry's limits as association columns (-1, no limit, left out)."""
    return {
        column: entry.options[key]
        for key, column in _COLUMNS.items()
        if entry.options.get(key, "-1") != "-1"
    }
