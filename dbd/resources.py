"""sacctmgr's resources: licenses served from outside the clusters, shared among them.

``sacctmgr add resource fluent Server=flex Count=100 Type=License Cluster=bench
PercentAllowed=50`` records 100 ``fluent`` licenses on server ``flex``, half of
them for cluster ``bench``; ``bench``'s controller then offers license
``fluent@flex`` with a total of 50 (``allowed``, sent with the associations it
already fetches), as slurmctld does with Slurm's remote licenses. The
percentages given to a resource's clusters may not add up to more than 100.

Rows come back keyed by sacctmgr's column headers (``Name``, ``Server``,
``% Allocated``, ``Cluster``, ``% Allowed``...). ``add`` answers one row per new
resource and one per cluster newly given a share (with a ``Cluster``), from
which sacctmgr words `` Adding Resource(s)``; ``modify`` and ``delete`` answer
the objects changed as slurmdbd names them (``fluent@flex``, or ``Cluster -
bench\\t- fluent@flex`` for a cluster's share), in ``Object``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from dbd.entities import invalid, names
from dbd.models import Cluster, Resource, ResourceCluster

#: Slurm's server name for a resource added without ``Server=``.
DEFAULT_SERVER = "slurmdb"
#: The one resource type Slurm has.
LICENSE = "License"
#: The headers of a resource row (sacctmgr's own table has Slurm 22.05's default columns).
COLUMNS = (
    "Name", "Server", "Type", "Count", "% Allocated", "ServerType", "Descr", "ID", "Cluster",
    "% Allowed", "# Allowed", "# Used",
)  # fmt: skip


def _number(text: str, what: str) -> int:
    """A whole number of at least 0, or Slurm's complaint about ``what``."""
    if not text.isdigit():
        raise invalid(f"Invalid value for {what}: {text}")
    return int(text)


def _percent(text: str) -> int:
    value = _number(text, "PercentAllowed")
    if value > 100:
        raise invalid(f"PercentAllowed must be between 0 and 100, not {value}")
    return value


def _shares(session: Session, resource: Resource) -> list[ResourceCluster]:
    statement = select(ResourceCluster).where(ResourceCluster.resource_id == resource.id)
    return list(session.scalars(statement.order_by(ResourceCluster.cluster)))


def _row(resource: Resource, share: ResourceCluster | None, allocated: int) -> dict[str, str]:
    """A resource (with one cluster's share, if any) as ``sacctmgr list resource`` prints it."""
    row = {
        "Name": resource.name,
        "Server": resource.server,
        "Type": resource.type,
        "Count": str(resource.count),
        "% Allocated": str(allocated),
        "ServerType": resource.server_type,
        "Descr": resource.description,
        "ID": str(resource.id),
        "Cluster": "",
        "% Allowed": "0",
        "# Allowed": "0",
        "# Used": "0",
    }
    if share is not None:
        row["Cluster"] = share.cluster
        row["% Allowed"] = str(share.percent_allowed)
        # Slurm 22.05's ``# Used`` is a cluster's share as a count, as ``# Allowed``: what
        # the cluster is given, not what its jobs hold (measured: it stays so while jobs
        # hold the license, and is 0 on a row without a cluster).
        row["# Allowed"] = row["# Used"] = str(resource.count * share.percent_allowed // 100)
    return row


def _matching(session: Session, wanted: Mapping[str, list[str]]) -> list[Resource]:
    """The resources the conditions name (names, servers, server types, descriptions, ids)."""
    statement = select(Resource).order_by(Resource.name, Resource.server)
    columns = {
        "name": Resource.name,
        "server": Resource.server,
        "servertype": Resource.server_type,
        "description": Resource.description,
    }
    for key, column in columns.items():
        if key in wanted:
            statement = statement.where(column.in_(wanted[key]))
    if "id" in wanted:
        statement = statement.where(Resource.id.in_([_number(i, "RES ID") for i in wanted["id"]]))
    return list(session.scalars(statement))


def _conditions(where: Mapping[str, str]) -> dict[str, list[str]]:
    return {key: names(value) for key, value in where.items() if value}


def listed(session: Session, where: Mapping[str, str]) -> list[dict[str, str]]:
    """``sacctmgr list resource``: one row per resource, or with ``withclusters`` one per
    cluster's share (a resource no cluster shares still gets one row)."""
    wanted = _conditions(where)
    # As in Slurm 22.05, the conditions on shares apply to the rows of shares only.
    with_clusters = "withclusters" in wanted
    clusters = wanted.get("cluster") if with_clusters else None
    percents = wanted.get("percentallowed") if with_clusters else None
    rows = []
    for resource in _matching(session, wanted):
        shares = _shares(session, resource)
        allocated = sum(s.percent_allowed for s in shares)
        chosen = [
            s
            for s in shares
            if (clusters is None or s.cluster in clusters)
            and (percents is None or str(s.percent_allowed) in percents)
        ]
        if (clusters is not None or percents is not None) and not chosen:
            continue
        if with_clusters and chosen:
            rows += [_row(resource, share, allocated) for share in chosen]
        else:
            rows.append(_row(resource, None, allocated))
    return rows


def _over(resource: Resource, shares: Sequence[tuple[str, int]]) -> None:
    """Refuse a modify that makes ``resource``'s shares add up to more than 100 percent,
    showing them as Slurm does."""
    total = sum(percent for _, percent in shares)
    if total > 100:
        lines = [
            "You can not allocate more than 100% of a resource",
            " If change was accepted it would look like this...",
            f"  {resource.name}@{resource.server}",
            *(f"   Cluster - {cluster}\t {percent}%" for cluster, percent in shares),
            f"   total\t\t{total}%",
        ]
        raise invalid("\n".join(lines))


def add(
    session: Session, where: Mapping[str, str], values: Mapping[str, str]
) -> list[dict[str, str]]:
    """``sacctmgr add resource``: new resources, and new clusters' shares of them."""
    merged = {**where, **values}
    server = merged.get("server") or DEFAULT_SERVER
    kind = merged.get("type")
    if kind is not None and not (kind and "license".startswith(kind.lower())):
        raise invalid(f"Unknown resource type: '{kind}'  Valid resources is License.")
    count = _number(merged["count"], "count") if "count" in merged else None
    percent = _percent(merged["percentallowed"]) if "percentallowed" in merged else 0
    clusters = names(merged.get("cluster", ""))
    for cluster in clusters:
        if session.get(Cluster, cluster) is None:
            raise invalid(
                f"This cluster '{cluster}' doesn't exist.\n"
                "        Contact your admin to add it to accounting.\n"
                " Need a valid cluster name to add a cluster resource."
            )
    rows: list[dict[str, str]] = []
    for name in names(merged.get("name", "")):
        resource = session.scalar(
            select(Resource).where(Resource.name == name, Resource.server == server)
        )
        if resource is None:
            if not kind:
                raise invalid(f"Need to designate a resource type to initially add '{name}'.")
            if count is None:
                raise invalid(f"Need to designate a resource count to initially add '{name}'.")
            resource = Resource(
                name=name,
                server=server,
                description=merged.get("description") or name,
                server_type=merged.get("servertype", ""),
                count=count,
                type=LICENSE,
            )
            session.add(resource)
            session.flush()
            rows.append(_row(resource, None, 0))
        shares = _shares(session, resource)
        have = {s.cluster for s in shares}
        new = [c for c in clusters if c not in have]
        used = sum(s.percent_allowed for s in shares)
        if new and used + percent * len(new) > 100:
            raise invalid(
                f"Adding this {len(new)} clusters to resource {name}@{server} at {percent}% "
                f"each , with {used}% already used,  would go over 100%.  Please redo your "
                "math and resubmit."
            )
        for cluster in new:
            share = ResourceCluster(
                resource_id=resource.id, cluster=cluster, percent_allowed=percent
            )
            session.add(share)
            rows.append(_row(resource, share, 0))
    session.flush()
    return rows


def modify(
    session: Session, where: Mapping[str, str], values: Mapping[str, str]
) -> list[dict[str, str]]:
    """``sacctmgr modify resource``: Count, Description or ServerType of the resources,
    or with a cluster condition the PercentAllowed of those clusters' shares."""
    wanted = _conditions(where)
    clusters = wanted.get("cluster")
    if "count" in values and clusters is not None:
        raise invalid(
            'Can\'t change "count" on a cluster-based resource. Remove cluster selection.'
        )
    if "percentallowed" in values and clusters is None:
        raise invalid('Can\'t change "percentallowed" without specifying a cluster.')
    changed = []
    for resource in _matching(session, wanted):
        label = f"{resource.name}@{resource.server}"
        shares = _shares(session, resource)
        if clusters is None:
            if "count" in values:
                resource.count = _number(values["count"], "count")
            if "description" in values:
                resource.description = values["description"]
            if "servertype" in values:
                resource.server_type = values["servertype"]
            changed.append({"Object": label})
            changed += [{"Object": f"Cluster - {s.cluster}\t- {label}"} for s in shares]
            continue
        mine = [s for s in shares if s.cluster in clusters]
        if "percentallowed" in values:
            percent = _percent(values["percentallowed"])
            _over(
                resource,
                [(s.cluster, percent if s in mine else s.percent_allowed) for s in shares],
            )
            for share in mine:
                share.percent_allowed = percent
        changed += [{"Object": f"Cluster - {s.cluster}\t- {label}"} for s in mine]
    session.flush()
    return changed


def delete(
    session: Session, where: Mapping[str, str], values: Mapping[str, str]
) -> list[dict[str, str]]:
    """``sacctmgr delete resource``: the resources, or with a cluster condition only
    those clusters' shares of them."""
    wanted = _conditions(where)
    clusters = wanted.get("cluster")
    removed = []
    for resource in _matching(session, wanted):
        label = f"{resource.name}@{resource.server}"
        shares = _shares(session, resource)
        if clusters is not None:
            for share in shares:
                if share.cluster in clusters:
                    removed.append({"Object": f"Cluster - {share.cluster}\t- {label}"})
                    session.delete(share)
            continue
        removed.append({"Object": label})
        for share in shares:
            removed.append({"Object": f"Cluster - {share.cluster}\t- {label}"})
            session.delete(share)
        session.delete(resource)
    session.flush()
    return removed


def allowed(session: Session, cluster: str) -> list[tuple[str, str, int]]:
    """The licenses ``cluster`` may use, as (name, server, count): Count times its
    PercentAllowed over 100, rounded down as Slurm does."""
    statement = (
        select(Resource, ResourceCluster.percent_allowed)
        .join(ResourceCluster, ResourceCluster.resource_id == Resource.id)
        .where(ResourceCluster.cluster == cluster)
        .order_by(Resource.name, Resource.server)
    )
    return [
        (resource.name, resource.server, resource.count * percent // 100)
        for resource, percent in session.execute(statement).all()
    ]
