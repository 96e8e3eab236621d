"""What sacctmgr can print: Slurm 24.11's ``format=`` field table and its layout.

A ``format=`` word names a field by an abbreviation of Slurm's field name,
matched in Slurm's order (so ``Preempt`` after ``PreemptMode``, ``MaxTRES``
before ``MaxTRESPerNode``); a ``%N`` suffix sets the width. Each field has the
header sacctmgr prints, a default width (negative: left-justified) and a kind
that decides what happens to a value too wide for its column, as in Slurm's
``print_fields_*``: text (``str``) is cut with a ``+`` as its last character,
numbers and clocks (``num``) overflow, and ``double`` values switch to ``%e``.

The accounting daemon sends every row already formatted, keyed by the same
headers, so laying a row out is a lookup per column.
"""

from __future__ import annotations

from cli.printfields import Printer as _FieldPrinter

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    Row = Mapping[str, str]


class Field:
    """One printable field: its header, width and kind (``str``, ``num`` or ``double``)."""

    __slots__ = ("header", "kind", "width")

    def __init__(self, header: str, width: int, kind: str) -> None:
        self.header = header
        self.width = width
        self.kind = kind

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Field):
            return NotImplemented
        return (self.header, self.width, self.kind) == (other.header, other.width, other.kind)

    def __hash__(self) -> int:
        return hash((self.header, self.width, self.kind))

    def __repr__(self) -> str:
        return f"Field({self.header!r}, {self.width!r}, {self.kind!r})"


S, N, D = "str", "num", "double"

#: ``(names, header, width, kind)`` in the order Slurm tries them. Each name is
#: ``Word/least``: the word may be abbreviated to ``least`` characters.
_TABLE: tuple[tuple[str, str, int, str], ...] = (
    ("Account/3 Acct/4", "Account", 10, S),
    ("ActionRaw/7", "ActionRaw", 10, N),
    ("Action/4", "Action", 20, S),
    ("Actor/4", "Actor", 10, S),
    ("AdminLevel/2", "Admin", 9, S),
    ("Allowed/2", "% Allowed", 10, N),
    ("Associations/2", "Assocs", 10, S),
    ("TRES/2", "TRES", 20, S),
    ("Classification/3", "Class", 9, S),
    ("ClusterNodes/8", "Cluster Nodes", 20, S),
    ("Clusters/2", "Cluster", 10, S),
    ("Coordinators/3", "Coord Accounts", 20, S),
    ("Comment/3", "Comment", 20, S),
    ("ControlHost/8", "ControlHost", 15, S),
    ("ControlPort/8", "ControlPort", 12, N),
    ("Count/3", "Count", 6, N),
    ("CountAllowed/6", "# Allowed", 10, N),
    ("CountUsed/6", "# Used", 10, N),
    ("CPUCount/2", "CPU Cnt", 7, S),
    ("DefaultAccount/8", "Def Acct", 10, S),
    ("DefaultQOS/8", "Def QOS", 9, S),
    ("DefaultWCKey/8", "Def WCKey", 10, S),
    ("Description/3", "Descr", 20, S),
    ("Duration/2", "Duration", 13, N),
    ("EventRaw/6", "EventRaw", 8, N),
    ("Event/2", "Event", 7, S),
    ("Extra/2", "Extra", 20, S),
    ("Features/3", "Features", 20, S),
    ("Federation/3", "Federation", 10, S),
    ("FedState/4", "FedState", 12, S),
    ("FedStateRaw/9", "FedStateRaw", 11, N),
    ("Flags/2", "Flags", 20, S),
    ("GraceTime/3", "GraceTime", 10, N),
    ("GrpCPUs/6", "GrpCPUs", 8, N),
    ("GrpCPUMins/7", "GrpCPUMins", 11, N),
    ("GrpCPURunMins/7", "GrpCPURunMins", 13, N),
    ("GrpTRES/7", "GrpTRES", 13, S),
    ("GrpTRESMins/7", "GrpTRESMins", 13, S),
    ("GrpTRESRunMins/7", "GrpTRESRunMins", 13, S),
    ("GrpJobs/4", "GrpJobs", 7, N),
    ("GrpJobsAccrue/8", "GrpJobsAccrue", 13, N),
    ("GrpMemory/4", "GrpMem", 7, N),
    ("GrpNodes/4", "GrpNodes", 8, N),
    ("GrpSubmitJobs/4", "GrpSubmit", 9, N),
    ("GrpWall/4", "GrpWall", 11, N),
    ("ID/2", "ID", 6, N),
    ("Info/3", "Info", 20, S),
    ("InstanceId/9", "InstanceId", 20, S),
    ("InstanceType/9", "InstanceType", 20, S),
    ("Lineage/1", "Lineage", -20, S),
    ("servertype/10", "ServerType", 10, S),
    ("MaxCPUMinsPerJob/7", "MaxCPUMins", 11, N),
    ("MaxCPURunMinsPerUser/7 MaxCPURunMinsPU/7", "MaxCPURunMinsPU", 15, N),
    ("MaxCPUsPerJob/7", "MaxCPUs", 8, N),
    ("MaxCPUsPerUser/11 MaxCPUsPU/9", "MaxCPUsPU", 9, N),
    ("MaxTRES/7 MaxTRESPJ/9 MaxTRESPerJob/11", "MaxTRES", 13, S),
    ("MaxTRESPerNode/11 MaxTRESPN/9", "MaxTRESPerNode", 14, S),
    ("MaxTRESMinsPerJob/8 MaxTRESMinsPJ/13", "MaxTRESMins", 13, S),
    (
        "MaxTRESRunMinsPerAccount/18 MaxTRESRunMinsPerAcct/18 MaxTRESRunMinsPA/15",
        "MaxTRESRunMinsPA",
        16,
        S,
    ),
    ("MaxTRESRunMinsPerUser/8 MaxTRESRunMinsPU/8", "MaxTRESRunMinsPU", 16, S),
    ("MaxTRESPerAccount/11 MaxTRESPerAcct/11 MaxTRESPA/9", "MaxTRESPA", 13, S),
    ("MaxTRESPerUser/11 MaxTRESPU/9", "MaxTRESPU", 13, S),
    ("MaxJobs/4", "MaxJobs", 7, N),
    ("MaxJobsAccrue/4", "MaxJobsAccrue", 13, N),
    (
        "MaxJobsAccruePerAccount/17 MaxJobsAccruePerAcct/17 MaxJobsAccruePA/15",
        "MaxJobsAccruePA",
        15,
        N,
    ),
    ("MaxJobsAccruePerUser/17 MaxJobsAccruePU/15", "MaxJobsAccruePU", 15, N),
    ("MaxJobsPerAccount/11 MaxJobsPerAcct/11 MaxJobsPA/9", "MaxJobsPA", 9, N),
    ("MaxJobsPerUser/11 MaxJobsPU/9", "MaxJobsPU", 9, N),
    ("MaxNodesPerJob/4", "MaxNodes", 8, N),
    ("MaxNodesPerUser/12 MaxNodesPU/10", "MaxNodesPU", 10, N),
    ("MinPrioThreshold/4", "MinPrioThres", 12, N),
    ("MaxSubmitJobs/4", "MaxSubmit", 9, N),
    (
        "MaxSubmitJobsPerAccount/17 MaxSubmitJobsPerAcct/17 MaxSubmitJobsPA/15 MaxSubmitPA/11",
        "MaxSubmitPA",
        11,
        N,
    ),
    ("MaxSubmitJobsPerUser/10 MaxSubmitJobsPU/10 MaxSubmitPU/6", "MaxSubmitPU", 11, N),
    ("MaxWallDurationPerJob/4", "MaxWall", 11, N),
    ("MinCPUsPerJob/7", "MinCPUs", 8, N),
    ("MinTRESPerJob/7", "MinTRES", 13, S),
    ("Name/2", "Name", 10, S),
    ("NodeCount/5", "NodeCount", 9, N),
    ("NodeInx/5", "NodeInx", 9, S),
    ("NodeNames/5", "NodeName", -15, S),
    ("Organization/1", "Org", 20, S),
    ("ParentID/7", "ParentID", 8, N),
    ("ParentName/7", "ParentName", 10, S),
    ("Partition/4", "Partition", 10, S),
    ("PreemptMode/8", "PreemptMode", 11, S),
    ("Preempt/7", "Preempt", 10, S),
    ("PreemptExemptTime/8", "PreemptExemptTime", 19, N),
    ("Priority/3", "Priority", 10, N),
    ("Problem/1", "Problem", 40, S),
    ("QOSLevel/3", "QOS", 20, S),
    ("QOSRAWLevel/4", "QOS_RAW", 10, S),
    ("Reason/1", "Reason", 30, S),
    ("RGT/1", "RGT", 6, N),
    ("RPC/1", "RPC", 5, N),
    ("Server/3", "Server", 10, S),
    ("Share/1 FairShare/2", "Share", 9, N),
    ("StateRaw/6", "StateRaw", 8, N),
    ("State/1", "State", 6, S),
    ("TimeStamp/2", "Time", 19, N),
    ("TimeEligible/6 Eligible/2", "TimeEligible", 19, N),
    ("TimeEnd/6 End/2", "TimeEnd", 19, N),
    ("TimeStart/7 Start/3", "TimeStart", 19, N),
    ("TimeSubmit/6 Submit/2", "TimeSubmit", 19, N),
    ("Type/2", "Type", 8, S),
    ("UnusedWall/2", "UnusedWall", 10, D),
    ("UsageFactor/6", "UsageFactor", 11, D),
    ("UsageThreshold/6", "UsageThres", 10, D),
    ("LimitFactor/6", "LimitFactor", 11, D),
    ("Allocated/7", "% Allocated", 11, N),
    ("LastConsumed/8", "LastConsumed", 12, N),
    ("User/1", "User", 10, S),
    ("WCKeys/2", "WCKeys", 20, S),
    ("Where/2", "Where", 20, S),
)


def abbreviates(typed: str, word: str, least: int) -> bool:
    """Whether ``typed`` names ``word`` the way sacctmgr compares words.

    Case is ignored; ``typed`` is the whole word or a prefix of at least
    ``least`` characters (Slurm's ``strncasecmp(word, typed, MAX(len, least))``).
    """
    typed, word = typed.lower(), word.lower()
    return typed == word or (len(typed) >= least and word.startswith(typed))


def _spelling(names: str) -> list[tuple[str, int]]:
    """``"Word/3 Other/4"`` as ``[("Word", 3), ("Other", 4)]``."""
    out = []
    for item in names.split():
        word, _, least = item.partition("/")
        out.append((word, int(least)))
    return out


_FIELDS = tuple(
    (_spelling(names), Field(header, width, kind)) for names, header, width, kind in _TABLE
)


def find_field(word: str) -> Field | None:
    """The field a ``format=`` word (without ``%N``) names, or None."""
    for spellings, field in _FIELDS:
        if any(abbreviates(word, full, least) for full, least in spellings):
            return field
    return None


def field_by_header(header: str) -> Field:
    """The field printed under ``header``; text of width 10 if Slurm has none by that name."""
    for _, field in _FIELDS:
        if field.header.lower() == header.lower():
            return field
    return Field(header, 10, S)


class FieldError(ValueError):
    """A ``format=`` word that names no field; ``str()`` is the word as Slurm quotes it."""


def c_atoi(text: str) -> int:
    """C's ``atoi``: an optional sign and leading digits, else 0."""
    sign = -1 if text.startswith("-") else 1
    digits = text[1:] if text[:1] in "+-" else text
    end = 0
    while end < len(digits) and digits[end] in "0123456789":
        end += 1
    return sign * int(digits[:end]) if end else 0


def parse_format(words: Sequence[str]) -> list[Field]:
    """The columns of ``format=`` words (``name[%width]``); ``FieldError`` for an unknown one."""
    columns = []
    for word in words:
        name, percent, width = word.partition("%")
        field = find_field(name)
        if field is None:
            raise FieldError(name)
        size = c_atoi(width) if percent else 0
        columns.append(Field(field.header, size or field.width, field.kind))
    return columns


class Printer(_FieldPrinter):
    """Slurm's ``print_fields`` rules for values that arrive as text."""

    __slots__ = ()

    def cell(self, value: str, width: int, kind: str, last: bool) -> str:
        """``value`` laid out in its column, as the printer for ``kind`` would."""
        if self.parsable or kind == S:
            return self.text(value, width, last)
        if kind == D and len(value) > abs(width):
            try:
                return self.double(float(value), width, last)
            except ValueError:
                return self.text(value, width, last)
        size = abs(width)
        return (value.rjust(size) if width > 0 else value.ljust(size)) + " "


def value_of(row: Row, header: str) -> str:
    """The row's value under ``header`` (matched without regard to case), or ``""``."""
    value = row.get(header)
    if value is not None:
        return value
    lowered = header.lower()
    for key, text in row.items():
        if key.lower() == lowered:
            return text
    return ""


def render(rows: Sequence[Row], columns: Sequence[Field], parsable: int, header: bool) -> str:
    """A table: the header (unless ``header`` is false) and one line per row."""
    printer = Printer(parsable)
    out = [printer.header([(f.header, f.width, f.kind) for f in columns])] if header else []
    last = len(columns) - 1
    for row in rows:
        cells = [
            printer.cell(value_of(row, field.header), field.width, field.kind, index == last)
            for index, field in enumerate(columns)
        ]
        out.append("".join(cells) + "\n")
    return "".join(out)
