"""What sacctmgr manages, as data: each entity's settings, their words and columns.

For every kind (cluster, account, user, qos, association, tres, event,
coordinator, reservation) a table of
``Setting``: the word sacctmgr takes (``grpjobs``, ``maxwall``...), the
column it is stored in, how a typed value is read (with Slurm's error when it
is bad) and how it is printed under which header. ``dbd.admin`` does the
database work from these tables, so a new limit is one line here (and a
column in ``dbd.models`` with its migration).

Values follow sacctmgr: counts are whole numbers and ``-1`` clears a limit,
times are Slurm durations stored in minutes, TRES limits are ``cpu=4,mem=1G``
lists, QOS lists are names that must exist.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable
from dataclasses import dataclass

from corral import timefmt
from corral.errors import EINVAL, SlurmError

Reader = Callable[[str], object]
Printer = Callable[[object], str]

#: TRES Slurm always has, with their ids (``sacctmgr show tres``).
BASE_TRES = (
    ("cpu", "", 1),
    ("mem", "", 2),
    ("energy", "", 3),
    ("node", "", 4),
    ("billing", "", 5),
    ("fs", "disk", 6),
    ("vmem", "", 7),
    ("pages", "", 8),
)
#: The id of the first TRES a cluster registers beyond those (``gres/gpu``, ...).
FIRST_TRES_ID = 1001


def invalid(message: str) -> SlurmError:
    return SlurmError(EINVAL, message)


def count(text: str) -> int | None:
    """A limit count; ``-1`` (or empty) clears it."""
    try:
        value = int(text)
    except ValueError:
        raise invalid(f"Invalid value '{text}': a whole number is needed") from None
    if value < -1:
        raise invalid(f"Invalid value '{text}': a whole number is needed")
    return None if value == -1 else value


def minutes(text: str) -> int | None:
    """A wall-clock limit in minutes; ``-1`` clears it."""
    if text.strip() == "-1":
        return None
    try:
        value = timefmt.parse_duration(text)
    except ValueError:
        raise invalid(f"Invalid time specification: {text}") from None
    return None if value == timefmt.UNLIMITED else value


def preempt_mode(text: str) -> str:
    """A QOS's PreemptMode: ``cluster`` (slurm.conf's), OFF, CANCEL, REQUEUE or SUSPEND,
    with WITHIN (its jobs preempt each other by priority). GANG is slurm.conf's word
    alone (time-slicing is cluster-wide), so it is refused here."""
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    for word in words:
        if word == "gang":
            raise invalid("PreemptMode=GANG is set in slurm.conf's PreemptMode, not on a QOS")
        if word not in ("cluster", "off", "cancel", "requeue", "suspend", "within"):
            raise invalid(
                f"Invalid PreemptMode '{text}': Cluster, Off, Cancel, Requeue, Suspend, Within"
            )
    return ",".join(words) or "cluster"


def tres_list(text: str) -> str | None:
    """``cpu=4,mem=1G,gres/gpu=2`` checked and kept as written; ``-1`` clears it, and
    an item ``NAME=-1`` is no limit on NAME (left out, as Slurm removes it).
    A ``license/NAME`` passes here; ``dbd.licensetres`` checks dbd tracks it."""
    if text.strip() in ("-1", ""):
        return None
    known = {name if not kind else f"{name}/{kind}" for name, kind, _ in BASE_TRES}
    kept: list[str] = []
    for item in text.split(","):
        name, equal, value = item.partition("=")
        name = name.strip().lower()
        if not equal or not value.strip():
            raise invalid(f"Invalid TRES specification: {text}")
        if name not in known and not name.startswith(("gres/", "license/")):
            raise invalid(f"Invalid TRES name: {name}")
        if name in ("gres/", "license/"):
            raise invalid(f"Invalid TRES name: {name}")
        if value.strip() != "-1":
            kept.append(item.strip())
    return ",".join(kept) or None


def stripped(text: str) -> str:
    return text.strip()


def shares(text: str) -> int:
    """Fairshare: a positive number, or ``parent`` (stored as -1, as Slurm does)."""
    if text.strip().lower() == "parent":
        return -1
    try:
        value = int(text)
    except ValueError:
        raise invalid(f"Invalid Fairshare value '{text}'") from None
    if value < 0:
        raise invalid(f"Invalid Fairshare value '{text}'")
    return value or 1


def admin_level(text: str) -> str:
    levels = {"none": "None", "operator": "Operator", "admin": "Administrator"}
    key = text.strip().lower()
    key = "admin" if key.startswith("admin") else key
    if key not in levels:
        raise invalid(f"Invalid AdminLevel '{text}': None, Operator or Administrator")
    return levels[key]


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise invalid(f"Invalid value '{text}': a number is needed") from None


def plain(value: object) -> str:
    return "" if value is None else str(value)


def wall(value: object) -> str:
    return "" if value is None else timefmt.format_limit_hms(int(str(value)))


def fairshare(value: object) -> str:
    return "parent" if value == -1 else plain(value)


def usage_factor(value: object) -> str:
    return f"{float(str(value)):.6f}"


def grace(value: object) -> str:
    return timefmt.format_hms(int(str(value or 0)))


@dataclass(frozen=True, slots=True)
class Setting:
    word: str  # sacctmgr's word, lower case
    column: str  # the model attribute
    header: str  # what sacctmgr prints above it ("" = not a column)
    read: Reader = stripped
    show: Printer = plain


#: Limits associations and QOS share.
_LIMITS = (
    Setting("grptres", "grp_tres", "GrpTRES", tres_list),
    Setting("grptresmins", "grp_tres_mins", "GrpTRESMins", tres_list),
    Setting("grptresrunmins", "grp_tres_run_mins", "GrpTRESRunMins", tres_list),
    Setting("grpjobs", "grp_jobs", "GrpJobs", count),
    Setting("grpsubmitjobs", "grp_submit", "GrpSubmit", count),
    Setting("grpwall", "grp_wall", "GrpWall", minutes, wall),
    Setting("maxtres", "max_tres", "MaxTRES", tres_list),
    Setting("maxtrespernode", "max_tres_per_node", "MaxTRESPerNode", tres_list),
    Setting("maxtresmins", "max_tres_mins", "MaxTRESMins", tres_list),
    Setting("maxjobs", "max_jobs", "MaxJobs", count),
    Setting("maxsubmitjobs", "max_submit", "MaxSubmit", count),
    Setting("maxwall", "max_wall", "MaxWall", minutes, wall),
)
_LIMIT = {s.word: s for s in _LIMITS}

ASSOCIATION = (
    Setting("cluster", "cluster", "Cluster"),
    Setting("account", "account", "Account"),
    Setting("user", "user", "User"),
    Setting("partition", "partition", "Partition"),
    Setting("fairshare", "shares", "Share", shares, fairshare),
    Setting("priority", "priority", "Priority", count),
    _LIMIT["grpjobs"],
    _LIMIT["grptres"],
    _LIMIT["grpsubmitjobs"],
    _LIMIT["grpwall"],
    _LIMIT["grptresmins"],
    _LIMIT["maxjobs"],
    _LIMIT["maxtres"],
    _LIMIT["maxtrespernode"],
    _LIMIT["maxsubmitjobs"],
    _LIMIT["maxwall"],
    _LIMIT["maxtresmins"],
    Setting("qos", "qos", "QOS"),
    Setting("defaultqos", "def_qos", "Def QOS"),
    _LIMIT["grptresrunmins"],
    Setting("parent", "parent", "ParentName"),
)

QOS = (
    Setting("name", "name", "Name"),
    Setting("priority", "priority", "Priority", count, lambda v: plain(v or 0)),
    Setting("gracetime", "grace_time", "GraceTime", count, grace),
    Setting("preempt", "preempt", "Preempt"),
    Setting("preemptexempttime", "preempt_exempt_time", "PreemptExemptTime", minutes, wall),
    Setting("preemptmode", "preempt_mode", "PreemptMode", preempt_mode),
    Setting("flags", "flags", "Flags"),
    Setting("usagethreshold", "usage_threshold", "UsageThres", number),
    Setting("usagefactor", "usage_factor", "UsageFactor", number, usage_factor),
    _LIMIT["grptres"],
    _LIMIT["grptresmins"],
    _LIMIT["grptresrunmins"],
    _LIMIT["grpjobs"],
    _LIMIT["grpsubmitjobs"],
    _LIMIT["grpwall"],
    _LIMIT["maxtres"],
    _LIMIT["maxtrespernode"],
    _LIMIT["maxtresmins"],
    _LIMIT["maxwall"],
    Setting("maxtresperuser", "max_tres_pu", "MaxTRESPU", tres_list),
    Setting("maxjobsperuser", "max_jobs_pu", "MaxJobsPU", count),
    Setting("maxsubmitjobsperuser", "max_submit_pu", "MaxSubmitPU", count),
    Setting("maxtresperaccount", "max_tres_pa", "MaxTRESPA", tres_list),
    Setting("maxjobsperaccount", "max_jobs_pa", "MaxJobsPA", count),
    Setting("maxsubmitjobsperaccount", "max_submit_pa", "MaxSubmitPA", count),
    Setting("mintres", "min_tres", "MinTRES", tres_list),
    Setting("description", "description", ""),
)

ACCOUNT = (
    Setting("name", "name", "Account"),
    Setting("description", "description", "Descr"),
    Setting("organization", "organization", "Org"),
)

USER = (
    Setting("name", "name", "User"),
    Setting("defaultaccount", "default_account", "Def Acct"),
    Setting("adminlevel", "admin_level", "Admin", admin_level),
)

CLUSTER = (
    Setting("name", "name", "Cluster"),
    Setting("controlhost", "control_host", "ControlHost"),
    Setting("controlport", "control_port", "ControlPort"),
    Setting("rpc", "rpc", "RPC"),
)


def timestamp(value: object) -> str:
    epoch = int(str(value or 0))
    return timefmt.format_timestamp(epoch) if epoch else "Unknown"


def user_name(uid: int) -> str:
    """The user called ``uid`` on this host, else the number."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def user_of(value: object) -> str:
    return user_name(int(str(value or 0)))


EVENT = (
    Setting("cluster", "cluster", "Cluster"),
    Setting("nodes", "node", "NodeName"),
    Setting("start", "time_start", "TimeStart", show=timestamp),
    Setting("end", "time_end", "TimeEnd", show=timestamp),
    Setting("state", "state", "State"),
    Setting("reason", "reason", "Reason"),
    Setting("user", "reason_uid", "User", show=user_of),
)

#: ``sacctmgr show reservation`` (rows made by ``dbd.reservations.sacctmgr_row``).
RESERVATION = (
    Setting("cluster", "cluster", "Cluster"),
    Setting("name", "name", "Name"),
    Setting("id", "resv_id", "ID"),
    Setting("nodes", "nodes", "NodeName"),
    Setting("flags", "flags", "Flags"),
    Setting("tres", "tres", "TRES"),
    Setting("start", "time_start", "TimeStart", show=timestamp),
    Setting("end", "time_end", "TimeEnd", show=timestamp),
    Setting("unusedwall", "unused_wall", "UnusedWall"),
)

COORDINATOR = (
    Setting("name", "user", "User"),
    Setting("account", "account", "Account"),
)

TRES = (
    Setting("type", "type", "Type"),
    Setting("name", "name", "Name"),
    Setting("id", "id", "ID"),
)

#: sacctmgr's other spellings of the same word.
SYNONYMS = {
    "names": "name",
    "accounts": "account",
    "users": "user",
    "clusters": "cluster",
    "partitions": "partition",
    "share": "fairshare",
    "shares": "fairshare",
    "defaultacct": "defaultaccount",
    "defaccount": "defaultaccount",
    "defqos": "defaultqos",
    "qoslevel": "qos",
    "grpsubmit": "grpsubmitjobs",
    "maxsubmit": "maxsubmitjobs",
    "maxwalldurationperjob": "maxwall",
    "grpwallduration": "grpwall",
    "maxtresperjob": "maxtres",
    "maxcpus": "maxtres",
    "maxjobspu": "maxjobsperuser",
    "maxsubmitpu": "maxsubmitjobsperuser",
    "maxtrespu": "maxtresperuser",
    "maxjobspa": "maxjobsperaccount",
    "maxsubmitpa": "maxsubmitjobsperaccount",
    "maxtrespa": "maxtresperaccount",
    "descr": "description",
    "desc": "description",
    "org": "organization",
    "parentname": "parent",
    "node": "nodes",
    "nodename": "nodes",
}

DEFAULT_COLUMNS = {
    "cluster": (
        "Cluster",
        "ControlHost",
        "ControlPort",
        "RPC",
        "Share",
        "GrpJobs",
        "GrpTRES",
        "GrpSubmit",
        "MaxJobs",
        "MaxTRES",
        "MaxSubmit",
        "MaxWall",
        "QOS",
        "Def QOS",
    ),
    "account": ("Account", "Descr", "Org"),
    "user": ("User", "Def Acct", "Admin"),
    "qos": tuple(s.header for s in QOS if s.header),
    "association": tuple(s.header for s in ASSOCIATION[:-1]),
    "tres": ("Type", "Name", "ID"),
    "event": ("Cluster", "NodeName", "TimeStart", "TimeEnd", "State", "Reason", "User"),
    "coordinator": ("User", "Account"),
    "reservation": ("Cluster", "Name%15", "TRES%30", "TimeStart", "TimeEnd", "UnusedWall"),
}

SETTINGS = {
    "cluster": CLUSTER,
    "account": ACCOUNT,
    "user": USER,
    "qos": QOS,
    "association": ASSOCIATION,
    "tres": TRES,
    "event": EVENT,
    "coordinator": COORDINATOR,
    "reservation": RESERVATION,
}


def canonical(key: str) -> str:
    key = key.strip().lower()
    return SYNONYMS.get(key, key)


def setting(kind: str, key: str, extra: tuple[Setting, ...] = ()) -> Setting:
    """The setting ``key`` names for ``kind`` (with ``extra`` ones), or Slurm's error."""
    wanted = canonical(key)
    for item in (*SETTINGS[kind], *extra):
        if item.word == wanted:
            return item
    raise invalid(f"Unknown option: {key}")


#: Longest name the database keeps (accounts, users, QOS, clusters, partitions).
MAX_NAME = 64


def names(text: str) -> list[str]:
    """A comma list of names, lower-cased as Slurm stores them; empty items dropped.

    A name the database could not keep whole, or with quotes, spaces or
    control characters, is refused rather than stored altered.
    """
    found = [part.strip().lower() for part in text.split(",") if part.strip()]
    for name in found:
        if len(name) > MAX_NAME:
            raise invalid(f"Name '{name[:MAX_NAME]}...' is longer than {MAX_NAME} characters")
        if any(c in "'\"` " or not c.isprintable() for c in name):
            raise invalid(f"Invalid name '{name}'")
    return found
