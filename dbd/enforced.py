"""What a controller enforces, as typed messages: associations, users, QOS, coordinators,
and the remote licenses (``dbd.resources``) its cluster may use.

slurmctld keeps an association cache filled from slurmdbd; Corral's controller
asks ``Associations`` every few seconds (``controller.accounting``). The reply
carries the stored values as numbers (limits, minutes, TRES limits as
{TRES: count} with memory in MiB), so the controller enforces what dbd stores,
not what sacctmgr's display makes of it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from corral.units import parse_tres_limits
from corral.wire import corral_pb2 as pb
from dbd import resources
from dbd.models import Association, Coordinator, Limits, Qos, User

#: The optional count and minute columns of ``Limits`` that both messages carry.
_COUNTS = ("max_jobs", "max_submit", "max_wall", "grp_jobs", "grp_submit", "grp_wall")
#: The TRES limit columns of ``Limits`` that both messages carry.
_TRES = ("grp_tres", "grp_tres_mins", "max_tres", "max_tres_per_node", "max_tres_mins")
#: The per-user and per-account counts only QOS have.
_QOS_COUNTS = ("max_jobs_pu", "max_submit_pu", "max_jobs_pa", "max_submit_pa")


def _names(text: str) -> list[str]:
    return [name for name in text.split(",") if name]


def _limits(
    row: Limits,
    message: pb.AssociationLimits | pb.QosLimitsRecord,
    counts: tuple[str, ...] = _COUNTS,
    tres: tuple[str, ...] = _TRES,
) -> None:
    """Copy the limit columns ``counts`` and ``tres`` (the message's fields of the same
    names); NULL columns stay absent."""
    for column in counts:
        value = getattr(row, column)
        if value is not None:
            setattr(message, column, value)
    for column in tres:
        getattr(message, column).update(parse_tres_limits(getattr(row, column) or ""))


def association(row: Association, place: tuple[int, int] = (0, 0)) -> pb.AssociationLimits:
    """``row`` as a message; ``place`` is its (parent's id, Lft) in the tree."""
    message = pb.AssociationLimits(
        account=row.account,
        user=row.user,
        partition=row.partition,
        parent=row.parent,
        shares=row.shares,
        qos=_names(row.qos),
        def_qos=row.def_qos,
        id=row.id,
        parent_id=place[0],
        lft=place[1],
    )
    if row.priority is not None:
        message.priority = row.priority
    _limits(row, message)
    message.grp_tres_run_mins.update(parse_tres_limits(row.grp_tres_run_mins or ""))
    return message


def tree_places(rows: list[Association]) -> dict[int, tuple[int, int]]:
    """Each association's (parent association's id, Lft): its left number in the
    nested-set numbering of the account tree that slurmdbd keeps (root's Lft is 1).

    A user's parent is its account's association, an account's its parent
    account's. slurmdbd inserts each new child leftmost under its parent, so
    siblings run newest (highest id) first; numbering here from the ids gives
    the same order without a stored column to keep in step.
    """
    accounts = {r.account: r for r in rows if not r.user and not r.partition}
    children: dict[int, list[Association]] = {}
    parents: dict[int, int] = {}
    for r in rows:
        above = accounts.get(r.account if r.user or r.partition else r.parent)
        if above is not None and above is not r:
            parents[r.id] = above.id
            children.setdefault(above.id, []).append(r)
    places: dict[int, tuple[int, int]] = {}
    counter = 0

    def visit(row: Association) -> None:
        nonlocal counter
        counter += 1
        places[row.id] = (parents.get(row.id, 0), counter)
        for child in sorted(children.get(row.id, ()), key=lambda c: -c.id):
            visit(child)
        counter += 1  # the right number

    for row in sorted(rows, key=lambda r: r.id):
        if row.id not in parents and row.id not in places:
            visit(row)
    return places


def qos(row: Qos) -> pb.QosLimitsRecord:
    message = pb.QosLimitsRecord(
        name=row.name,
        priority=row.priority or 0,
        usage_factor=row.usage_factor,
        preempt=_names(row.preempt),
        grace_time=row.grace_time or 0,
        preempt_mode=row.preempt_mode or "",
    )
    if row.preempt_exempt_time is not None:
        message.preempt_exempt_time = row.preempt_exempt_time * 60  # stored in minutes
    _limits(
        row,
        message,
        (*_COUNTS, *_QOS_COUNTS),
        (*_TRES, "max_tres_pu", "max_tres_pa", "min_tres", "grp_tres_run_mins"),
    )
    message.id = row.id
    return message


def enforced(engine: Engine, cluster: str) -> pb.AssociationsReply:
    """``cluster``'s associations with every user, QOS and coordinator, in a stable order
    (so that a controller sees an unchanged set as unchanged)."""
    with Session(engine) as session:
        return _reply(session, cluster)


def _reply(session: Session, cluster: str) -> pb.AssociationsReply:
    assocs = list(
        session.scalars(
            select(Association)
            .where(Association.cluster == cluster)
            .order_by(Association.account, Association.user, Association.partition)
        )
    )
    places = tree_places(assocs)
    return pb.AssociationsReply(
        associations=[association(a, places[a.id]) for a in assocs],
        users=[
            pb.AccountingUser(
                name=u.name, default_account=u.default_account, admin_level=u.admin_level
            )
            for u in session.scalars(select(User).order_by(User.name))
        ],
        qos=[qos(q) for q in session.scalars(select(Qos).order_by(Qos.id))],
        coordinators=[
            pb.Coordination(user=c.user, account=c.account)
            for c in session.scalars(
                select(Coordinator).order_by(Coordinator.user, Coordinator.account)
            )
        ],
        remote_licenses=[
            pb.RemoteLicense(name=name, server=server, count=count)
            for name, server, count in resources.allowed(session, cluster)
        ],
    )
