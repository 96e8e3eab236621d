"""sreport: usage reports from the accounting rollups, as Slurm 24.11's sreport.

``sreport [OPTIONS] <type> <report> [ARGUMENTS]`` asks the controller for one
``Report`` (forwarded to corral-dbd, which answers from its hourly, daily and
monthly rollups) and prints it in Slurm's layout (``cli/sreport/layout.py``).
Without a command it reads commands from standard input, as Slurm does.

Supported: ``cluster Utilization``, ``cluster AccountUtilizationByUser``,
``user TopUsage`` and ``reservation Utilization``, CPU time only (``-T cpu`` or
``ALL``), with Slurm's options, report arguments (``Start=``, ``End=``,
``Accounts=``, ``Users=``, ``Clusters=``, ``All_Clusters``, ``Format=``,
``Tree``, ``Group``, ``TopCount=``; for reservations ``Names=``, ``Ids=``,
``Nodes=``, ``Flags=``) and time formats. The reservation report reads
sacctmgr's reservation listing (``AcctAdmin``), with each reservation's use.
``Tree`` is accepted, but account names are not indented: the reply does not
carry each account's parent.

Words are matched the way Slurm matches them (case-insensitive, abbreviated
down to a per-word minimum), and errors use Slurm's words. Where Slurm carries
on after an unknown time format (``-t``), sort (``-s``) or a malformed
``Start=``/``End=`` (reporting over another window than the one asked),
sreport stops with exit status 1. The window is Slurm's: times rounded to the
nearest hour, by default yesterday 00:00 to today 00:00, an end no later than
now, an hour at least.

The call is a parameter (``sreport(argv, call=...)``), so tests run the
whole command without daemons.
"""

from __future__ import annotations

import os
import sys
import time

from cli import boundary
from cli.command import Command
from cli.halt import Halt
from cli.options import REQUIRED, Option, OptionTable
from cli.printfields import NOT_PARSABLE, PARSABLE, PARSABLE2
from cli.sreport.layout import (
    ACCOUNTS_BY_USER,
    HOURS,
    HOURS_PER,
    MINUTES,
    MINUTES_PER,
    PERCENT,
    RESERVATION,
    RESERVATION_FIELDS,
    SECONDS,
    SECONDS_PER,
    TOP_ALL,
    TOP_USAGE,
    UTILIZATION,
    Table,
    abbreviates,
    header_block,
    parse_fields,
    proper_name,
    render_accounts,
    render_reservations,
    render_top,
    render_utilization,
)
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    #: A ``Report`` (or ``AcctAdmin``) call: request dict in, reply dict out; ``SlurmError``
    #: on failure.
    Call = Callable[[dict[str, Any]], Mapping[str, Any]]

PROG = "sreport"

HELP = """\
sreport [<OPTION>] [<COMMAND>]
  Reports of the CPU time jobs used, from the accounting rollups.

  <OPTION>:
    -a, --all_clusters   report every cluster, not only this one
    -M, --cluster=LIST   report these clusters
        --local          report this cluster only
        --federation     accepted (no federations)
    -n, --noheader       no header lines
    -p, --parsable       '|' after each field
    -P, --parsable2      '|' between fields
    -Q, --quiet          no informational messages
    -s, --sort=ORDER     TopUsage order: Time (the default) or Name
    -t FORMAT            time unit: Seconds, Minutes (the default), Hours,
                         Percent, or with a percentage: SecPer, MinPer, HourPer
    -T, --tres=LIST      the TRES to report: cpu (or ALL, which is cpu: CPU
                         time is the only one Corral accounts)
    -v, --verbose        more messages
    -V, --version        print the version
    -h, --help, --usage  this text

  Without a <COMMAND>, sreport reads commands from standard input.

  <COMMAND>:
    cluster <REPORT> [<ARGS>]    Utilization, AccountUtilizationByUser
    user TopUsage [<ARGS>]       the users who used the most
    reservation Utilization [<ARGS>]
                                 each reservation's allocated and idle time
    exit, quit                   leave
    help                         this text
    parsable, parsable2, nonparsable
                                 output with '|', or back to columns
    quiet, verbose, local        as the options
    sort <ORDER>, time <FORMAT>  as -s and -t
    version                      print the version
    !!                           the last command again

  <ARGS> (words may be abbreviated and are case-insensitive):
    Start=<TIME>, End=<TIME>     the window, rounded to hours; default from
                                 yesterday 00:00 to today 00:00
    Clusters=<LIST>              these clusters (a word alone: the same with
                                 Utilization); All_Clusters: every cluster
    Accounts=<LIST>              these accounts (and below them)
    Users=<LIST>                 these users (a word alone: the same with the
                                 user and account reports)
    Format=<FIELD[%WIDTH]>,...   the columns:
      Utilization: Allocated, Cluster, Count, Down, Idle, Overcommitted,
                   Planned, PlannedDown, Reported, TresName, Energy
      AccountUtilizationByUser: Accounts, Cluster, Login, Proper, Used,
                   TresName, Energy
      TopUsage:    Accounts, Cluster, Login, Proper, Used, TresName, Energy
    Tree                         AccountUtilizationByUser: accepted
    Group                        TopUsage: one line per user, all accounts
    TopCount=<N>                 TopUsage: how many users (default 10, -1: all)
    Names=<LIST>, Ids=<LIST>, Nodes=<HOSTLIST>, Flags=<LIST>
                                 reservation Utilization: these reservations
                                 (a word alone: a name)
      reservation Utilization's Format: Allocated, Associations, Cluster,
                   End, Flags, Idle, Name, Nodes, ReservationId, Start,
                   TotalTime, TresCount, TresName, TresTime

  <TIME>: HH:MM[:SS][AM|PM], MMDD[YY], MM/DD[/YY], MM.DD[.YY],
    MM/DD[/YY]-HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, midnight, noon,
    now[{+|-}N[seconds|minutes|hours|days|weeks]]

  Over Comm is 0: the report's reply does not carry over-committed time yet.
"""

TABLE = OptionTable(
    [
        Option("all_clusters", "a", "all_clusters"),
        Option("cluster", "M", "cluster", REQUIRED),
        Option("federation", "", "federation", note="no federation: the same as --local"),
        Option("help", "h", "help"),
        Option("help", "", "usage"),
        Option("immediate", "i", "immediate", note="sreport asks nothing"),
        Option("local", "", "local"),
        Option("noheader", "n", "noheader"),
        Option("parsable", "p", "parsable"),
        Option("parsable2", "P", "parsable2"),
        Option("quiet", "Q", "quiet"),
        Option("sort", "s", "sort", REQUIRED),
        Option(
            "time", "t", "", REQUIRED, note="Seconds, Minutes, Hours, Percent and their Per forms"
        ),
        Option("tres", "T", "tres", REQUIRED, note="cpu (or ALL) only: any other TRES is an error"),
        Option("verbose", "v", "verbose"),
        Option("version", "V", "version"),
    ],
    prog="sreport",
)
COMMAND = Command(PROG, TABLE, HELP, HELP)

#: ``-t`` words: (word, letters that must match, format), in the order Slurm tries them.
_TIME_WORDS = (
    ("secper", 6, SECONDS_PER),
    ("minper", 6, MINUTES_PER),
    ("hourper", 6, HOURS_PER),
    ("seconds", 1, SECONDS),
    ("minutes", 1, MINUTES),
    ("hours", 1, HOURS),
    ("percent", 1, PERCENT),
)

#: The reports of each type: (name, letters, report) in Slurm's order; None: not supported.
_CLUSTER_REPORTS: tuple[tuple[str, int, str | None], ...] = (
    ("AccountUtilizationByUser", 21, ACCOUNTS_BY_USER),
    ("AccountUtilizationByQOS", 21, None),
    ("AQ", 2, None),
    ("UserUtilizationByAccount", 18, None),
    ("UA", 2, None),
    ("UserUtilizationByWckey", 18, None),
    ("UW", 2, None),
    ("Utilization", 2, UTILIZATION),
    ("WCKeyUtilizationByUser", 1, None),
)
_VALID = {
    "cluster": '"AccountUtilizationByUser", "AccountUtilizationByQOS", '
    '"UserUtilizationByAccount", "UserUtilizationByWckey", "Utilization", '
    'and "WCKeyUtilizationByUser"',
    "job": '"SizesByAccount, SizesByAccountAndWcKey, and  SizesByWckey"',
    "user": '"Top"',
    "reservation": '"Utilization"',
}
#: What the dbd calls each report (``ReportRequest.report``).
_WIRE = {
    UTILIZATION: "cluster utilization",
    ACCOUNTS_BY_USER: "cluster accountutilizationbyuser",
    TOP_USAGE: "user topusage",
}


class Settings:
    """The options: where to report from, and how to print."""

    __slots__ = (
        "all_clusters",
        "clusters",
        "header",
        "local",
        "parsable",
        "quiet",
        "sort_by_name",
        "time_format",
        "tres",
    )

    def __init__(self) -> None:
        self.all_clusters = False
        self.clusters: list[str] = []
        self.header = True
        self.local = False
        self.parsable = NOT_PARSABLE
        self.quiet = 0  # 1: -Q, -1: -v
        self.sort_by_name = False
        self.time_format = MINUTES
        self.tres = False


def parse_settings(argv: list[str], env: Mapping[str, str]) -> tuple[Settings, list[str]]:
    """The options and the command's words; ``Halt`` for help, version and errors."""
    found, words = COMMAND.parse(argv)
    settings = Settings()
    if env.get("SREPORT_TRES"):
        settings.tres = parse_tres(env["SREPORT_TRES"])
    if env.get("SREPORT_CLUSTER"):
        settings.clusters = names(env["SREPORT_CLUSTER"])
    cluster_options = set()
    for opt, value in found:
        key = opt.key
        text = value or ""
        COMMAND.answer(key)
        if key == "all_clusters":
            settings.all_clusters = True
            cluster_options.add(key)
        elif key == "cluster":
            settings.clusters = names(text)
            cluster_options.add(key)
        elif key == "local":
            settings.local = True
            cluster_options.add(key)
        elif key == "noheader":
            settings.header = False
        elif key in ("parsable", "parsable2"):
            settings.parsable = PARSABLE if key == "parsable" else PARSABLE2
        elif key in ("quiet", "verbose"):
            settings.quiet = 1 if key == "quiet" else -1
        elif key == "sort":
            settings.sort_by_name = parse_sort(text)
        elif key == "time":
            settings.time_format = parse_time_format(text)
        elif key == "tres":
            settings.tres = parse_tres(text)
        # federation, immediate: accepted
    if len(cluster_options) > 1:
        raise Halt(
            1,
            "Only one cluster option can be used (--all_clusters OR --cluster OR --local)",
        )
    return settings, words


def parse_time_format(text: str) -> int:
    """``-t``/``time``: the format a word names; ``Halt`` if none."""
    for word, least, time_format in _TIME_WORDS:
        if abbreviates(text, word, least):
            return time_format
    raise Halt(1, f"unknown time format {text}")


def parse_sort(text: str) -> bool:
    """``-s``/``sort``: True to sort TopUsage by name, False by time; ``Halt`` if neither."""
    if abbreviates(text, "name", 1):
        return True
    if abbreviates(text, "time", 6):
        return False
    raise Halt(1, f"unknown timesort format {text}")


def parse_tres(text: str) -> bool:
    """``-T``: True once it names cpu or ALL; ``Halt`` if it names nothing reportable."""
    valid = False
    for item in text.split(","):
        if item.lower() in ("cpu", "all"):
            valid = True
        elif item:
            print(f"{PROG}: error: TRES '{item}' is not reported: only cpu is", file=sys.stderr)
    if not valid:
        raise Halt(1, f"{PROG}: fatal: No valid TRES given")
    return True


def names(text: str) -> list[str]:
    """A list argument as Slurm reads one: a leading quote runs to its mate, commas
    separate, names are lowercased, and a name given twice counts where it came last."""
    if text[:1] in ("'", '"'):
        text = text[1:].split(text[0], 1)[0]
    listed: list[str] = []
    _add(listed, [item for item in text.lower().split(",") if item])
    return listed


# ------------------------------------------------------------------ report arguments
class ReportArgs:
    """One report's arguments, with the window already rounded."""

    __slots__ = (
        "accounts",
        "all_clusters",
        "clusters",
        "end",
        "formats",
        "group",
        "start",
        "top",
        "tree",
        "users",
    )

    def __init__(self) -> None:
        self.accounts: list[str] = []
        self.all_clusters = False
        self.clusters: list[str] = []
        self.end = 0
        self.formats: list[str] = []
        self.group = False
        self.start = 0
        self.top = 10
        self.tree = False
        self.users: list[str] = []


def parse_args(
    report: str, words: Sequence[str], settings: Settings, now: int
) -> tuple[ReportArgs, list[str]]:
    """A report's arguments, and the error lines of those Slurm passes over.

    ``Halt`` for a time that does not parse.
    """
    args = ReportArgs()
    args.all_clusters = settings.all_clusters
    args.clusters = list(settings.clusters)
    errors: list[str] = []
    start = end = 0
    for word in words:
        key, eq, value = word.partition("=")
        size = len(key) if eq else len(word)
        if eq and report != TOP_USAGE and value.startswith("="):
            value = value[1:]

        def named(full: str, least: int, word: str = word, size: int = size) -> bool:
            return word[: max(size, least)].lower() == full[: max(size, least)].lower()

        if not eq and named("all_clusters", 1):
            args.all_clusters = True
        elif not eq and report == ACCOUNTS_BY_USER and named("tree", 4):
            args.tree = True
        elif not eq and report == TOP_USAGE and named("group", 1):
            args.group = True
        elif report == UTILIZATION and (not eq or named("clusters", 1)):
            _add(args.clusters, names(value if eq else word))
        elif report != UTILIZATION and (not eq or named("users", 1)):
            _add(args.users, names(value if eq else word))
        elif report != UTILIZATION and (named("accounts", 2) or named("acct", 4)):
            _add(args.accounts, names(value))
        elif report != UTILIZATION and named("clusters", 1):
            _add(args.clusters, names(value))
        elif named("end", 1):
            end = min(parse_time(value, now), now)
        elif named("format", 1):
            _add(args.formats, names(value))
        elif report == ACCOUNTS_BY_USER and named("qoslevel", 1):
            errors.append(f"{PROG}: error: QosLevel is not supported: QOS usage is not rolled up")
        elif named("start", 1):
            start = parse_time(value, now)
        elif report == TOP_USAGE and named("topcount", 1):
            top = parse_count(value)
            if top is None:
                errors.append(f"{PROG}: error: Invalid value for TopCount ({_unquoted(value)})")
            else:
                args.top = top
        else:
            errors.append(f" Unknown condition: {word}")
            errors.append("Use keyword set to modify value")
    args.start, args.end = report_window(start, end, now)
    return args, errors


#: ``reservation Utilization``'s columns without ``Format=``.
RESV_FORMAT = "Cl,name,start,end,TresName,al,i"


def parse_resv_args(
    words: Sequence[str], settings: Settings, now: int
) -> tuple[ReportArgs, dict[str, str], set[str], list[str]]:
    """``reservation Utilization``'s arguments: the window and columns, the listing's
    conditions (names, ids, nodes), the flags asked for, and the error lines.

    As in Slurm, a bare word is a reservation name; ``Flags=`` keeps reservations
    with any of the flags named.
    """
    args = ReportArgs()
    args.all_clusters = settings.all_clusters
    args.clusters = list(settings.clusters)
    where: dict[str, str] = {}
    flags: set[str] = set()
    errors: list[str] = []
    start = end = 0
    for word in words:
        key, eq, value = word.partition("=")
        size = len(key) if eq else len(word)

        def named(full: str, least: int, word: str = word, size: int = size) -> bool:
            return word[: max(size, least)].lower() == full[: max(size, least)].lower()

        if not eq and named("all_clusters", 1):
            args.all_clusters = True
        elif not eq or named("names", 1):
            listed = [n for n in where.get("name", "").split(",") if n]
            _add(listed, names(value if eq else word))
            where["name"] = ",".join(listed)
        elif named("clusters", 1):
            _add(args.clusters, names(value))
        elif named("end", 1):
            end = min(parse_time(value, now), now)
        elif named("flags", 2):
            flags.update(f.strip().upper() for f in _unquoted(value).split(",") if f.strip())
        elif named("format", 2):
            _add(args.formats, names(value))
        elif named("ids", 1):
            where["id"] = ",".join(names(value))
        elif named("nodes", 1):
            if "nodes" in where:
                errors.append(
                    f"{PROG}: error: You already specified nodes '{where['nodes']}' "
                    " combine your request into 1 nodes=."
                )
                break
            where["nodes"] = _unquoted(value)
        elif named("start", 1):
            start = parse_time(value, now)
        else:
            errors.append(f" Unknown condition: {word}")
            errors.append("Use keyword set to modify value")
    args.start, args.end = report_window(start, end, now)
    return args, where, flags, errors


def _add(items: list[str], new: list[str]) -> None:
    for item in new:
        if item in items:
            items.remove(item)
        items.append(item)


def _unquoted(text: str) -> str:
    """Slurm's ``strip_quotes``: a leading quote dropped, the text up to the next one."""
    if text[:1] in ("'", '"'):
        text = text[1:]
    cut = min((i for i in (text.find('"'), text.find("'")) if i >= 0), default=len(text))
    return text[:cut]


def parse_count(text: str) -> int | None:
    """``TopCount=``: C's ``strtol`` of it; negative is every user; None if not a number."""
    meat = _unquoted(text).lstrip(" \t\n\v\f\r")
    sign = -1 if meat.startswith("-") else 1
    digits = meat[1:] if meat[:1] in ("+", "-") else meat
    end = len(digits) - len(digits.lstrip("0123456789"))
    number = sign * int(digits[:end]) if end else 0
    if number == 0 and (not end or digits[end:]):
        return None
    return TOP_ALL if number < 0 else min(number, TOP_ALL)


def parse_time(text: str, now: int) -> int:
    """A ``Start=``/``End=`` time (a bare time of day is the last one gone)."""
    from corral.timefmt import parse_timestamp

    try:
        return parse_timestamp(text, now, past=True)
    except ValueError:
        raise Halt(1, f"Invalid time specification (pos=0): {text}") from None


def _nearest_hour(epoch: int) -> int:
    """``epoch`` rounded to the nearest local hour, as Slurm rounds (seconds, then minutes)."""
    tm = time.localtime(epoch)
    minute = tm.tm_min + (tm.tm_sec >= 30)
    hour = tm.tm_hour + (minute >= 30)
    return int(time.mktime((tm.tm_year, tm.tm_mon, tm.tm_mday, hour, 0, 0, 0, 0, -1)))


def report_window(start: int, end: int, now: int) -> tuple[int, int]:
    """Slurm's report window from ``Start=``/``End=`` (0: not given) at ``now``."""
    today = time.localtime(now)
    if end:
        end = _nearest_hour(end)
    else:
        end = int(time.mktime((today.tm_year, today.tm_mon, today.tm_mday, 0, 0, 0, 0, 0, -1)))
    if start:
        start = _nearest_hour(start)
    else:
        start = int(
            time.mktime((today.tm_year, today.tm_mon, today.tm_mday - 1, 0, 0, 0, 0, 0, -1))
        )
    if end - start < 3600:
        end = start + 3600
    return start, end


# ------------------------------------------------------------------ the session
class Session:
    """What one sreport run has set (options, and commands read since) and its exit status."""

    __slots__ = ("admin", "call", "done", "local_cluster", "names", "now", "settings", "status")

    def __init__(
        self,
        settings: Settings,
        call: Call,
        now: Callable[[], int],
        names: Callable[[str], str | None] = proper_name,
        admin: Call | None = None,
        local_cluster: Callable[[], str | None] | None = None,
    ) -> None:
        self.settings = settings
        self.call = call
        self.now = now
        self.names = names
        self.admin = admin or _admin_call
        self.local_cluster = local_cluster or _local_cluster
        self.status = 0
        self.done = False

    def command(self, words: Sequence[str]) -> None:
        """Run one command (``cluster Utilization ...``, ``time hours``, ``quit``...)."""
        if not words:
            self.status = 1
            return
        word, rest = words[0], words[1:]
        settings = self.settings

        def keyword(full: str, least: int) -> bool:
            return abbreviates(word, full, least)

        if keyword("cluster", 2) or keyword("job", 1) or keyword("user", 1):
            kind = "cluster" if keyword("cluster", 2) else "job" if keyword("job", 1) else "user"
            if self._enough(word, rest):
                self.report(kind, rest[0], rest[1:])
        elif keyword("help", 2):
            self._single(word, rest)
            sys.stdout.write(HELP)
        elif keyword("quiet", 4):
            self._single(word, rest)
            settings.quiet = 1
        elif keyword("exit", 1) or keyword("\\q", 2) or keyword("quit", 4):
            self._single(word, rest)
            self.done = True
        elif keyword("local", 3):
            self._single(word, rest)
            settings.local = True
        elif keyword("nonparsable", 4):
            self._single(word, rest)
            settings.parsable = NOT_PARSABLE
        elif keyword("parsable", 8) or keyword("parsable2", 9):
            self._single(word, rest)
            settings.parsable = PARSABLE if keyword("parsable", 8) else PARSABLE2
        elif keyword("reservation", 2) or keyword("resv", 2):
            if self._enough(word, rest):
                self.report("reservation", rest[0], rest[1:])
        elif keyword("sort", 1) or keyword("time", 1):
            if not rest:
                self._error(f"too few arguments for keyword:{word}")
            elif keyword("sort", 1):
                settings.sort_by_name = parse_sort(rest[0])
            else:
                settings.time_format = parse_time_format(rest[0])
        elif keyword("verbose", 4) or keyword("version", 4):
            if rest:
                self._error(f"too many arguments for {word} keyword")
            if keyword("verbose", 4):
                settings.quiet = -1
            else:
                print(boundary.version_line())
        else:
            self._error(f"invalid keyword: {word}")

    def _error(self, text: str) -> None:
        print(text, file=sys.stderr)
        self.status = 1

    def _single(self, word: str, rest: Sequence[str]) -> None:
        if rest:
            self._error(f"too many arguments for keyword:{word}")

    def _enough(self, word: str, rest: Sequence[str]) -> bool:
        if rest:
            return True
        self.status = 1
        if self.settings.quiet != 1:
            print(f"too few arguments for keyword:{word}", file=sys.stderr)
        return False

    def report(self, kind: str, name: str, words: Sequence[str]) -> None:
        """One report: check its name, read its arguments, ask, print."""
        report = _which(kind, name)
        if report is None:
            self.status = 1
            return
        if report == RESERVATION:
            self.reservations(words)
            return
        settings = self.settings
        args, errors = parse_args(report, words, settings, self.now())
        for line in errors:
            print(line, file=sys.stderr)
        if errors:
            self.status = 1
        fields, unknown = parse_fields(
            args.formats or _default_formats(report, settings.tres),
            report == TOP_USAGE,
            settings.time_format,
            args.tree,
        )
        for line in unknown:
            print(line, file=sys.stderr)
        if unknown:
            self.status = 1
        reply = self.call(request(report, args, settings))
        sys.stdout.write(self.render(report, args, fields, reply["rows"]))

    def reservations(self, words: Sequence[str]) -> None:
        """``reservation Utilization``: the reservations that met the window, each with
        its jobs' use, from sacctmgr's listing (``AcctAdmin``) as Slurm's sreport reads
        slurmdbd's."""
        settings = self.settings
        args, where, flags, errors = parse_resv_args(words, settings, self.now())
        for line in errors:
            print(line, file=sys.stderr)
        if errors:
            self.status = 1
        fields, unknown = parse_fields(
            args.formats or RESV_FORMAT.split(","),
            False,
            settings.time_format,
            False,
            RESERVATION_FIELDS,
        )
        for line in unknown:
            print(line, file=sys.stderr)
        if unknown:
            self.status = 1
        if args.clusters:
            where["cluster"] = ",".join(args.clusters)
        elif not args.all_clusters:
            where["cluster"] = self.local_cluster() or ""
        where.update(start=str(args.start), end=str(args.end), withusage="yes")
        reply = self.admin({"verb": "list", "kind": "reservation", "where": where})
        rows = [row["fields"] for row in reply.get("rows", ())]
        if flags:
            rows = [r for r in rows if flags & {f.upper() for f in r["Flags"].split(",")}]
        out = ""
        if settings.header:
            title = "Reservation Utilization {window}"
            out = header_block(title, args.start, args.end, settings.time_format, True)
        table = Table(fields, settings.parsable, settings.header)
        sys.stdout.write(out + render_reservations(rows, table, settings.time_format))

    def render(
        self, report: str, args: ReportArgs, fields: list[Any], rows: Sequence[Mapping[str, Any]]
    ) -> str:
        """The report's text for the reply's ``rows``."""
        settings = self.settings
        table = Table(fields, settings.parsable, settings.header)
        time_format = settings.time_format
        out = ""
        if settings.header:
            seconds = args.end - args.start
            if report == UTILIZATION:
                title = "Cluster Utilization {window}"
            elif report == ACCOUNTS_BY_USER:
                title = f"Cluster/Account/User Utilization {{window}} ({seconds} secs)"
            else:
                top = "ALL" if args.top == TOP_ALL else str(args.top)
                title = f"Top {top} Users {{window}} ({seconds} secs)"
            out = header_block(title, args.start, args.end, time_format, settings.tres)
        if report == UTILIZATION:
            return out + render_utilization(rows, table, args.start, args.end, time_format)
        if report == ACCOUNTS_BY_USER:
            return out + render_accounts(rows, table, time_format, self.names)
        return out + render_top(
            rows, table, time_format, args.top, args.group, settings.sort_by_name, self.names
        )


def _which(kind: str, name: str) -> str | None:
    """The report ``kind name`` names; None (with Slurm's lines) if not one Corral makes."""
    if kind == "cluster":
        found = next(
            (r for r in _CLUSTER_REPORTS if r[0][: r[1]].lower() == name[: r[1]].lower()), None
        )
        known, report = (found is not None), (found[2] if found else None)
    elif kind == "user":
        known, report = name[:1].lower() == "t", TOP_USAGE
    elif kind == "job":
        known = any(
            abbreviates(name, full, least)
            for full, least in (
                ("SizesByAccount", 1),
                ("SizesByWcKey", 8),
                ("SizesByAccountAndWcKey", 15),
            )
        )
        report = None
    else:
        known, report = name[:1].lower() == "u", RESERVATION
    if not known:
        print(f"Not valid report {name}", file=sys.stderr)
        print(f"Valid {kind} reports are, {_VALID[kind]}", file=sys.stderr)
        return None
    if report is None:
        print(
            f"{PROG}: error: {kind} {name}: Corral does not make this report yet", file=sys.stderr
        )
    return report


def _default_formats(report: str, tres: bool) -> list[str]:
    """Slurm's columns of each report (with ``-T``, the TRES name too)."""
    if report == UTILIZATION:
        spec = "cl,tresname,al,d,plnddown,i,res,rep" if tres else "cl,al,d,plnddown,i,res,rep"
    elif report == ACCOUNTS_BY_USER:
        spec = (
            "cluster,ac,login,proper,tresname,used"
            if tres
            else "cluster,ac,login,proper,used,energy"
        )
    else:
        spec = "cl,l,p,a,tresname,used" if tres else "cl,l,p,a,u,energy"
    return spec.split(",")


def request(report: str, args: ReportArgs, settings: Settings) -> dict[str, Any]:
    """The ``Report`` request for a report."""
    if args.clusters:
        clusters = args.clusters
    elif args.all_clusters:
        clusters = ["all"]
    else:
        clusters = []  # the controller's own
    top = args.top
    if report != TOP_USAGE or args.group or settings.sort_by_name:
        top = TOP_ALL  # grouped or sorted here: every user
    return {
        "report": _WIRE[report],
        "start": args.start,
        "end": args.end,
        "clusters": clusters,
        "accounts": args.accounts,
        "users": args.users,
        "top": max(top, 1),
    }


def words_of(line: str) -> list[str]:
    """An interactive line split at blanks outside quotes (the quotes stay, as in Slurm)."""
    words: list[str] = []
    current: list[str] = []
    quote = ""
    for char in line:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char.isspace():
            if current:
                words.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        words.append("".join(current))
    return words


def interactive(session: Session, read: Callable[[str], str] = input) -> None:
    """Commands from standard input until ``exit``, ``quit`` or the end of input."""
    last = ""
    while not session.done:
        try:
            line = read(f"{PROG}: ")
        except EOFError:
            print()
            return
        if line.startswith("#"):
            continue
        if line == "!!":
            line = last
        last = line
        try:
            session.command(words_of(line))
        except Halt as halt:
            session.status = halt.report() or session.status
        except SlurmError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            session.status = 1


def _controller_call(message: dict[str, Any]) -> Mapping[str, Any]:
    """The ``Report`` call on the controller named by slurm.conf."""
    return boundary.connect().call("Report", message)


def _admin_call(message: dict[str, Any]) -> Mapping[str, Any]:
    """The ``AcctAdmin`` call (sacctmgr's) on the controller named by slurm.conf."""
    return boundary.connect().call("AcctAdmin", message)


def _local_cluster() -> str | None:
    """This cluster's name (slurm.conf's ClusterName)."""
    from corral.clientconf import client_settings

    return client_settings().cluster_name


def sreport(argv: list[str], call: Call | None = None, admin: Call | None = None) -> int:
    """Run sreport with ``argv``; return the exit status (``call``: the ``Report`` call,
    ``admin``: the ``AcctAdmin`` call of the reservation report).

    A controller error (accounting disabled, dbd away) reaches the boundary,
    which prints ``sreport: error: <message>`` and exits 1.
    """
    try:
        settings, words = parse_settings(argv, os.environ)
        session = Session(settings, call or _controller_call, lambda: int(time.time()), admin=admin)
        if not words:
            interactive(session)
        else:
            session.command(words)
    except Halt as halt:
        return halt.report()
    return session.status
