"""queues.conf: the tree of team queues that divides the cluster (issue 17).

Slurm has no word for a guaranteed share that may be lent and taken back, so
Corral reads one more file beside slurm.conf (as cgroup.conf sits there), in
slurm.conf's syntax (``corral.confsyntax``): one queue per line,
``QueueName=team-a Parent=ai Accounts=teama Guarantee=gres/gpu=16 ...``. Its
words are KAI Scheduler's and Kueue's (a guarantee is KAI's deserved quota and
Kueue's nominalQuota); resources are named as sacctmgr's GrpTRES names them.

The file is Corral's own, so every key is one Corral implements and anything
else (an unknown key, resource or word, a tree that cannot hold) stops the
daemon with the file and line, rather than leaving a queue other than the
administrator wrote it. docs/queues.md documents each key; docs/design.md
("Queues") the rules checked here.

This module reads the lines and checks the tree (each key's value is read by
``corral.queuewords``); what each queue may run is the scheduler's
(controller/core/quota.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from corral import confkeys, queuewords
from corral.confsyntax import ConfigError, Reader, Where, boolean, integer, read_text

__all__ = [
    "INHERITED",
    "ROOT",
    "QueueConf",
    "QueueSpec",
    "ResourceQuota",
    "load",
    "parse",
]

#: The queue at the top of every tree: the whole cluster.
ROOT = "root"
#: The settings a queue without its own value takes from its parent (the root: 0).
INHERITED = ("reclaim_min_runtime", "preempt_min_runtime", "preemption_delay")
#: Said while the scheduler does not divide by the tree yet (issue 17, points 1 and 2).
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


@dataclass(frozen=True)
class ResourceQuota:
    """One queue's share of one resource."""

    guarantee: int = 0  # KAI's deserved, Kueue's nominalQuota
    limit: int | None = None  # None: no limit
    borrow_limit: int | None = None  # None: may borrow whatever the cohort has unused
    lend_limit: int | None = None  # None: all of its unused guarantee may be lent


@dataclass(frozen=True)
class QueueSpec:
    """One queue as queues.conf gives it; ``file`` and ``line`` say where, for messages."""

    name: str
    parent: str | None  # None only for the root queue "root"
    quotas: Mapping[str, ResourceQuota]  # resource key -> quota
    over_quota_weight: float = 1.0
    priority: int = 0
    accounts: tuple[str, ...] = ()
    qos: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    preemptible: bool = True  # default for the queue's jobs
    reclaim_min_runtime: int | None = None  # seconds; None: inherited (root: 0)
    preempt_min_runtime: int | None = None
    preemption_delay: int | None = None
    within_queue: str = "Never"  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Any"  # Never | LowerPriority | Any
    borrow_within_cohort: str = "Never"  # Never | LowerPriority
    borrow_priority_threshold: int | None = None
    # BestEffortFIFO | StrictFIFO; None: inherited (root: BestEffortFIFO)
    queueing_strategy: str | None = None
    file: str = ""
    line: int = 0

    def quota(self, resource: str) -> ResourceQuota:
        """The queue's quota of ``resource`` (no guarantee, no limit when not named)."""
        return self.quotas.get(resource, ResourceQuota())


@dataclass(frozen=True)
class QueueConf:
    """The whole tree: ``queues`` holds the root first, every parent before its children."""

    queues: Mapping[str, QueueSpec]
    _children: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _routes: tuple[Mapping[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        children: dict[str, list[str]] = {name: [] for name in self.queues}
        for spec in self.queues.values():
            if spec.parent is not None:
                children[spec.parent].append(spec.name)
        object.__setattr__(self, "_children", {k: tuple(v) for k, v in children.items()})
        routes: tuple[dict[str, str], dict[str, str], dict[str, str]] = ({}, {}, {})
        for spec in self.queues.values():
            for table, names in zip(
                routes, (spec.accounts, spec.qos, spec.partitions), strict=True
            ):
                table.update(dict.fromkeys(names, spec.name))
        object.__setattr__(self, "_routes", routes)

    def children(self, name: str) -> tuple[str, ...]:
        """The queues whose parent is ``name``, in the tree's order."""
        return self._children[name]

    def leaves(self) -> tuple[str, ...]:
        """The queues without children: the only ones that take jobs."""
        return tuple(name for name in self.queues if not self._children[name])

    def queue_of(self, account: str, qos: str, partition: str) -> str | None:
        """The leaf queue a job lands in: by account (walking up the account tree is
        NOT done here), else by QOS, else by partition; None: not managed by queues.
        Accounts and QOS are matched in any case, as Slurm keeps them lowercase."""
        by_account, by_qos, by_partition = self._routes
        return (
            by_account.get(account.lower())
            or by_qos.get(qos.lower())
            or by_partition.get(partition)
        )

    def effective(self, name: str, field: str) -> int:
        """A queue's ``field`` of ``INHERITED`` in seconds: its own value, else its
        nearest ancestor's, else 0 (KAI's min runtimes are inherited the same way)."""
        if field not in INHERITED:
            raise ValueError(f"{field} is not inherited: one of {', '.join(INHERITED)}")
        value = self._nearest(name, field)
        return value if isinstance(value, int) else 0

    def strategy(self, name: str) -> str:
        """A queue's QueueingStrategy: its own, else its nearest ancestor's, else
        BestEffortFIFO (Kueue's default). Inherited as the times are, so one line on a
        parent (or the root) orders every team below it."""
        value = self._nearest(name, "queueing_strategy")
        return value if isinstance(value, str) else queuewords.QUEUEING_STRATEGY[0]

    def _nearest(self, name: str, field: str) -> object:
        """``field`` of the queue or of its nearest ancestor that sets it (None: none)."""
        spec: QueueSpec | None = self.queues[name]
        while spec is not None:
            value: object = getattr(spec, field)
            if value is not None:
                return value
            spec = self.queues[spec.parent] if spec.parent is not None else None
        return None


# ------------------------------------------------------------------ one line
class _Line:
    """One queue line's values, checked one key at a time."""

    def __init__(self, where: Where, gres_types: frozenset[str]) -> None:
        self.where = where
        self.gres_types = gres_types
        self.settings: dict[str, object] = {}
        self.amounts: dict[str, dict[str, int | None]] = {}

    def set(self, key: str, value: str) -> None:
        where = self.where
        settings = self.settings
        if key in ("Guarantee", "Limit", "BorrowLimit", "LendLimit"):
            self.amounts[key] = queuewords.resources(
                key, value, where, self.gres_types, unlimited=key == "Limit"
            )
        elif key in ("Accounts", "QOS", "Partitions"):
            field_name = {"Accounts": "accounts", "QOS": "qos", "Partitions": "partitions"}[key]
            settings[field_name] = queuewords.names(key, value, where, lower=key != "Partitions")
        elif key in ("ReclaimMinRuntime", "PreemptMinRuntime", "PreemptionDelay"):
            settings[_snake(key)] = queuewords.span(key, value, where)
        elif key == "OverQuotaWeight":
            settings["over_quota_weight"] = queuewords.weight(value, where)
        elif key == "Priority":
            settings["priority"] = integer(key, value, where)
        elif key == "Preemptible":
            settings["preemptible"] = boolean(key, value, where)
        elif key == "WithinQueue":
            settings["within_queue"] = queuewords.word(key, value, where, queuewords.WITHIN_QUEUE)
        elif key == "ReclaimWithinCohort":
            settings["reclaim_within_cohort"] = queuewords.word(
                key, value, where, queuewords.RECLAIM_WITHIN_COHORT
            )
        elif key == "QueueingStrategy":
            settings["queueing_strategy"] = queuewords.word(
                key, value, where, queuewords.QUEUEING_STRATEGY
            )
        elif key == "BorrowWithinCohort":
            policy, threshold = queuewords.borrow_policy(value, where)
            settings["borrow_within_cohort"] = policy
            settings["borrow_priority_threshold"] = threshold
        else:  # Parent
            settings["parent"] = value

    def quotas(self, name: str) -> dict[str, ResourceQuota]:
        """Each resource the line names, checked against its own guarantee."""
        amounts = self.amounts
        guarantees = amounts.get("Guarantee", {})
        resources = dict.fromkeys(r for found in amounts.values() for r in found)
        quotas: dict[str, ResourceQuota] = {}
        for resource in resources:
            quota = ResourceQuota(
                guarantee=guarantees.get(resource) or 0,
                limit=amounts.get("Limit", {}).get(resource),
                borrow_limit=amounts.get("BorrowLimit", {}).get(resource),
                lend_limit=amounts.get("LendLimit", {}).get(resource),
            )
            if quota.limit is not None and quota.guarantee > quota.limit:
                raise ConfigError(
                    *self.where,
                    f"queue {name}: Guarantee {_amount(resource, quota.guarantee)} "
                    f"is above its Limit {_amount(resource, quota.limit)}",
                )
            quotas[resource] = quota
        return quotas


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key).lstrip("_")


def _amount(resource: str, value: int) -> str:
    """``resource=value`` as the file would write it (memory in MiB)."""
    return f"{resource}={value}{'M' if resource == 'mem' else ''}"


# ------------------------------------------------------------------ the file
class _Reader(Reader):
    def __init__(self, gres_types: frozenset[str], cluster: str | None) -> None:
        self.gres_types = gres_types
        self.cluster = cluster
        self.specs: dict[str, QueueSpec] = {}
        self.explicit: dict[str, frozenset[str]] = {}  # resources with a Guarantee given
        self.routes: tuple[dict[str, str], ...] = ({}, {}, {})

    def cluster_name(self) -> str | None:
        """slurm.conf's ClusterName, for ``Include queues-%c.conf``."""
        return self.cluster

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        if not found:  # a blank or comment line
            return
        first = found[0][0]
        if first.lower() != "queuename":
            raise ConfigError(*where, f"a queue line starts with QueueName=, not '{first}'")
        name = found[0][1]
        if not _NAME_CHARS.issuperset(name):
            message = f"bad QueueName value '{name}': letters, digits, '-', '_' and '.' only"
            raise ConfigError(*where, message)
        if name in self.specs:
            other = self.specs[name]
            message = f"queue {name} is defined twice (first at {other.file}:{other.line})"
            raise ConfigError(*where, message)
        line = _Line(where, self.gres_types)
        seen = {"QueueName"}
        for key_text, value in found[1:]:
            row = confkeys.QUEUES.get(key_text.lower())
            if row is None:
                raise ConfigError(*where, f"unknown key '{key_text}'")
            if row.key in seen:
                raise ConfigError(*where, f"{row.key} given twice")
            seen.add(row.key)
            line.set(row.key, value)
        settings = line.settings
        parent = settings.pop("parent", None if name == ROOT else ROOT)
        if name == ROOT and parent is not None:
            raise ConfigError(*where, f"queue {ROOT} is the top of the tree: it has no Parent")
        spec = QueueSpec(
            name=name,
            parent=str(parent) if parent is not None else None,
            quotas=line.quotas(name),
            file=where[0],
            line=where[1],
            **settings,  # type: ignore[arg-type]
        )
        self._route(spec)
        self.specs[name] = spec
        self.explicit[name] = frozenset(line.amounts.get("Guarantee", {}))

    def _route(self, spec: QueueSpec) -> None:
        """Note where the queue's accounts, QOS and partitions send jobs: each to one queue."""
        for table, what, names in zip(
            self.routes,
            ("account", "QOS", "partition"),
            (spec.accounts, spec.qos, spec.partitions),
            strict=True,
        ):
            for name in names:
                if name in table:
                    message = f"{what} {name} is already in queue {table[name]}"
                    raise ConfigError(spec.file, spec.line, message)
                table[name] = spec.name


def _ordered(specs: Mapping[str, QueueSpec]) -> list[str]:
    """The queues from the root down, each after its parent (siblings in file order);
    a ConfigError for a parent that is not a queue or a loop of parents."""
    for spec in specs.values():
        if spec.parent is not None and spec.parent not in specs:
            message = f"queue {spec.name}: Parent {spec.parent} is not a queue"
            raise ConfigError(spec.file, spec.line, message)
    for spec in specs.values():
        chain = [spec.name]
        parent = spec.parent
        while parent is not None:
            chain.append(parent)
            if parent == spec.name:
                message = f"queue {spec.name}: its parents make a cycle ({' -> '.join(chain)})"
                raise ConfigError(spec.file, spec.line, message)
            parent = specs[parent].parent
            if len(chain) > len(specs):  # a cycle above this queue: reported at its own line
                break
    children: dict[str, list[str]] = {name: [] for name in specs}
    for spec in specs.values():
        if spec.parent is not None:
            children[spec.parent].append(spec.name)
    order: list[str] = []
    stack = [ROOT]
    while stack:
        name = stack.pop()
        order.append(name)
        stack.extend(reversed(children[name]))
    return order


def _check_leaves(conf: QueueConf) -> None:
    """Only leaf queues take jobs (as in KAI): a parent naming where jobs come from is refused."""
    for spec in conf.queues.values():
        given = [k for k, v in (("Accounts", spec.accounts), ("QOS", spec.qos)) if v]
        given += ["Partitions"] if spec.partitions else []
        given += [key for key, value in _JOB_POLICIES if getattr(spec, value) != _LEAF[value]]
        if given and conf.children(spec.name):
            message = (
                f"queue {spec.name} has child queues, so it takes no jobs: "
                f"{'=, '.join(given)}= belong on a leaf queue"
            )
            raise ConfigError(spec.file, spec.line, message)


#: The keys about a queue's own jobs, read on the leaf a job lands in and never
#: inherited: on a parent they would be accepted and do nothing, so are refused.
_JOB_POLICIES = (
    ("Preemptible", "preemptible"),
    ("WithinQueue", "within_queue"),
    ("ReclaimWithinCohort", "reclaim_within_cohort"),
    ("BorrowWithinCohort", "borrow_within_cohort"),
)
_LEAF = {value: getattr(QueueSpec("", None, {}), value) for _, value in _JOB_POLICIES}


def _guarantees(
    conf: QueueConf, explicit: Mapping[str, frozenset[str]]
) -> dict[str, dict[str, ResourceQuota]]:
    """Each queue's quotas with the guarantees its children add up to.

    A parent that gives a guarantee of a resource must hold its children's: no
    child's above it, nor their sum. One that gives none guarantees what its
    children do, within its Limit; the root then keeps none (it has the cluster).
    """
    quotas = {name: dict(spec.quotas) for name, spec in conf.queues.items()}
    for name in reversed(tuple(conf.queues)):
        spec = conf.queues[name]
        children = conf.children(name)
        resources = dict.fromkeys(r for child in children for r in quotas[child])
        for resource in resources:
            total = sum(quotas[c].get(resource, ResourceQuota()).guarantee for c in children)
            own = quotas[name].get(resource, ResourceQuota())
            if resource in explicit.get(name, frozenset()):
                _hold(conf, quotas, name, resource)
            elif total:
                if own.limit is not None and total > own.limit:
                    message = (
                        f"queue {name}: its children's guarantees add up to "
                        f"{_amount(resource, total)}, above its Limit "
                        f"{_amount(resource, own.limit)}"
                    )
                    raise ConfigError(spec.file, spec.line, message)
                if name != ROOT:  # the root's capacity is the cluster's
                    quotas[name][resource] = replace(own, guarantee=total)
    return quotas


def _hold(
    conf: QueueConf, quotas: Mapping[str, Mapping[str, ResourceQuota]], name: str, resource: str
) -> None:
    """Refuse children whose guarantees of ``resource`` do not fit in their parent's."""
    guarantee = quotas[name][resource].guarantee
    total = 0
    for child in conf.children(name):
        spec = conf.queues[child]
        own = quotas[child].get(resource, ResourceQuota()).guarantee
        total += own
        if own > guarantee:
            message = (
                f"queue {child}: Guarantee {_amount(resource, own)} is above its parent "
                f"{name}'s {_amount(resource, guarantee)}"
            )
            raise ConfigError(spec.file, spec.line, message)
    if total > guarantee:
        spec = conf.queues[name]
        message = (
            f"queue {name}: its children's guarantees add up to {_amount(resource, total)}, "
            f"above its own Guarantee {_amount(resource, guarantee)}"
        )
        raise ConfigError(spec.file, spec.line, message)


def _check_lending(spec: QueueSpec, quotas: Mapping[str, ResourceQuota]) -> None:
    """A queue lends only from its guarantee (Kueue: lendingLimit <= nominalQuota)."""
    for resource, quota in quotas.items():
        if quota.lend_limit is not None and quota.lend_limit > quota.guarantee:
            message = (
                f"queue {spec.name}: LendLimit {_amount(resource, quota.lend_limit)} is above "
                f"its Guarantee {_amount(resource, quota.guarantee)}"
            )
            raise ConfigError(spec.file, spec.line, message)


def parse(
    text: str, path: str, gres_types: Iterable[str] = (), cluster_name: str | None = None
) -> QueueConf:
    """The queue tree in ``text`` (read from ``path``); ``gres_types`` is slurm.conf's
    GresTypes (the GRES a queue may name), ``cluster_name`` its ClusterName (``%c`` in
    Include). ConfigError with the file and line for anything that cannot be used."""
    reader = _Reader(frozenset(g.lower() for g in gres_types), cluster_name)
    reader.feed(text, path, (os.path.abspath(path),))
    specs = reader.specs
    if ROOT not in specs:
        specs[ROOT] = QueueSpec(name=ROOT, parent=None, quotas={}, file=path)
        reader.explicit[ROOT] = frozenset()
    draft = QueueConf({name: specs[name] for name in _ordered(specs)})
    _check_leaves(draft)
    quotas = _guarantees(draft, reader.explicit)
    for name, spec in draft.queues.items():
        _check_lending(spec, quotas[name])
    return QueueConf(
        {name: replace(spec, quotas=quotas[name]) for name, spec in draft.queues.items()}
    )


def load(
    path: str, gres_types: Iterable[str] = (), cluster_name: str | None = None
) -> QueueConf | None:
    """The queues.conf at ``path``; None when there is none (no job is in a queue)."""
    if not os.path.exists(path):
        return None
    return parse(read_text(path, (path, None), ""), path, gres_types, cluster_name)
