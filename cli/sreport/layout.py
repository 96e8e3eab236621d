"""sreport's output: the header block, the columns and the values, as Slurm 24.11 lays them out.

A report is a header block (80 dashes, the report's title with its window,
the unit, 80 dashes) and a ``print_fields`` table: fixed widths with ``+``
marking a cut value, or ``|``-separated with ``-p`` and ``-P``. Usage columns
are as wide as the largest number of seconds they could show needs (8 at
least, whatever ``%N`` asked), plus 9 in the ``*Per`` formats; values are
minutes (``%.0f``), hours, seconds, percentages of the cluster's total
(``%.2f%%``), or a count with its percentage.

The ``Report`` reply holds CPU-seconds per cluster and, for the association
reports, the cluster's row first, then its account and user rows in order.
"""

from __future__ import annotations

import pwd

from cli.printfields import Printer
from corral.timefmt import format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Row = Mapping[str, Any]
    Field = tuple[str, int, str]  # header, width (negative: left-justified), kind

#: Time formats (``-t``): the unit shown, whether a percentage goes with it.
SECONDS, MINUTES, HOURS, PERCENT, SECONDS_PER, MINUTES_PER, HOURS_PER = range(7)
TIME_FORMATS = {
    SECONDS: "Seconds",
    MINUTES: "Minutes",
    HOURS: "Hours",
    PERCENT: "Percentage of Total",
    SECONDS_PER: "Seconds/Percentage of Total",
    MINUTES_PER: "Minutes/Percentage of Total",
    HOURS_PER: "Hours/Percentage of Total",
}
_PER = (SECONDS_PER, MINUTES_PER, HOURS_PER)
_DIVISORS = {SECONDS: 1, MINUTES: 60, HOURS: 3600}

#: sreport's "all" TopCount (INFINITE).
TOP_ALL = 0xFFFFFFFF

UTILIZATION, ACCOUNTS_BY_USER, TOP_USAGE = "utilization", "accounts_by_user", "top_usage"
RESERVATION = "reservation_utilization"

#: The columns the cluster reports know, in the order Slurm tries them:
#: (name, letters that must match, header, width, width in the *Per formats, kind).
CLUSTER_FIELDS: tuple[tuple[str, int, str, int, int, str], ...] = (
    ("accounts", 2, "Account", 15, 15, "account"),
    ("allocated", 2, "Allocated", 12, 20, "alloc"),
    ("cluster", 2, "Cluster", 9, 9, "cluster"),
    ("down", 1, "Down", 10, 18, "down"),
    ("idle", 1, "Idle", 12, 20, "idle"),
    ("login", 1, "Login", 9, 9, "login"),
    ("overcommitted", 1, "Over Comm", 9, 18, "over"),
    ("planned", 2, "Planned", 9, 18, "planned"),
    ("reserved", 3, "Planned", 9, 18, "planned"),
    ("planneddown", 2, "PLND Down", 10, 18, "planned_down"),
    ("plnddown", 2, "PLND Down", 10, 18, "planned_down"),
    ("proper", 2, "Proper Name", 15, 15, "proper"),
    ("qos", 1, "QOS", 12, 12, "qos"),
    ("qosid", 4, "QOS ID", 8, 8, "qos_id"),
    ("reported", 3, "Reported", 12, 20, "reported"),
    ("trescount", 5, "TRES Count", 10, 10, "count"),
    ("cpucount", 2, "TRES Count", 10, 10, "count"),
    ("count", 2, "TRES Count", 10, 10, "count"),
    ("tresname", 5, "TRES Name", 14, 14, "tres"),
    ("used", 1, "Used", 10, 18, "used"),
    ("wckey", 2, "WCKey", 15, 15, "wckey"),
    ("energy", 1, "Energy", 10, 18, "energy"),
)
#: The columns of ``user TopUsage``.
USER_FIELDS: tuple[tuple[str, int, str, int, int, str], ...] = (
    ("accounts", 1, "Account", 15, 15, "account"),
    ("cluster", 1, "Cluster", 9, 9, "cluster"),
    ("energy", 1, "Energy", 10, 18, "energy"),
    ("login", 1, "Login", 9, 9, "login"),
    ("proper", 1, "Proper Name", 15, 15, "proper"),
    ("tresname", 5, "TRES Name", 14, 14, "tres"),
    ("used", 1, "Used", 10, 18, "used"),
)
#: The columns of ``reservation Utilization`` (fixed widths: Slurm does not widen them).
RESERVATION_FIELDS: tuple[tuple[str, int, str, int, int, str], ...] = (
    ("allocated", 2, "Allocated", 20, 29, "alloc"),
    ("associations", 2, "Associations", 15, 15, "assocs"),
    ("cluster", 2, "Cluster", 9, 9, "cluster"),
    ("end", 2, "End", 19, 19, "end"),
    ("flags", 2, "Flags", 20, 20, "flags"),
    ("idle", 1, "Idle", 20, 29, "idle"),
    ("name", 2, "Name", 9, 9, "name"),
    ("nodes", 2, "Nodes", 15, 15, "nodes"),
    ("reservationid", 2, "Id", 8, 8, "id"),
    ("start", 2, "Start", 19, 19, "start"),
    ("totaltime", 2, "TotalTime", 9, 9, "total"),
    ("trescount", 5, "TRES count", 10, 10, "count"),
    ("cpucount", 2, "TRES count", 10, 10, "count"),
    ("count", 2, "TRES count", 10, 10, "count"),
    ("tresname", 5, "TRES Name", 14, 14, "tres"),
    ("trestime", 2, "TRES Time", 9, 9, "tres_time"),
    ("cputime", 5, "TRES Time", 9, 9, "tres_time"),
)
#: Columns whose width follows the numbers (``sreport_set_usage_col_width``).
_USAGE_KINDS = frozenset(
    ("alloc", "down", "idle", "over", "planned", "planned_down", "reported", "energy", "used")
)

DASHES = "-" * 80 + "\n"


def abbreviates(word: str, full: str, least: int) -> bool:
    """Whether ``word`` names ``full`` as sreport compares them (case-insensitively).

    Slurm compares the first ``max(len(word), least)`` characters, so ``word``
    is a prefix of ``full`` at least ``least`` long, or ``full`` itself.
    """
    size = max(len(word), least)
    return word[:size].lower() == full[:size].lower()


def parse_fields(
    items: Sequence[str],
    user_report: bool,
    time_format: int,
    tree: bool,
    table: Sequence[tuple[str, int, str, int, int, str]] | None = None,
) -> tuple[list[Field], list[str]]:
    """The columns of a ``format=`` list, and the " Unknown field" lines for the rest
    (from ``table``, else the user or the cluster reports' columns)."""
    if table is None:
        table = USER_FIELDS if user_report else CLUSTER_FIELDS
    per = time_format in _PER
    fields: list[Field] = []
    unknown: list[str] = []
    for item in items:
        name, percent, size = item.partition("%")
        found = next((f for f in table if abbreviates(name, f[0], f[1])), None)
        if found is None:
            unknown.append(f" Unknown field '{name}'")
            continue
        _, _, header, width, per_width, kind = found
        if per:
            width = per_width
        if tree and kind == "account" and not user_report:
            width = -20
        elif tree and kind == "wckey":
            width = 20
        fields.append((header, _atoi(size) or width if percent else width, kind))
    return fields, unknown


def _atoi(text: str) -> int:
    """C's ``atoi``: an optional sign and leading digits, else 0."""
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    end = len(digits) - len(digits.lstrip("0123456789"))
    return sign * int(digits[:end]) if end else 0


def usage_width(seconds: int, time_format: int) -> int:
    """A usage column's width for ``seconds`` at most: its digits, 8 to 19, +9 with a percentage.

    19 is where Slurm's 64-bit loop bound wraps around.
    """
    width = min(max(8, len(str(seconds))), 19)
    return width + 9 if time_format in _PER else width


def time_str(value: int, total: int, time_format: int) -> str:
    """``value`` CPU-seconds in the report's unit (``sreport_get_time_str``)."""
    percent = value / (total or 1) * 100
    if time_format == PERCENT:
        return f"{percent:.2f}%"
    if time_format in _PER:
        unit = (SECONDS, MINUTES, HOURS)[_PER.index(time_format)]
        return f"{_in_unit(value, unit)}({percent:.2f}%)"
    return _in_unit(value, time_format)


def _in_unit(value: int, unit: int) -> str:
    if unit == SECONDS:
        return str(value)
    return f"{value / _DIVISORS[unit]:.0f}"


def header_block(title: str, start: int, end: int, time_format: int, tres: bool) -> str:
    """The lines above a report's table: its title with the window, and the unit."""
    window = f"{format_timestamp(start)} - {format_timestamp(end - 1)}"
    if time_format == PERCENT:
        unit = TIME_FORMATS[PERCENT]
    else:
        unit = f"{'TRES' if tres else 'CPU'} {TIME_FORMATS[time_format]}"
    return f"{DASHES}{title.format(window=window)}\nUsage reported in {unit}\n{DASHES}"


def proper_name(user: str) -> str | None:
    """The user's name from the password database (GECOS up to its first comma)."""
    try:
        gecos = pwd.getpwnam(user).pw_gecos
    except KeyError:
        return None
    return next((part for part in gecos.split(",") if part), gecos)


def cluster_total(row: Row) -> int:
    """A cluster's CPU-seconds in all, as sreport sums them: allocated, down, idle, planned."""
    return int(
        row["alloc_secs"]
        + row["down_secs"]
        + row["planned_down_secs"]
        + row["idle_secs"]
        + row["planned_secs"]
    )


class Table:
    """One report's ``print_fields`` table: the column headers (unless ``-n``), a line per row."""

    __slots__ = ("fields", "printer", "titles")

    def __init__(self, fields: list[Field], parsable: int, titles: bool) -> None:
        self.fields = fields
        self.printer = Printer(parsable)
        self.titles = titles

    def widen(self, kind: str, seconds: int, time_format: int) -> None:
        """Size the usage columns of ``kind`` for ``seconds`` (Slurm ignores ``%N`` there)."""
        width = usage_width(seconds, time_format)
        self.fields = [(h, width if k == kind else size, k) for h, size, k in self.fields]

    def render(self, lines: Sequence[Mapping[str, str | int | None]]) -> str:
        """The headers and a line per row: each column's value by kind (None: blank)."""
        out = [self.printer.header(self.fields)] if self.titles else []
        last = len(self.fields) - 1
        for values in lines:
            cells = []
            for index, (_, width, kind) in enumerate(self.fields):
                value = values.get(kind)
                if isinstance(value, int):
                    cells.append(self.printer.unsigned(value, width, index == last))
                else:
                    cells.append(self.printer.text(value, width, index == last))
            out.append("".join(cells) + "\n")
        return "".join(out)


def by_cluster(rows: Sequence[Row]) -> list[tuple[Row, list[Row]]]:
    """The reply's rows as (cluster row, its account and user rows), in order."""
    grouped: list[tuple[Row, list[Row]]] = []
    for row in rows:
        if not row["account"] and not row["user"]:
            grouped.append((row, []))
        elif grouped:
            grouped[-1][1].append(row)
    return grouped


def render_utilization(
    rows: Sequence[Row], table: Table, start: int, end: int, time_format: int
) -> str:
    """``cluster Utilization``: a line per cluster.

    Slurm's TRES Count (and the total that Reported is a percentage of) is the
    cluster's average CPU count over the window; the reply has no CPU count, so
    it is the reported CPU-seconds over the window's seconds, rounded up: exact
    while the cluster was known for the whole window.
    """
    seconds = end - start
    widest: dict[str, int] = {}
    lines = []
    for row in rows:
        reported = cluster_total(row)
        count = -(-row["reported_secs"] // seconds) if seconds else 0  # CPUs, on average
        secs = {
            "alloc": row["alloc_secs"],
            "down": row["down_secs"],
            "idle": row["idle_secs"],
            "planned": row["planned_secs"],
            "over": row["over_secs"],
            "planned_down": row["planned_down_secs"],
        }
        for kind, value in (*secs.items(), ("reported", reported), ("energy", row["alloc_secs"])):
            widest[kind] = max(widest.get(kind, 0), value)
        values: dict[str, str | int | None] = {
            kind: time_str(value, reported, time_format) for kind, value in secs.items()
        }
        values.update(
            cluster=row["cluster"],
            count=count,
            reported=time_str(reported, seconds * count, time_format),
            energy=time_str(0, 0, time_format),
            tres="cpu",
        )
        lines.append(values)
    for kind in _USAGE_KINDS - {"used"}:
        table.widen(kind, widest.get(kind, 0), time_format)
    return table.render(lines)


def render_accounts(
    rows: Sequence[Row],
    table: Table,
    time_format: int,
    names: Callable[[str], str | None] = proper_name,
) -> str:
    """``cluster AccountUtilizationByUser``: per cluster, its accounts and users in order."""
    return _render_members(rows, table, time_format, names, _as_sent)


def render_top(
    rows: Sequence[Row],
    table: Table,
    time_format: int,
    top: int,
    group: bool,
    by_name: bool,
    names: Callable[[str], str | None] = proper_name,
) -> str:
    """``user TopUsage``: per cluster, its users by usage (or name), ``top`` of them."""

    def chosen(members: Sequence[Row]) -> list[tuple[str, str, int]]:
        users = _grouped(members) if group else _as_sent(members)
        users.sort(key=lambda u: u[0] if by_name else (-u[2], u[0]))
        return users[: max(top, 1)]  # TopCount=0 prints one, as Slurm's loop does

    return _render_members(rows, table, time_format, names, chosen)


def _as_sent(members: Sequence[Row]) -> list[tuple[str, str, int]]:
    return [(row["user"], row["account"], row["alloc_secs"]) for row in members]


def _render_members(
    rows: Sequence[Row],
    table: Table,
    time_format: int,
    names: Callable[[str], str | None],
    chosen: Callable[[Sequence[Row]], list[tuple[str, str, int]]],
) -> str:
    """The association reports: a line per chosen (user, account, CPU-seconds) of each
    cluster; Used as wide as the first line's seconds need (the cluster's total where
    there is none), Energy 8."""
    lines = []
    widest = 0
    for cluster, members in by_cluster(rows):
        total = cluster_total(cluster)
        users = chosen(members)
        widest = max(widest, users[0][2] if users else total)
        lines += [_member(cluster, u, a, s, total, time_format, names) for u, a, s in users]
    table.widen("used", widest, time_format)
    table.widen("energy", 0, time_format)
    return table.render(lines)


def _grouped(members: Sequence[Row]) -> list[tuple[str, str, int]]:
    """TopUsage's ``Group``: one entry per user, its accounts joined by ", "."""
    users: dict[str, tuple[list[str], list[int]]] = {}
    for row in members:
        accounts, secs = users.setdefault(row["user"], ([], [0]))
        if row["account"] not in accounts:
            accounts.append(row["account"])
        secs[0] += row["alloc_secs"]
    return [(user, ", ".join(accts), secs[0]) for user, (accts, secs) in users.items()]


def _member(
    cluster: Row,
    user: str,
    account: str,
    secs: int,
    total: int,
    time_format: int,
    names: Callable[[str], str | None],
) -> dict[str, str | int | None]:
    """A user's (or, without a user, an account's) values by column kind."""
    return {
        "cluster": cluster["cluster"],
        "account": account,
        "login": user or None,
        "proper": names(user) if user else None,
        "used": time_str(secs, total, time_format),
        "energy": time_str(0, 0, time_format),
        "tres": "cpu",
    }


def render_reservations(rows: Sequence[Mapping[str, str]], table: Table, time_format: int) -> str:
    """``reservation Utilization``: a line per reservation row (CPUs, its one TRES).

    Allocated is its jobs' CPU-seconds (dbd's rollup, to its last whole hour), out
    of its whole time (its CPUs from its start to its end); Idle the rest. A row
    without an end is left out, as Slurm leaves out one that does not end after
    it starts.
    """
    from corral.timefmt import format_hms

    lines = []
    for row in rows:
        start, end = int(row["StartRaw"]), int(row["EndRaw"])
        if end <= start:
            continue
        cpus = int(row["CPUs"])
        total = (end - start) * cpus
        alloc = int(row["AllocSecs"])
        values: dict[str, str | int | None] = {
            "cluster": row["Cluster"],
            "name": row["Name"],
            "id": int(row["ID"]),
            "count": cpus,
            "alloc": time_str(alloc, total, time_format),
            "idle": time_str(max(total - alloc, 0), total, time_format),
            "nodes": row["NodeName"],
            "assocs": row["Accounts"] or row["Users"],
            "start": format_timestamp(start),
            "end": format_timestamp(end),
            "flags": row["Flags"],
            "total": format_hms(end - start),
            "tres": "cpu",
            "tres_time": format_hms(total),
        }
        lines.append(values)
    return table.render(lines)
