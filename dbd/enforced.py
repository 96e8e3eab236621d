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


def association(row: Association) -> pb.AssociationLimits:
    message = pb.AssociationLimits(
        account=row.account,
        user=row.user,
        partition=row.partition,
        parent=row.parent,
        shares=row.shares,
        qos=_names(row.qos),
        def_qos=row.def_qos,
    )
    _limits(row, message)
    return message


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
    _limits(row, message, (*_COUNTS, *_QOS_COUNTS), (*_TRES, "max_tres_pu", "max_tres_pa"))
    return message


def enforced(engine: Engine, cluster: str) -> pb.AssociationsReply:
    """``cluster``'s associations with every user, QOS and coordinator, in a stable order
    (so that a controller sees an unchanged set as unchanged)."""
    with Session(engine) as session:
        return _reply(session, cluster)


def _reply(session: Session, cluster: str) -> pb.AssociationsReply:
    assocs = session.scalars(
        select(Association)
        .where(Association.cluster == cluster)
        .order_by(Association.account, Association.user, Association.partition)
    )
    return pb.AssociationsReply(
        associations=[association(a) for a in assocs],
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
