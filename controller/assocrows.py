"""sacctmgr's rows of associations, users, QOS and coordinators as dbd's typed reply.

Until dbd answered ``Associations`` with typed messages, the controller fetched
the rows ``sacctmgr show`` prints and kept them in its journal. A journal
written then still holds such rows; this reads them (and test fixtures written
as sacctmgr shows them) into the ``AssociationsReply`` that dbd sends today, so
the controller has one way in: ``AssocSet.from_reply``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from corral import timefmt
from corral.units import parse_tres_limits
from corral.wire import corral_pb2 as pb

Row = Mapping[str, str]

#: Columns of counts and wall-clock limits both kinds show: (column, field, is minutes).
_LIMITS = (
    ("MaxJobs", "max_jobs", False),
    ("MaxSubmit", "max_submit", False),
    ("MaxWall", "max_wall", True),
    ("GrpJobs", "grp_jobs", False),
    ("GrpSubmit", "grp_submit", False),
    ("GrpWall", "grp_wall", True),
)
#: TRES limit columns both kinds show: (column, field).
_TRES = (
    ("GrpTRES", "grp_tres"),
    ("GrpTRESMins", "grp_tres_mins"),
    ("MaxTRES", "max_tres"),
    ("MaxTRESPerNode", "max_tres_per_node"),
    ("MaxTRESMins", "max_tres_mins"),
)
_QOS_LIMITS = (
    ("MaxJobsPU", "max_jobs_pu", False),
    ("MaxSubmitPU", "max_submit_pu", False),
    ("MaxJobsPA", "max_jobs_pa", False),
    ("MaxSubmitPA", "max_submit_pa", False),
)
_QOS_TRES = (("MaxTRESPU", "max_tres_pu"), ("MaxTRESPA", "max_tres_pa"))


def _names(text: str) -> list[str]:
    return [name for name in text.split(",") if name]


def _fill(
    row: Row,
    message: pb.AssociationLimits | pb.QosLimitsRecord,
    limits: Iterable[tuple[str, str, bool]],
    tres: Iterable[tuple[str, str]],
) -> None:
    for column, name, minutes in limits:
        text = row.get(column, "").strip()
        if text:
            setattr(message, name, timefmt.parse_duration(text) if minutes else int(text))
    for column, name in tres:
        getattr(message, name).update(parse_tres_limits(row.get(column, "")))


def association(row: Row) -> pb.AssociationLimits:
    share = row.get("Share", "")
    message = pb.AssociationLimits(
        account=row["Account"],
        user=row["User"],
        partition=row["Partition"],
        parent=row.get("ParentName", ""),
        shares=-1 if share == "parent" else int(share or 1),
        qos=_names(row.get("QOS", "")),
        def_qos=row.get("Def QOS", ""),
    )
    _fill(row, message, _LIMITS, _TRES)
    return message


def qos(row: Row) -> pb.QosLimitsRecord:
    message = pb.QosLimitsRecord(
        name=row["Name"],
        priority=int(row.get("Priority", "") or 0),
        usage_factor=float(row.get("UsageFactor", "") or 1.0),
        preempt=_names(row.get("Preempt", "")),
        preempt_mode=row.get("PreemptMode", "").strip(),
    )
    grace = row.get("GraceTime", "").strip()
    if grace:
        message.grace_time = timefmt.parse_seconds(grace)
    exempt = row.get("PreemptExemptTime", "").strip()
    if exempt:
        message.preempt_exempt_time = timefmt.parse_duration(exempt) * 60
    _fill(row, message, (*_LIMITS, *_QOS_LIMITS), (*_TRES, *_QOS_TRES))
    return message


def reply(
    assocs: Iterable[Row],
    users: Iterable[Row],
    qos_rows: Iterable[Row],
    coordinators: Iterable[Row] = (),
) -> pb.AssociationsReply:
    return pb.AssociationsReply(
        associations=[association(r) for r in assocs],
        users=[
            pb.AccountingUser(
                name=r["User"], default_account=r["Def Acct"], admin_level=r.get("Admin", "")
            )
            for r in users
        ],
        qos=[qos(r) for r in qos_rows],
        coordinators=[pb.Coordination(user=r["User"], account=r["Account"]) for r in coordinators],
    )
