"""What sacctmgr says about a change before it asks to commit it, in Slurm 24.11's words.

``add``, ``modify`` and ``delete`` first ask the accounting daemon what would
change (``commit`` false); its reply lists the entities and associations
concerned, one row each, keyed by sacctmgr's column headers. An association
row has a ``Cluster`` (for a cluster, an ``Account``); an entity row does not.
From those rows and the settings typed, this module writes the description
Slurm prints (`` Adding Account(s)``, `` Modified user associations...``,
`` Nothing deleted``) and says whether there is anything to commit.
"""

from __future__ import annotations

from cli.sacctmgr.fields import value_of
from corral.timefmt import UNLIMITED, format_hms, parse_duration

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cli.sacctmgr.words import Request

    Row = Mapping[str, str]


class Outcome:
    """A change described: the text, whether anything would change, and the exit status."""

    __slots__ = ("changed", "status", "text")

    def __init__(self, text: str, changed: bool, status: int = 0) -> None:
        self.text = text
        self.changed = changed
        self.status = status

    def __repr__(self) -> str:
        return f"Outcome({self.text!r}, {self.changed!r}, {self.status!r})"


# ----------------------------------------------------------------- limits
#: ``sacctmgr_print_assoc_limits``: key, label (padded as Slurm pads it).
_ASSOC_LIMITS = (
    ("fairshare", "Fairshare     "),
    ("grpjobs", "GrpJobs       "),
    ("grpjobsaccrue", "GrpJobsAccrue            "),
    ("grpsubmitjobs", "GrpSubmitJobs "),
    ("grptres", "GrpTRES       "),
    ("grptresmins", "GrpTRESMins   "),
    ("grptresrunmins", "GrpTRESRunMins"),
    ("grpwall", "GrpWall       "),
    ("maxjobs", "MaxJobs       "),
    ("maxjobsaccrue", "MaxJobsPrioAcc"),
    ("maxsubmitjobs", "MaxSubmitJobs "),
    ("maxtres", "MaxTRES       "),
    ("maxtrespernode", "MaxTRESPerNode"),
    ("maxtresmins", "MaxTRESMins   "),
    ("maxtresrunmins", "MaxTRESRUNMins"),
    ("maxwall", "MaxWall       "),
    ("minpriothresh", "MinPrioThresh "),
    ("parent", "Parent        "),
    ("priority", "Priority      "),
    ("qos", "QOS           "),
    ("defaultqos", "DefQOS        "),
    ("comment", "Comment       "),
)
#: ``sacctmgr_print_qos_limits``: key, label.
_QOS_LIMITS = (
    ("flags", "Flags"),
    ("gracetime", "GraceTime"),
    ("grpjobs", "GrpJobs"),
    ("grpjobsaccrue", "GrpJobsAccrue"),
    ("grpsubmitjobs", "GrpSubmitJobs"),
    ("grptres", "GrpTRES"),
    ("grptresmins", "GrpTRESMins"),
    ("grptresrunmins", "GrpTRESRunMins"),
    ("grpwall", "GrpWall"),
    ("maxjobsaccruepa", "MaxJobsAccruePerAccount"),
    ("maxjobsaccruepu", "MaxJobsAccruePerUser"),
    ("maxjobspa", "MaxJobsPerAccount"),
    ("maxjobspu", "MaxJobsPerUser"),
    ("maxsubmitpa", "MaxSubmitJobsPerAccount"),
    ("maxsubmitpu", "MaxSubmitJobsPerUser"),
    ("maxtrespa", "MaxTRESPerAccount"),
    ("maxtres", "MaxTRESPerJob"),
    ("maxtrespernode", "MaxTRESPerNode"),
    ("maxtrespu", "MaxTRESPerUser"),
    ("minpriothresh", "MinPrioThresh"),
    ("mintres", "MinTRESPerJob"),
    ("maxtresmins", "MaxTRESMins"),
    ("maxtresrunminspa", "MaxTRESRUNMinsPerAccount"),
    ("maxtresrunminspu", "MaxTRESRUNMinsPerUser"),
    ("maxwall", "MaxWall"),
    ("preempt", "Preempt"),
    ("preemptmode", "PreemptMode"),
    ("preemptexempttime", "PreemptExemptTime"),
    ("priority", "Priority"),
    ("usagefactor", "UsageFactor"),
    ("usagethreshold", "UsageThreshold"),
    ("limitfactor", "LimitFactor"),
)
#: Limits that print NONE when set to -1 (Slurm's INFINITE); GrpJobsAccrue says None.
_COUNTS = frozenset(
    (
        "fairshare",
        "grpjobs",
        "grpsubmitjobs",
        "maxjobs",
        "maxjobsaccrue",
        "maxsubmitjobs",
        "minpriothresh",
        "priority",
        "gracetime",
        "maxjobsaccruepa",
        "maxjobsaccruepu",
        "maxjobspa",
        "maxjobspu",
        "maxsubmitpa",
        "maxsubmitpu",
        "preemptexempttime",
    )
)
_WALLS = frozenset(("grpwall", "maxwall"))
_FACTORS = frozenset(("usagefactor", "usagethreshold", "limitfactor"))


def shown(key: str, value: str) -> str:
    """A limit as sacctmgr echoes it: NONE for -1, clocks for wall times, 4-digit factors."""
    if key in _WALLS:
        if value == "0":
            return format_hms(0)
        try:
            minutes = parse_duration(value)
        except ValueError:
            return value
        return "NONE" if minutes == UNLIMITED else format_hms(minutes * 60)
    if key in _FACTORS:
        if value == "-1":
            return "NONE"
        try:
            return f"{float(value):.4f}"
        except ValueError:
            return value
    if key in _COUNTS and value == "-1":
        return "None" if key == "grpjobsaccrue" else "NONE"
    return value


def assoc_limits(request: Request) -> str:
    """The association settings of ``request``, one ``  Label = value`` line each."""
    lines = []
    for key, label in _ASSOC_LIMITS:
        value = request.setting(key)
        if value is not None:
            lines.append(f"  {label}= {shown(key, value)}\n")
    return "".join(lines)


def qos_limits(request: Request) -> str:
    """The QOS settings of ``request`` as ``sacctmgr add qos`` lists them."""
    lines = []
    for key, label in _QOS_LIMITS:
        value = request.setting(key)
        if value is None:
            continue
        # Slurm pads every label to 25 but one.
        padded = "MaxJobsPerUser " if key == "maxjobspu" else label.ljust(25)
        lines.append(f"  {padded}= {shown(key, value)}\n")
    return "".join(lines)


#: Settings of the entity itself rather than of its associations.
_ENTITY_SETTINGS = {
    "account": frozenset(("description", "organization", "flags")),
    "user": frozenset(("adminlevel", "defaultaccount", "defaultwckey", "newname")),
    "cluster": frozenset(("classification", "features", "federation", "fedstate")),
    "qos": frozenset(),
}
#: Conditions on the entity itself; others select associations.
_ENTITY_CONDITIONS = {
    "account": frozenset(("name", "description", "organization", "flags")),
    "user": frozenset(("name", "adminlevel", "defaultaccount", "defaultwckey")),
}
_FLAGS = frozenset(
    (
        "withassoc",
        "withcoord",
        "withdeleted",
        "withrawqos",
        "woplimits",
        "wopinfo",
        "onlydefaults",
        "tree",
        "withsubaccounts",
        "withfed",
        "wolimits",
        "withclusters",
    )
)


def _has_limits(request: Request) -> bool:
    entity = _ENTITY_SETTINGS.get(request.kind, frozenset())
    skip = {"account", "cluster", "partition", "wckeys", *entity}
    return any(key not in skip for key in request.settings)


# ----------------------------------------------------------------- rows
def _is_assoc(row: Row, kind: str) -> bool:
    """Whether a reply row is an association rather than the entity itself."""
    return bool(value_of(row, "Account" if kind == "cluster" else "Cluster"))


def _name(row: Row, kind: str) -> str:
    header = {"account": "Account", "user": "User", "cluster": "Cluster"}.get(kind, "Name")
    return value_of(row, header) or value_of(row, "Name")


def _names(rows: Sequence[Row], kind: str) -> list[str]:
    """The entity names of ``rows``: those of the entity rows, else those the rows mention."""
    entities = [row for row in rows if not _is_assoc(row, kind)] or list(rows)
    names: list[str] = []
    for row in entities:
        name = _name(row, kind)
        if name and name not in names:
            names.append(name)
    return names


def assoc_line(row: Row, style: str) -> str:
    """An association as Slurm's daemon names it: ``C = bench      A = physics ...``.

    ``style`` is ``add``, ``modify`` or ``delete``: each pads differently.
    """
    cluster, account = value_of(row, "Cluster"), value_of(row, "Account")
    user, partition = value_of(row, "User"), value_of(row, "Partition")
    if style == "add" or user:
        width = 10 if style == "delete" else 20
        line = f"C = {cluster:<10} A = {account:<{width}}"
        if user:
            line += f" U = {user:<9}"
            if partition:
                line += f" P = {partition}"
        return line
    parent = value_of(row, "ParentName") or value_of(row, "Par Name")
    if parent:
        return f"C = {cluster:<10} A = {account} of {parent}"
    return f"C = {cluster:<10} A = {account}"


def _listing(title: str, items: Sequence[str]) -> str:
    return title + "".join(f"  {item}\n" for item in items)


# ----------------------------------------------------------------- add
def describe_add(request: Request, rows: Sequence[Row]) -> Outcome:
    """What ``sacctmgr add`` prints for the rows the daemon would add."""
    kind = request.kind
    if kind == "coordinator":
        return _coordinators(
            rows, " Adding Coordinator User(s)\n", " To Account(s) and all sub-accounts\n"
        )
    if kind == "qos":
        return _add_qos(request, rows)
    if kind == "cluster":
        return _add_cluster(request, rows)
    if not rows:
        if kind == "user":
            return Outcome(
                "Request didn't affect anything\nNothing added.\nMake sure the accounts "
                "requested here have been added to the system/cluster. "
                "(sacctmgr add account...)\n",
                False,
                1,
            )
        return Outcome(" Request didn't affect anything\n", False, 1)
    entities = [row for row in rows if not _is_assoc(row, kind)]
    assocs = [row for row in rows if _is_assoc(row, kind)]
    text = []
    if kind == "account":
        if entities or not assocs:
            text.append(_listing(" Adding Account(s)\n", _names(rows, kind)))
            description = request.setting("description") or "Account Name"
            organization = request.setting("organization") or "Parent/Account Name"
            text.append(
                f" Settings\n  Description     = {description}\n"
                f"  Organization    = {organization}\n"
            )
    elif entities or not assocs:
        text.append(_listing(" Adding User(s)\n", _names(rows, kind)))
        text.append(" Settings\n")
        default = request.setting("defaultaccount")
        if default:
            text.append(f"  Default Account = {default}\n")
        admin = request.setting("adminlevel")
        if admin is not None:
            text.append(f"  Admin Level     = {admin_level(admin)}\n")
    if assocs:
        text.append(" Associations =\n")
        text.extend(f"  {assoc_line(row, 'add')}\n" for row in assocs)
    if kind == "account" and any(key not in ("account", "cluster") for key in request.settings):
        text.append(" Settings\n" + assoc_limits(request))
    elif kind == "user" and _has_limits(request):
        text.append(" Non Default Settings\n" + assoc_limits(request))
    return Outcome("".join(text), True)


def admin_level(text: str) -> str:
    """Slurm's name for an ``AdminLevel=`` value (first letter decides)."""
    first = text[:1].lower()
    if first == "n":
        return "None"
    if first == "o":
        return "Operator"
    if first in ("s", "a"):
        return "Administrator"
    return "Not Set"


def _add_qos(request: Request, rows: Sequence[Row]) -> Outcome:
    names = _names(rows, "qos")
    if not names:
        return Outcome(" Nothing new added.\n", False, 1)
    description = request.setting("description") or names[-1]
    text = _listing(" Adding QOS(s)\n", names)
    text += f" Settings\n  Description    = {description}\n" + qos_limits(request)
    return Outcome(text, True)


def _add_cluster(request: Request, rows: Sequence[Row]) -> Outcome:
    names = _names(rows, "cluster")
    text = "".join(
        f" This cluster {name} already exists.  Not adding.\n"
        for name in request.names()
        if name not in names
    )
    if not names:
        return Outcome(text, False, 1)
    text += " Adding Cluster(s)\n" + "".join(f"  Name           = {name}\n" for name in names)
    return Outcome(text + _cluster_settings(request), True)


def _cluster_settings(request: Request) -> str:
    """The `` Setting`` block of ``add cluster`` and ``modify cluster``."""
    if not request.settings:
        return ""
    text = " Setting\n"
    for key, label in (
        ("classification", "Classification"),
        ("federation", "Federation    "),
        ("fedstate", "FedState      "),
    ):
        value = request.setting(key)
        if value is not None:
            text += f"  {label} = {value}\n"
    features = request.setting("features")
    if features is not None:
        sign = features[:1] if features[:1] in "+-" else " "
        text += f"  Feature      {sign}= {features.lstrip('+-')}\n"
    if _has_limits(request):
        text += "  Default Limits:\n" + assoc_limits(request)
    return text


# ----------------------------------------------------------------- modify
_MODIFIED = {
    "account": (" Modified accounts...\n", " Modified account associations...\n"),
    "user": (" Modified users...\n", " Modified user associations...\n"),
    "cluster": (" Modified cluster...\n", " Modified cluster defaults for associations...\n"),
    "qos": (" Modified qos...\n", ""),
}


def describe_modify(request: Request, rows: Sequence[Row]) -> Outcome:
    """What ``sacctmgr modify`` prints for the rows the daemon would change."""
    kind = request.kind
    entity_keys = _ENTITY_SETTINGS[kind]
    parts = []
    if kind == "qos" or any(key in entity_keys for key in request.settings):
        parts.append(False)
    if kind != "qos" and any(key not in entity_keys for key in request.settings):
        parts.append(True)
    text = [_cluster_settings(request)] if kind == "cluster" else []
    changed, status = False, 0
    for assoc in parts:
        chosen = [row for row in rows if _is_assoc(row, kind) == assoc]
        if not chosen:
            text.append(" Nothing modified\n")
            status = 1
            continue
        items = [assoc_line(row, "modify") for row in chosen] if assoc else _names(chosen, kind)
        text.append(_listing(_MODIFIED[kind][assoc], items))
        changed = True
    return Outcome("".join(text), changed, status)


# ----------------------------------------------------------------- delete
_DELETING = {
    "account": (" Deleting accounts...\n", " Deleting account associations...\n"),
    "user": (" Deleting users...\n", " Deleting user associations...\n"),
    "cluster": (" Deleting clusters...\n", ""),
    "qos": (" Deleting QOS(s)...\n", ""),
}


def _coordinators(rows: Sequence[Row], users: str, accounts: str) -> Outcome:
    """Coordinators added or removed: the users, then the accounts."""
    if not rows:
        return Outcome(" Nothing new added.\n", False, 1)
    names = list(dict.fromkeys(str(row["User"]) for row in rows))
    where = list(dict.fromkeys(str(row["Account"]) for row in rows))
    return Outcome(_listing(users, names) + _listing(accounts, where), True)


def describe_delete(request: Request, rows: Sequence[Row]) -> Outcome:
    """What ``sacctmgr delete`` prints for the rows the daemon would remove."""
    kind = request.kind
    if not rows:
        return Outcome(" Nothing deleted\n", False, 1)
    if kind == "coordinator":
        return _coordinators(rows, " Removing Coordinators with user name\n", " From Account(s)\n")
    entity_conditions = _ENTITY_CONDITIONS.get(kind)
    assoc = entity_conditions is not None and any(
        key not in entity_conditions for key in request.where if key not in _FLAGS
    )
    items: list[str] = []
    for row in rows:
        item = assoc_line(row, "delete") if _is_assoc(row, kind) and assoc else _name(row, kind)
        if item not in items:  # a user's name once, however many associations go
            items.append(item)
    return Outcome(_listing(_DELETING[kind][assoc], items), True)


def conditions(request: Request) -> list[str]:
    """The ``where`` keys of ``request`` that select something (flags do not)."""
    return [key for key in request.where if key not in _FLAGS]
