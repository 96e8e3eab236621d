"""sshare: the fair-share tree, laid out as Slurm 24.11's sshare.

The controller sends the associations in sshare's order (``Shares``): root,
then depth first each level's users before its accounts, with shares,
usage and factors computed. Columns, their widths, the indented account
names and the ``|``-separated forms are Slurm's ``print_fields`` rules, so
scripts that parse sshare keep working.
"""

from __future__ import annotations

import os
import pwd
import sys

from cli import boundary
from cli.command import Command, split_list
from cli.halt import Halt
from cli.options import REQUIRED, WARNED, Option, OptionTable
from cli.printfields import NOT_PARSABLE, PARSABLE, PARSABLE2, Printer
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Row = Mapping[str, Any]

PROG = "sshare"

_USAGE_LINES = (
    "Usage:  sshare [OPTION]",
    "  Valid OPTIONs are:",
    "    -a or --all            list all users",
    "    -A or --accounts=      display specific accounts (comma separated list)",
    "    -e or --helpformat     Print a list of fields that can be specified",
    "                           with the '--format' option",
    "    --json[=data_parser]   Produce JSON output",
    "    -l or --long           include normalized usage in output",
    "    -m or --partition      print the partition part of the association",
    "    -M or --cluster=names  clusters to issue commands to.",
    "                           NOTE: SlurmDBD must be up.",
    "    -n or --noheader       omit header from output",
    "    -o or --format=        Comma separated list of fields (use",
    '                           "--helpformat" for a list of available fields).',
    "    -p or --parsable       '|' delimited output with a trailing '|'",
    "    -P or --parsable2      '|' delimited output without a trailing '|'",
    "    -u or --users=         display specific users (comma separated list)",
    "    -U or --Users          display only user information",
    "    -v or --verbose        display more information",
    "    -V or --version        display tool version number",
    "    --yaml[=data_parser]   Produce YAML output",
    "          --help           display this usage description",
    "          --usage          display this usage description",
)
#: Slurm's text pads each line to 75 columns of C source, where ``\"`` takes two.
USAGE = (
    "".join(line.ljust(75 - line.count('"')) + "\n" for line in _USAGE_LINES) + " " * 75 + "\n\n"
)

#: What the format options' notes say (docs/compatibility.md): a field of a feature
#: Corral lacks (licenses, burst buffers...) prints the value Slurm prints when unset.
_FIELDS_NOTE = "every Slurm field; those of features Corral lacks show Slurm's unset value"

TABLE = OptionTable(
    [
        Option("accounts", "A", "accounts", REQUIRED),
        Option("all", "a", "all"),
        Option("helpformat", "e", "helpformat"),
        Option("noheader", "h", ""),
        Option("long", "l", "long"),
        Option("partition", "m", "partition"),
        Option("noheader", "n", "noheader"),
        Option("format", "o", "format", REQUIRED, note=_FIELDS_NOTE),
        Option("parsable", "p", "parsable"),
        Option("parsable2", "P", "parsable2"),
        Option("users", "u", "users", REQUIRED),
        Option("users_only", "U", "Users"),
        Option("verbose", "v", "verbose", use=WARNED, note="sshare prints no progress"),
        Option("version", "V", "version"),
        Option("help", "", "help"),
        Option("usage", "", "usage"),
    ],
    prog="sshare",
)
COMMAND = Command(PROG, TABLE, USAGE, USAGE)

#: Field name, default width (negative: left-justified), kind; Slurm's ``fields``.
FIELDS: tuple[tuple[str, int, str], ...] = (
    ("Account", -20, "account"),
    ("Cluster", 10, "cluster"),
    ("EffectvUsage", 13, "effective_usage"),
    ("FairShare", 10, "fairshare"),
    ("GrpTRESMins", 30, "grp_tres_mins"),
    ("GrpTRESRaw", 30, "grp_tres_raw"),
    ("ID", 6, "assoc_id"),
    ("LevelFS", 10, "level_fs"),
    ("NormShares", 11, "norm_shares"),
    ("NormUsage", 11, "norm_usage"),
    ("Partition", 12, "partition"),
    ("RawShares", 10, "raw_shares"),
    ("RawUsage", 11, "raw_usage"),
    ("TRESRunMins", 30, "tres_run_mins"),
    ("User", 10, "user"),
)

_SHORT = "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare"
_LONG_FAIR_TREE = (
    "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins"
)
_LONG_CLASSIC = (
    "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,GrpTRESMins,TRESRunMins"
)


class Settings:
    """What the command line asked for."""

    __slots__ = (
        "accounts",
        "all_users",
        "fields",
        "header",
        "long",
        "parsable",
        "partitions",
        "users",
        "users_only",
    )

    def __init__(self) -> None:
        self.accounts: list[str] = []
        self.all_users = False
        self.fields = ""
        self.header = True
        self.long = False
        self.parsable = NOT_PARSABLE
        self.partitions = False
        self.users: list[str] = []
        self.users_only = False


def parse_settings(argv: list[str], my_user: str | None) -> Settings:
    """Settings from the command line; ``my_user`` is the default user list."""
    found, positional = COMMAND.parse(argv)
    settings = Settings()
    user_list: list[str] | None = None
    for opt, value in found:
        key = opt.key
        COMMAND.answer(key)
        text = value or ""
        if key == "accounts":
            settings.accounts += [a for a in _char_list(text) if a not in settings.accounts]
        elif key == "all":
            settings.all_users = True
        elif key == "helpformat":
            sys.stdout.write(help_format())
            raise Halt(0)
        elif key == "noheader":
            settings.header = False
        elif key == "long":
            settings.long = True
        elif key == "partition":
            settings.partitions = True
        elif key == "format":
            settings.fields += text + ","
        elif key == "parsable":
            settings.parsable = PARSABLE
        elif key == "parsable2":
            settings.parsable = PARSABLE2
        elif key == "users":
            if text == "-1":
                settings.all_users = True
                continue
            settings.all_users = False
            user_list = user_list or []
            for name in _user_names(text):
                if name not in user_list:
                    user_list.append(name)
        elif key == "users_only":
            settings.users_only = True
    del positional  # sshare ignores operands
    if settings.all_users:
        settings.users = []
    elif user_list:
        settings.users = user_list
    elif my_user is not None:
        settings.users = [my_user]
    return settings


def _char_list(text: str) -> list[str]:
    """Slurm's ``slurm_addto_char_list``: comma separated, lowercased, no repeats."""
    items: list[str] = []
    for item in split_list(text.lower()):
        if item not in items:
            items.append(item)
    return items


def _user_names(text: str) -> list[str]:
    """``-u``: names as given; uids become names (``Halt`` for an unknown uid)."""
    names = []
    for item in split_list(text):
        if item[:1].isdigit():
            uid = _atoi(item)  # strtoul: the leading digits
            try:
                item = pwd.getpwuid(uid).pw_name
            except KeyError:
                raise Halt(1, f"Invalid user id: {uid}") from None
        names.append(item)
    return names


def help_format() -> str:
    """``--helpformat``: the field names, four to a line."""
    out = []
    for index, (name, _, _) in enumerate(FIELDS):
        if index & 3:
            out.append(" ")
        elif index:
            out.append("\n")
        out.append(f"{name:<17}")
    out.append("\n")
    return "".join(out)


# ------------------------------------------------------------------ layout
def choose_fields(settings: Settings, fair_tree: bool) -> list[tuple[str, int, str]]:
    """The columns: ``-o``, or the default for the algorithm, ``-l`` and ``-m``."""
    if settings.fields:
        spec = settings.fields
    elif settings.long:
        spec = _LONG_FAIR_TREE if fair_tree else _LONG_CLASSIC
    else:
        spec = _SHORT
    if not settings.fields and settings.partitions:
        spec = spec.replace("A,User,", "A,User,P,", 1)
    chosen = []
    for item in _char_list(spec):
        name, percent, width = item.partition("%")
        match = next((f for f in FIELDS if f[0].lower().startswith(name)), None)
        if match is None:
            raise Halt(1, f'{PROG}: error: Invalid field requested: "{name}"')
        size = _atoi(width) if percent else 0
        chosen.append((match[0], size or match[1], match[2]))
    return chosen


def _atoi(text: str) -> int:
    """C's ``atoi``: an optional sign and leading digits, else 0."""
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    end = 0
    while end < len(digits) and digits[end] in "0123456789":
        end += 1
    return sign * int(digits[:end]) if end else 0


def account_names(rows: Sequence[Row]) -> list[str]:
    """Each row's Account column, indented by depth (Slurm's ``slurmdb_tree_name_get``).

    An account is printed one space deeper than its parent (if the parent was
    listed before it); a user row shows its account one space deeper still.
    """
    tree: list[tuple[str, str, str, bool]] = []  # (name, spaces, print name, a user entry)
    names = []
    for row in rows:
        name = f"|{row['name']}" if row["user"] else row["name"]
        parent = row["parent"] or None
        found: str | None = None
        parent_spaces: str | None = None
        for entry, spaces, print_name, is_user in tree:
            if is_user:
                continue
            if entry == name:
                found = print_name
                break
            if parent is not None and entry == parent:
                parent_spaces = spaces
        if found is not None and parent is not None:
            names.append(found)
            continue
        spaces = "" if parent_spaces is None else " " + parent_spaces
        is_user = name.startswith("|")
        shown = spaces + (parent or "" if is_user else name)
        tree.append((name, spaces, shown, is_user))
        names.append(shown)
    return names


def render(reply: Mapping[str, Any], settings: Settings) -> str:
    """sshare's output for a ``Shares`` reply."""
    fair_tree = bool(reply["fair_tree"])
    fields = choose_fields(settings, fair_tree)
    printer = Printer(settings.parsable)
    out = [printer.header(fields)] if settings.header else []
    rows = list(reply["shares"])
    accounts = account_names(rows)
    cells: dict[str, Callable[[Row, int, bool, str], str]] = {
        "account": lambda row, width, last, acct: printer.text(acct, width, last),
        "cluster": lambda row, width, last, acct: printer.text(row["cluster"] or None, width, last),
        "effective_usage": lambda row, width, last, acct: printer.double(
            row["effective_usage"], width, last
        ),
        "fairshare": lambda row, width, last, acct: printer.double(
            row["fairshare"] if (row["user"] or not fair_tree) else None, width, last
        ),
        "grp_tres_mins": lambda row, width, last, acct: printer.text(
            row["grp_tres_mins"] or None, width, last
        ),
        "grp_tres_raw": lambda row, width, last, acct: printer.text(
            row["grp_tres_raw"] or None, width, last
        ),
        "assoc_id": lambda row, width, last, acct: printer.unsigned(row["assoc_id"], width, last),
        "level_fs": lambda row, width, last, acct: printer.double(
            None if row["shares_parent"] else row["level_fs"], width, last
        ),
        "norm_shares": lambda row, width, last, acct: printer.double(
            row["norm_shares"], width, last
        ),
        "norm_usage": lambda row, width, last, acct: printer.double(row["norm_usage"], width, last),
        "partition": lambda row, width, last, acct: printer.text(
            row["partition"] or None, width, last
        ),
        "raw_shares": lambda row, width, last, acct: (
            printer.text("parent", width, last)
            if row["shares_parent"]
            else printer.unsigned(row["raw_shares"], width, last)
        ),
        "raw_usage": lambda row, width, last, acct: printer.unsigned(row["raw_usage"], width, last),
        "tres_run_mins": lambda row, width, last, acct: printer.text(
            row["tres_run_mins"] or None, width, last
        ),
        "user": lambda row, width, last, acct: printer.text(
            row["name"] if row["user"] else None, width, last
        ),
    }
    for row, acct in zip(rows, accounts, strict=True):
        if settings.users_only and not row["user"]:
            continue
        parts = [
            cells[kind](row, width, index == len(fields) - 1, acct)
            for index, (_, width, kind) in enumerate(fields)
        ]
        out.append("".join(parts) + "\n")
    return "".join(out)


def my_user_name() -> str | None:
    """The caller's user name (sshare's default user list), None if it has none."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None


def sshare(argv: list[str]) -> int:
    """Run sshare with ``argv``; return the exit status."""
    try:
        settings = parse_settings(argv, my_user_name())
    except Halt as halt:
        return halt.report()
    client = boundary.connect()
    try:
        reply = client.call("Shares", {"users": settings.users, "accounts": settings.accounts})
    except SlurmError as exc:
        print(f"Couldn't get shares from controller: {exc}", file=sys.stderr)
        return 1
    try:
        sys.stdout.write(render(reply, settings))
    except Halt as halt:
        return halt.report()
    return 0


def main() -> None:
    boundary.run(PROG, sshare)
