"""``sacctmgr dump`` and ``sacctmgr load``: a cluster's accounts and users as Slurm's flat file.

The file is Slurm's: a ``Cluster - 'name':limits`` line, then for each
account with children a ``Parent - 'account'`` line followed by its users
and sub-accounts, ``User - 'name':DefaultAccount='a':...`` and
``Account - 'name':Description='d':Organization='o':...``, parents before
children, so that loading the lines in order rebuilds the tree.

Both run on top of the ordinary ``AcctAdmin`` calls: ``dump`` lists the
cluster, its associations, the users and the accounts; ``load`` lists what
exists, shows what the file would add (Slurm's tables), and on ``y`` (or
``-i``) adds the cluster, the accounts and the users one call each. Limits
of entities that already exist are left as they are.
"""

from __future__ import annotations

from cli.halt import Halt
from cli.sacctmgr.fields import abbreviates, parse_format, render, value_of
from cli.sacctmgr.text import admin_level, shown
from cli.sacctmgr.words import ASSOC_REC, Grammar, Request, char_list, split_option, strip_quotes
from corral.timefmt import UNLIMITED, parse_duration

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cli.sacctmgr.session import Session

    Row = Mapping[str, str]

#: The file's comment block (Slurm's loader skips it).
_PREAMBLE = """\
# Accounts and users of one cluster, as written by sacctmgr dump.
# Start with the cluster:    Cluster - 'cluster_name':Fairshare=1:QOS='normal'
# then name a parent account (root exists with the cluster):    Parent - 'root'
# and list its accounts and users:
#   Account - 'physics':Description='physics':Organization='science':Fairshare=10
#   User - 'alice':DefaultAccount='physics':Fairshare=1
# An account must be listed before it appears in a Parent line. Options after
# a ':' can be left out and given in any order.
"""

#: Association columns and how a file line names their limits, in Slurm's order.
_FILE_LIMITS = (
    ("Def QOS", "DefaultQOS", "quoted"),
    ("Share", "Fairshare", ""),
    ("GrpTRESMins", "GrpTRESMins", ""),
    ("GrpTRESRunMins", "GrpTRESRunMins", ""),
    ("GrpTRES", "GrpTRES", ""),
    ("GrpJobs", "GrpJobs", ""),
    ("GrpJobsAccrue", "GrpJobsAccrue", ""),
    ("GrpSubmit", "GrpSubmitJobs", ""),
    ("GrpWall", "GrpWall", "minutes"),
    ("MaxTRESMins", "MaxTRESMinsPerJob", ""),
    ("MaxTRESRunMinsPU", "MaxTRESRunMins", ""),
    ("MaxTRES", "MaxTRESPerJob", ""),
    ("MaxTRESPerNode", "MaxTRESPerNode", ""),
    ("MaxJobs", "MaxJobs", ""),
    ("MaxJobsAccrue", "MaxJobsAccrue", ""),
    ("MaxSubmit", "MaxSubmitJobs", ""),
    ("MaxWall", "MaxWallDurationPerJob", "minutes"),
    ("Priority", "Priority", ""),
    ("QOS", "QOS", "quoted"),
)


def _rows(session: Session, kind: str, where: dict[str, str]) -> list[Row]:
    reply = session.call({"verb": "list", "kind": kind, "where": where})
    return [row["fields"] for row in reply.get("rows", ())]


#: What a second ``Cluster=`` or ``File=`` of dump and load says.
_TWICE = {
    "cluster": " Can only do one cluster at a time.  Already doing {}",
    "file": " File name already set to {}",
}


def _arguments(
    words: Sequence[str], bare: str, keys: Sequence[tuple[str, int, str]]
) -> dict[str, str]:
    """The ``key=value`` arguments of dump or load; a word without ``=`` is ``bare``."""
    given: dict[str, str] = {}
    errors = []
    for word in words:
        option = split_option(word)
        if option is None:
            key, value = bare, word
        else:
            found = [name for full, least, name in keys if abbreviates(option[0], full, least)]
            if not found:
                errors.append(f" Unknown option: {word}")
                continue
            key, value = found[0], option[2]
        if key in given:
            errors.append(_TWICE[key].format(given[key]))
        else:
            given[key] = value
    if errors:
        raise Halt(1, *errors)
    return given


# ----------------------------------------------------------------- dump
def dump(session: Session, words: Sequence[str]) -> int:
    """``dump CLUSTER [File=F]``: write the cluster's tree to ``F`` (``./CLUSTER.cfg``)."""
    given = _arguments(words, "cluster", (("Cluster", 1, "cluster"), ("File", 1, "file")))
    cluster, path = given.get("cluster"), given.get("file")
    if not cluster:
        raise Halt(1, " We need a cluster to dump.")
    clusters = _rows(session, "cluster", {"name": cluster})
    if not clusters:
        raise Halt(1, f" Cluster {cluster} doesn't exist.")
    if not path:
        path = f"./{cluster}.cfg"
        session.say(f" No filename given, using {path}.\n")
    assocs = _rows(session, "association", {"cluster": cluster})
    if not assocs:
        raise Halt(1, f" Cluster {cluster} returned nothing.")
    users = {value_of(row, "User"): row for row in _rows(session, "user", {"withcoord": "yes"})}
    accounts = {value_of(row, "Account"): row for row in _rows(session, "account", {})}
    lines = dump_lines(cluster, value_of(clusters[0], "Class"), assocs, users, accounts)
    try:
        with open(path, "w") as out:
            out.write(_PREAMBLE)
            out.writelines(line + "\n" for line in lines)
    except OSError as error:
        raise Halt(1, f"Can't open file {path}, {error.strerror}") from None
    for line in lines:
        session.info(line)
    return 0


def dump_lines(
    cluster: str,
    classification: str,
    assocs: Sequence[Row],
    users: Mapping[str, Row],
    accounts: Mapping[str, Row],
) -> list[str]:
    """The file's lines (no comments) for the cluster's association rows."""
    children: dict[str, list[Row]] = {}
    root: Row | None = None
    for row in assocs:
        parent = value_of(row, "Account") if value_of(row, "User") else _parent(row)
        if not parent:
            root = root or row
            continue
        children.setdefault(parent, []).append(row)
    for kids in children.values():
        kids.sort(key=_tree_order)
    line = f"Cluster - '{cluster}'"
    if classification:
        line += f":Classification='{classification}'"
    lines = [line + (_limits(root) if root is not None else "")]
    top = [root] if root is not None else []
    _parents(top, children, users, accounts, lines)
    return lines


def _parent(row: Row) -> str:
    return value_of(row, "ParentName") or value_of(row, "Par Name")


def _tree_order(row: Row) -> tuple[int, str, str]:
    """Users before sub-accounts, each by name (Slurm's lineage order)."""
    user = value_of(row, "User")
    if user:
        return (0, user, value_of(row, "Partition"))
    return (1, value_of(row, "Account"), "")


def _parents(
    recs: Sequence[Row],
    children: Mapping[str, Sequence[Row]],
    users: Mapping[str, Row],
    accounts: Mapping[str, Row],
    lines: list[str],
) -> None:
    """A ``Parent`` block for each account in ``recs`` with children, then theirs."""
    for rec in recs:
        if value_of(rec, "User"):
            continue
        kids = children.get(value_of(rec, "Account"), ())
        if not kids:
            continue
        lines.append(f"Parent - '{value_of(rec, 'Account')}'")
        lines.extend(_child_line(kid, users, accounts) for kid in kids)
        _parents(kids, children, users, accounts, lines)


def _child_line(row: Row, users: Mapping[str, Row], accounts: Mapping[str, Row]) -> str:
    name = value_of(row, "User")
    if name:
        line = f"User - '{name}'"
        partition = value_of(row, "Partition")
        if partition:
            line += f":Partition='{partition}'"
        user = users.get(name)
        if user is not None:
            line += f":DefaultAccount='{value_of(user, 'Def Acct')}'"
            wckey = value_of(user, "Def WCKey")
            if wckey:
                line += f":DefaultWCKey='{wckey}'"
            admin = value_of(user, "Admin")
            if admin in ("Operator", "Administrator"):
                line += f":AdminLevel='{admin}'"
            coords = value_of(user, "Coord Accounts")
            if coords:
                line += f":Coordinator='{coords}'"
        comment = value_of(row, "Comment")
        if comment:
            line += f":Comment='{comment}'"
        return line + _limits(row)
    name = value_of(row, "Account")
    line = f"Account - '{name}'"
    account = accounts.get(name)
    if account is not None:
        line += f":Description='{value_of(account, 'Descr')}'"
        line += f":Organization='{value_of(account, 'Org')}'"
    return line + _limits(row)


def _limits(row: Row) -> str:
    """The ``:Key=value`` limits of an association row, in the file's order."""
    parts = []
    for header, key, style in _FILE_LIMITS:
        value = value_of(row, header)
        if not value:
            continue
        if style == "quoted":
            value = f"'{value}'"
        elif style == "minutes":
            try:
                minutes = parse_duration(value)
            except ValueError:
                pass
            else:
                value = str(minutes) if minutes != UNLIMITED else value
        parts.append(f":{key}={value}")
    return "".join(parts)


# ----------------------------------------------------------------- load
_FILE_KEYS = Grammar(
    (
        ("AdminLevel/2", "adminlevel"),
        ("Coordinator/2", "coordinator"),
        ("Classification/2", "classification"),
        ("DefaultAccount/8", "defaultaccount"),
        ("DefaultWCKey/8", "defaultwckey"),
        ("Description/3", "description"),
        ("Organization/1", "organization"),
        ("Partition/1", "partition"),
        ("WCKeys/2", "wckeys"),
        *ASSOC_REC,
    ),
    " Unknown option: {}",
)


class Entry:
    """One ``Object - 'name':options`` line of a file."""

    __slots__ = ("name", "number", "object", "options", "parent")

    def __init__(
        self, number: int, obj: str, name: str, options: dict[str, str], parent: str
    ) -> None:
        self.number = number
        self.object = obj
        self.name = name
        self.options = options
        self.parent = parent

    def __repr__(self) -> str:
        return f"Entry({self.number}, {self.object!r}, {self.name!r}, {self.options!r})"


def parse_options(text: str) -> tuple[str, dict[str, str]]:
    """``'name':Key=value:...`` as the name and the options (canonical keys, lower case).

    ``Halt(1)`` with Slurm's words for an unknown key, two names or none.
    """
    name = ""
    options: dict[str, str] = {}
    for item in _colon_items(text):
        option = split_option(item)
        if option is None:
            if name:
                raise Halt(1, f" Bad format on {item}: End your option with an '=' sign")
            name = strip_quotes(item, lower=True)
            continue
        typed, sign, value = option
        value = strip_quotes(value, lower=True)
        if not value:
            continue
        key = _FILE_KEYS.key(typed)
        if key is None:
            raise Halt(1, f" Unknown option: {item}")
        options[key] = sign + value
    if not name:
        raise Halt(1, " No name given")
    return name, options


def _colon_items(text: str) -> list[str]:
    """``text`` split at the colons outside quotes."""
    items, current, quote = [], "", ""
    for char in text:
        if quote:
            if char == quote:
                quote = ""
        elif char in ("'", '"'):
            quote = char
        elif char == ":":
            items.append(current)
            current = ""
            continue
        current += char
    items.append(current)
    return [item for item in items if item]


def read_lines(content: str) -> list[tuple[int, str]]:
    """The file's logical lines with their numbers: comments cut, ``\\`` continuations joined."""
    out = []
    pending, start = "", 0
    for number, raw in enumerate(content.splitlines(), 1):
        line = _uncomment(raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            out.append((start, line))
    if pending.strip():
        out.append((start, pending.strip()))
    return out


def _uncomment(line: str) -> str:
    """The line before an unescaped ``#``, with ``\\#`` as ``#``."""
    out = []
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\" and line[index + 1 : index + 2] == "#":
            out.append("#")
            index += 2
            continue
        if char == "#":
            break
        out.append(char)
        index += 1
    return "".join(out)


def parse_file(content: str, cluster: str | None = None) -> tuple[Entry, list[Entry]]:
    """The cluster line and the account and user lines of a file, each with its parent."""
    head: Entry | None = None
    entries: list[Entry] = []
    parent = "root"
    for number, line in read_lines(content):
        dash = line.find("-")
        if dash < 0:
            continue
        obj = line[:dash].strip()
        rest = line[dash:]
        space = rest.find(" ")
        if space < 0:
            raise Halt(1, f" Nothing after object name '{obj}'. line({number})")
        text = rest[space + 1 :]
        kind = obj.lower()
        if kind in ("cluster", "machine"):
            if head is not None:
                raise Halt(1, " You can only add one cluster at a time.")
            name, options = parse_options(text)
            head = Entry(number, "Cluster", cluster or name, options, "")
            continue
        if head is None:
            raise Halt(
                1,
                " You need to specify a cluster name first with 'Cluster - $NAME' in your file",
            )
        if kind == "parent":
            parent, _ = parse_options(text)
        elif kind in ("account", "user"):
            name, options = parse_options(text)
            entries.append(Entry(number, obj.capitalize(), name, options, parent))
        else:
            raise Halt(1, f" Misformatted line({number}): {line}")
    if head is None:
        raise Halt(
            1, " You need to specify a cluster name first with 'Cluster - $NAME' in your file"
        )
    return head, entries


#: File options that are association limits, and their list columns.
_LIMIT_COLUMNS = {
    "fairshare": "Share",
    "grptresmins": "GrpTRESMins",
    "grptresrunmins": "GrpTRESRunMins",
    "grptres": "GrpTRES",
    "grpjobs": "GrpJobs",
    "grpjobsaccrue": "GrpJobsAccrue",
    "grpsubmitjobs": "GrpSubmit",
    "grpwall": "GrpWall",
    "maxtresmins": "MaxTRESMins",
    "maxtres": "MaxTRES",
    "maxtrespernode": "MaxTRESPerNode",
    "maxjobs": "MaxJobs",
    "maxsubmitjobs": "MaxSubmit",
    "maxwall": "MaxWall",
    "qos": "QOS",
    "defaultqos": "Def QOS",
}
#: File options a cluster line may not pass on to ``add cluster``.
_NOT_FOR_CLUSTERS = frozenset(
    (
        "adminlevel",
        "coordinator",
        "defaultaccount",
        "defaultwckey",
        "description",
        "organization",
        "partition",
        "wckeys",
    )
)
_ASSOC_TABLE = (
    "Share,GrpTRESM,GrpTRESR,GrpTRES,GrpJ,GrpJobsA,GrpMEM,GrpN,GrpS,GrpW,MaxTRESM,MaxTRES,"
    "MaxTRESPerN,MaxJ,MaxS,MaxN,MaxW,QOS,DefaultQOS"
)
_SHORT_RULE = "-" * 51 + "\n\n"
_LONG_RULE = "-" * 62 + "\n\n"


def _assoc_row(entry: Entry) -> dict[str, str]:
    """A file line as a row of load's association tables."""
    row = {
        column: shown(key, entry.options[key])
        for key, column in _LIMIT_COLUMNS.items()
        if key in entry.options
    }
    if entry.object == "User":
        row.update(User=entry.name, Account=entry.parent)
    else:
        row.update(Account=entry.name, ParentName=entry.parent)
    return row


def load(session: Session, words: Sequence[str]) -> int:
    """``load FILE [Cluster=NAME]``: add what the file has and the database lacks."""
    if any(split_option(word) is None and abbreviates(word, "clean", 3) for word in words):
        raise Halt(1, "sacctmgr: error: load clean is not supported by Corral")
    given = _arguments(words, "file", (("File", 1, "file"), ("Cluster", 3, "cluster")))
    path, cluster = given.get("file"), given.get("cluster")
    if not path:
        raise Halt(1, " No filename given, specify one with file=''")
    try:
        with open(path) as source:
            content = source.read()
    except OSError as error:
        raise Halt(1, f' Unable to read "{words[0]}": {error.strerror}') from None
    head, entries = parse_file(content, cluster)
    plan = _plan(session, head, entries)
    if not plan:
        session.say(" Nothing new added.\n")
        return 0
    if session.confirm("Would you like to commit changes?"):
        for request in plan:
            session.call(request.message(commit=True))
    else:
        session.say(" Changes Discarded\n")
    return 0


def _plan(session: Session, head: Entry, entries: Sequence[Entry]) -> list[Request]:
    """Show what the file adds, Slurm's way; return the add requests that do it."""
    name = head.name
    session.say(f"For cluster {name}\n")
    plan = []
    if not _rows(session, "cluster", {"name": name}):
        if "classification" in head.options:
            session.say(f"Classification: {head.options['classification']}\n")
        root = Entry(head.number, "Account", "root", head.options, "")
        _table(session, [_assoc_row(root)], "Account,ParentName," + _ASSOC_TABLE)
        session.say(_LONG_RULE)
        plan.append(_add("cluster", [name], head.options, {}))
    existing = {
        (value_of(row, "Account"), value_of(row, "User"), value_of(row, "Partition"))
        for row in _rows(session, "association", {"cluster": name})
    }
    known_accounts = {value_of(row, "Account") for row in _rows(session, "account", {})}
    known_users = {value_of(row, "User") for row in _rows(session, "user", {})}
    accounts = [e for e in entries if e.object == "Account" and (e.name, "", "") not in existing]
    users = [
        e
        for e in entries
        if e.object == "User" and (e.parent, e.name, e.options.get("partition", "")) not in existing
    ]
    new_accounts = _first_of_each([e for e in accounts if e.name not in known_accounts])
    new_users = _first_of_each([e for e in users if e.name not in known_users])
    if new_accounts:
        session.say("Accounts\n")
        rows = [
            {
                "Name": e.name,
                "Descr": e.options.get("description", e.name),
                "Org": e.options.get("organization", e.parent if e.parent != "root" else e.name),
            }
            for e in new_accounts
        ]
        _table(session, rows, "Name,Description,Organization,QOS")
        session.say(_SHORT_RULE)
    if accounts:
        session.say("Account Associations\n")
        rows = [_assoc_row(e) for e in accounts]
        _table(session, rows, "Account,ParentName," + _ASSOC_TABLE)
        session.say(_LONG_RULE)
    if new_users:
        session.say("Users\n")
        rows = [
            {
                "Name": e.name,
                "Def Acct": e.options.get("defaultaccount", e.parent),
                "Def WCKey": e.options.get("defaultwckey", ""),
                "Admin": admin_level(e.options.get("adminlevel", "none")),
                "Coord Accounts": e.options.get("coordinator", ""),
            }
            for e in new_users
        ]
        _table(session, rows, "Name,DefaultA,DefaultW,QOS,Admin,Coord")
        session.say(_SHORT_RULE)
    if users:
        session.say("User Associations\n")
        _table(session, [_assoc_row(e) for e in users], "User,Account," + _ASSOC_TABLE)
        session.say(_LONG_RULE)
    for e in accounts:
        plan.append(_add("account", [e.name], e.options, {"cluster": name, "parent": e.parent}))
    for e in users:
        extra = {"cluster": name, "account": e.parent}
        plan.append(_add("user", [e.name], e.options, extra))
    return plan


def _first_of_each(entries: Sequence[Entry]) -> list[Entry]:
    seen: set[str] = set()
    out = []
    for entry in entries:
        if entry.name not in seen:
            seen.add(entry.name)
            out.append(entry)
    return out


def _table(session: Session, rows: Sequence[Row], spec: str) -> None:
    columns = parse_format(spec.lower().split(","))
    session.say(render(rows, columns, session.parsable, session.header))


def _add(kind: str, names: list[str], options: Mapping[str, str], extra: dict[str, str]) -> Request:
    """An ``add`` request for one file line."""
    request = Request("add", kind)
    request.where["name"] = names
    for key, value in options.items():
        if key == "coordinator" or (kind == "cluster" and key in _NOT_FOR_CLUSTERS):
            continue
        if kind == "account" and key in ("adminlevel", "defaultaccount", "defaultwckey"):
            continue
        request.settings[key] = char_list(value) if key in ("partition", "wckeys") else value
    for key, value in extra.items():
        request.settings[key] = [value] if key in ("account", "cluster") else value
    return request
