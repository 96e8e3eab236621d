"""What a caller may see: hidden partitions and slurm.conf's PrivateData.

Every listing RPC (squeue's and scontrol's Jobs, sinfo's Partitions and Nodes,
sprio's Priorities, sshare's Shares, Reservations) filters through here, for
the CLI and for restd alike: restd calls them with its caller's credential.

* A partition is left out of listings when it is ``Hidden``, or the caller
  may not use it (AllowGroups, RootOnly, AllowAccounts when the caller's
  accounts are known), unless they ask for all (``-a``) or are an operator;
  jobs in such partitions are left out of job listings the same way.
* ``PrivateData=jobs``: other users' jobs are left out, except for operators
  and the coordinators of the jobs' accounts. ``nodes``: node information is
  refused to anyone but operators (ESLURM_ACCESS_DENIED, as slurmctld does).
  ``reservations``: only the reservations the caller may use are listed.
  ``usage``: sshare shows the caller's own associations (and those of the
  accounts they coordinate) and the accounts above them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.associations import AssocSet
from controller.model import Job
from controller.principal import Principal
from corral import errors
from corral.config import PartitionConfig, SlurmConfig
from corral.errors import SlurmError


def private(conf: SlurmConfig, kind: str) -> bool:
    """Whether PrivateData names ``kind`` (jobs, nodes, usage, reservations...)."""
    return kind in conf.accounting.private_data


def user_accounts(assocs: AssocSet | None, user: str) -> frozenset[str]:
    """The accounts ``user`` has an association in (none known without accounting)."""
    if assocs is None:
        return frozenset()
    return frozenset(a.account for a in assocs.assocs if a.user == user)


def usable(part: PartitionConfig, who: Principal, accounts: frozenset[str]) -> bool:
    """Whether ``who`` could use ``part``: AllowGroups, and AllowAccounts against the
    accounts they have (not checked when none are known). RootOnly partitions stay
    listed, as in Slurm: they are visible, only submissions to them are refused."""
    groups = part.allow_groups
    if groups is not None and not who.is_admin and not set(groups) & who.group_names():
        return False
    allowed = part.allow_accounts
    return allowed is None or not accounts or bool({a.lower() for a in accounts} & set(allowed))


def shown_partitions(
    conf: SlurmConfig, who: Principal, assocs: AssocSet | None, everything: bool
) -> frozenset[str]:
    """The partitions a listing shows ``who`` (``everything``: ``-a`` was given)."""
    if everything or who.is_operator:
        return frozenset(p.name for p in conf.partitions)
    accounts = user_accounts(assocs, who.user)
    return frozenset(p.name for p in conf.partitions if not p.hidden and usable(p, who, accounts))


def job_in(job: Job, partitions: frozenset[str]) -> bool:
    """Whether ``job`` runs in (or, pending, names) one of ``partitions``."""
    if job.partition:
        return job.partition in partitions
    return any(p in partitions for p in job.partitions)


def jobs_shown(
    jobs: Iterable[Job],
    conf: SlurmConfig,
    who: Principal,
    assocs: AssocSet | None,
    *,
    everything: bool,
    named: bool,
) -> list[Job]:
    """The jobs of ``jobs`` ``who`` may see: PrivateData=jobs, and unless the ids were
    ``named`` or ``everything`` was asked for, not those in partitions not shown."""
    hide = private(conf, "jobs")
    shown = [j for j in jobs if who.may_see(j.uid, j.account, hide)]
    if named:
        return shown
    parts = shown_partitions(conf, who, assocs, everything)
    if len(parts) == len(conf.partitions):
        return shown
    return [j for j in shown if job_in(j, parts)]


def hidden_cloud(conf: SlurmConfig, name: str, powered_down: bool) -> bool:
    """Whether node ``name`` is left out of a listing of all nodes: a ``State=CLOUD``
    node while powered down, unless PrivateData=cloud (slurm.conf(5): "even for
    SlurmUser and root")."""
    return powered_down and not private(conf, "cloud") and conf.node(name).state.upper() == "CLOUD"


def check_nodes(conf: SlurmConfig, who: Principal) -> None:
    """PrivateData=nodes: node information for operators only."""
    if not who.sees_all(private(conf, "nodes")):
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)


def share_rows_shown(
    rows: Iterable[tuple[str, str]], who: Principal, assocs: AssocSet | None, hide: bool
) -> set[tuple[str, str]]:
    """Of sshare's (account, user) rows, those ``who`` may see under PrivateData=usage
    (``hide``): their own, their coordinated accounts' and the accounts above theirs."""
    rows = list(rows)
    if who.sees_all(hide):
        return set(rows)
    parents: Mapping[str, str] = (
        {a.account: a.parent for a in assocs.assocs if not a.user} if assocs else {}
    )
    above: set[str] = set()
    for account, user in rows:
        if user == who.user:
            name = account
            while name and name not in above:
                above.add(name)
                name = parents.get(name, "")
    return {
        (account, user)
        for account, user in rows
        if (user == who.user) or account in who.coordinates or (not user and account in above)
    }
