"""sprio: the priority factors of pending jobs, laid out as Slurm 24.11's sprio.

The controller sends every pending, eligible job the caller may see, one
record per job and partition, with each factor normalised and weighted, and
the weights (``Priorities``). Filtering (``-j``, ``-u``, ``-p``), sorting
(``-S``) and the layout happen here, as in Slurm's ``src/sprio``: the
default columns depend on which weights are non-zero, ``-n`` prints the
normalised factors, ``-w`` a ``Weights`` line instead of the jobs.
"""

from __future__ import annotations

import os
import pwd
import sys

from cli import boundary
from cli.columns import Column, cell, parse_letters
from cli.command import Command, split_list
from cli.halt import Halt
from cli.options import OPTIONAL, REFUSED, REQUIRED, WARNED, Option, OptionTable
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Row = Mapping[str, Any]

PROG = "sprio"

USAGE = """\
Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]
   [--federation] [--local] [--sibling] [--usage] [-hlnvVw]
"""

HELP = """\
Usage: sprio [OPTIONS]
      --federation                display jobs in federation if a member of one
  -h, --noheader                  no headers on output
  -j, --jobs                      comma separated list of jobs
                                  to view, default is all
      --local                     display jobs on local cluster only
  -l, --long                      long report
  -M, --cluster=cluster_name      cluster to issue commands to.  Default is
                                  current cluster.  cluster with no name will
                                  reset to default.
                                  NOTE: SlurmDBD must be up.
  -n, --norm                      display normalized values
  -o, --format=format             format specification
      --sibling                   display job records separately for each federation cluster
  -p, --partition=partition_name  comma separated list of partitions
  -u, --user=user_name            comma separated list of users to view
  -v, --verbose                   verbosity level
  -V, --version                   output version information and exit
  -w, --weights                   show the weights for each priority factor

Help options:
  --help                          show this help message
  --helpformat                    print a list of fields that can be specified
                                  with '--format=' option
  --usage                         display a brief summary of sprio options
"""

#: What the format options' notes say (docs/compatibility.md): a field of a feature
#: Corral lacks (licenses, burst buffers...) prints the value Slurm prints when unset.
_FIELDS_NOTE = "every Slurm field; those of features Corral lacks show Slurm's unset value"

TABLE = OptionTable(
    [
        Option("federation", "", "federation", note="no federation: the same as --local"),
        Option("help", "", "help"),
        Option("helpformat", "", "helpformat"),
        Option("jobs", "j", "jobs", OPTIONAL),
        Option("local", "", "local", note="this cluster only, unless -M names another"),
        Option("cluster", "M", "cluster", REQUIRED),
        Option("cluster", "", "clusters", REQUIRED),
        Option("long", "l", "long"),
        Option("noheader", "h", "noheader"),
        Option("norm", "n", "norm"),
        Option("format", "o", "format", REQUIRED, note=_FIELDS_NOTE),
        Option("partition", "p", "partition", REQUIRED),
        Option("sibling", "", "sib", use=REFUSED, note="federation is not implemented"),
        Option("sibling", "", "sibling", use=REFUSED, note="federation is not implemented"),
        Option("sort", "S", "sort", REQUIRED),
        Option("usage", "", "usage"),
        Option("user", "u", "user", REQUIRED),
        Option("user", "", "users", REQUIRED),
        Option("verbose", "v", "verbose", use=WARNED, note="sprio prints no progress"),
        Option("version", "V", "version"),
        Option("weights", "w", "weights"),
    ],
    prog="sprio",
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

LONG_FORMAT = (
    "%.15i %9r %.8u %.8o %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10n %.10Q %.11N %.20T"
)
NORM_LONG_FORMAT = "%.15i %9r %.8u %.8o %10y %10a %10b %10f %10j %10p %10n %10q %20t"
#: A priority over this is 1.0 in ``%y`` (Slurm's 32-bit priority ceiling).
_PRIORITY_SCALE = float(0xFFFFFFFF)
DEFAULT_SORT = "i"
#: Stands for the ``Weights`` line where a job record would be (Slurm passes -1).
WEIGHTS = None


class Settings:
    """What the command line and environment asked for."""

    __slots__ = (
        "cluster",
        "fmt",
        "job_ids",
        "jobs_given",
        "long",
        "noheader",
        "normalized",
        "partitions",
        "sort",
        "uids",
        "users_given",
        "warnings",
        "weights",
    )

    def __init__(self) -> None:
        self.cluster = ""  # -M: the one cluster asked ("" this one)
        self.fmt: str | None = None
        self.job_ids: list[tuple[int, str | None]] | None = None
        self.jobs_given = False
        self.long = False
        self.noheader = False
        self.normalized = False
        self.partitions: list[str] | None = None
        self.sort = DEFAULT_SORT
        self.uids: list[int] | None = None
        self.users_given = False
        self.warnings: list[str] = []
        self.weights = False


def parse_settings(argv: list[str], env: Mapping[str, str]) -> Settings:
    """Settings from the command line, then SPRIO_FORMAT; ``Halt`` on errors."""
    found, positional = COMMAND.parse(argv)
    settings = Settings()
    jobs_flag = False
    override_env = False
    for opt, value in found:
        key = opt.key
        COMMAND.answer(key)
        if key == "helpformat":
            sys.stdout.write(help_format())
            raise Halt(0)
        if key == "jobs":
            jobs_flag = True
            if value is not None:
                settings.job_ids = parse_job_ids(value)
                settings.jobs_given = True
        elif key == "long":
            settings.long = True
            override_env = True
        elif key == "format":
            settings.fmt = value
            override_env = True
        elif key == "noheader":
            settings.noheader = True
        elif key == "norm":
            settings.normalized = True
        elif key == "partition":
            settings.partitions = split_list(value or "")
        elif key == "sort":
            settings.sort = value or ""
        elif key == "user":
            settings.uids, errors = parse_users(value or "")
            settings.users_given = True
            settings.warnings.extend(errors)
        elif key == "weights":
            settings.weights = True
        elif key == "cluster":
            settings.cluster = value or ""
    COMMAND.check_format_and_long(settings.fmt, settings.long)
    if not override_env and "SPRIO_FORMAT" in env:
        settings.fmt = env["SPRIO_FORMAT"]
    if positional and jobs_flag:
        settings.job_ids = parse_job_ids(positional.pop(0))
        settings.jobs_given = True
    if positional:
        sys.stdout.write(USAGE)
        raise Halt(1, f"{PROG}: error: Unrecognized option: {positional[0]}")
    return settings


def parse_job_ids(text: str) -> list[tuple[int, str | None]]:
    """``-j``: (job id, array task or None) per comma separated id; ``Halt`` if bad.

    Each id is checked as Slurm's ``unfmt_job_id_string`` checks it:
    ``123``, ``123_4``, ``123+1``, optionally followed by ``.step``.
    (Slurm 24.11.0 parses the whole list once per item, so a list of two
    ids fails there; later releases parse each item, as here.)
    """
    ids = []
    for item in split_list(text):
        parsed = _job_id(item)
        if parsed is None:
            raise Halt(1, f"{PROG}: error: Invalid job id: {item}")
        ids.append(parsed)
    return ids


def _job_id(text: str) -> tuple[int, str | None] | None:
    """One ``-j`` id as (job id, array task), or None where Slurm rejects it.

    Like ``strtol``, leading blanks and a sign are allowed; the id must be
    positive. A bracketed task range is refused (sprio passes no array size).
    """
    stripped = text.lstrip(" \t\n\r\f\v")
    start = 1 if stripped.startswith(("+", "-")) else 0
    end = start
    while end < len(stripped) and stripped[end] in "0123456789":
        end += 1
    if end == start or int(stripped[:end]) <= 0:
        return None
    job_id, rest = int(stripped[:end]), stripped[end:]
    task: str | None = None
    if rest.startswith("_"):
        number = rest[1:].split(".", 1)[0]
        if not number.isdigit():
            return None
        task, rest = str(int(number)), rest[1 + len(number) :]
    elif rest.startswith("+"):
        number = rest[1:].split(".", 1)[0]
        if not number.isdigit():
            return None
        job_id, rest = job_id + int(number), rest[1 + len(number) :]
    if rest and not rest.startswith("."):
        return None
    return job_id, task


def parse_users(text: str) -> tuple[list[int], list[str]]:
    """``-u``: the uids of the named users, and the error lines for unknown ones."""
    uids, errors = [], []
    for name in split_list(text):
        if name.isdigit():
            uids.append(int(name))
            continue
        try:
            uids.append(pwd.getpwnam(name).pw_uid)
        except KeyError:
            errors.append(f"{PROG}: error: Invalid user: {name}\n")
    return uids, errors


# ------------------------------------------------------------------ the layout
def default_format(settings: Settings, weights: Mapping[str, Any]) -> str:
    """Slurm's default columns: the factors whose weights are not 0."""
    if settings.long:
        return NORM_LONG_FORMAT if settings.normalized else LONG_FORMAT
    parts = ["%.15i %9r"]
    if settings.users_given:
        parts.append("%.8u")
    if settings.normalized:
        parts.append("%10y")
        letters: tuple[tuple[str, str], ...] = (("age", "a"), ("assoc", "b"), ("fairshare", "f"))
        letters += (("job_size", "j"), ("partition", "p"), ("qos", "q"))
        parts += [f"%10{letter}" for key, letter in letters if weights[key]]
        if weights["tres"]:
            parts.append("%20t")
    else:
        parts.append("%.10Y %.10S")
        letters = (("age", "A"), ("assoc", "B"), ("fairshare", "F"), ("job_size", "J"))
        letters += (("partition", "P"), ("qos", "Q"))
        parts += [f"%.10{letter}" for key, letter in letters if weights[key]]
        if weights["tres"]:
            parts.append("%.20T")
    return " ".join(parts)


class Report:
    """Prints rows of one reply: the weights and the columns chosen."""

    __slots__ = ("columns", "prefix", "weights")

    def __init__(self, spec: str, weights: Mapping[str, Any]) -> None:
        self.weights = weights
        self.prefix, columns = parse_letters(spec)
        self.columns: list[tuple[Column, Callable[[Row | None], str], str]] = []
        for column in columns:
            field = FIELDS.get(column.key)
            if field is None:
                print(
                    f"{PROG}: error: Invalid job format specification: {column.key}",
                    file=sys.stderr,
                )
                continue
            header, value = field
            self.columns.append((column, value(self), header))

    def line(self, row: Row | None, *, header: bool = False) -> str:
        """A job's line, the ``Weights`` line (``row`` None) or the header."""
        parts = [self.prefix]
        for column, value, title in self.columns:
            text = title if header else value(row)
            parts.append(cell(text, column.width, column.right))
            parts.append(column.suffix)
        return "".join(parts)


def priority_of(row: Row) -> float:
    """Slurm's ``get_priority_from_factors``: the sum of the weighted terms, at least 1."""
    if row["direct_priority"]:
        return float(row["direct_priority"])
    total = (
        row["age_weighted"]
        + row["assoc_weighted"]
        + row["fairshare_weighted"]
        + row["job_size_weighted"]
        + row["partition_weighted"]
        + row["qos_weighted"]
        + row["site"]
        - row["nice"]
    )
    total += sum(tres["weighted"] for tres in row["tres"] if tres["weighted"])
    return total if total >= 1 else 1.0


def _c_int(value: float) -> str:
    """``printf("%lld", (long long) value)``: truncated toward zero."""
    return str(int(value))


def _factor(key: str, weight_key: str, normalized: bool) -> Callable[[Report], Callable[..., str]]:
    """A factor column: the weight on the Weights line, 0 with a direct priority."""

    def bind(report: Report) -> Callable[[Row | None], str]:
        weight = report.weights[weight_key]

        def value(row: Row | None) -> str:
            if row is WEIGHTS:
                return str(weight)
            if row["direct_priority"]:
                return "0"
            weighted = row[f"{key}_weighted"]
            if normalized:
                return f"{weighted / weight if weight else 0.0:.7f}"
            return f"{weighted:.0f}"

        return value

    return bind


def _text(key: str, weights_text: str = "") -> Callable[[Report], Callable[..., str]]:
    def bind(report: Report) -> Callable[[Row | None], str]:
        return lambda row: weights_text if row is WEIGHTS else str(row[key])

    return bind


def _job_id_column(report: Report) -> Callable[[Row | None], str]:
    return lambda row: "Weights" if row is WEIGHTS else str(row["job_id"])


def _priority_column(report: Report) -> Callable[[Row | None], str]:
    return lambda row: "" if row is WEIGHTS else _c_int(priority_of(row))


def _norm_priority_column(report: Report) -> Callable[[Row | None], str]:
    def value(row: Row | None) -> str:
        if row is WEIGHTS:
            return ""
        if row["direct_priority"]:
            return f"{row['direct_priority']:16.14f}"
        return f"{priority_of(row) / _PRIORITY_SCALE:16.14f}"

    return value


def _site_column(report: Report) -> Callable[[Row | None], str]:
    def value(row: Row | None) -> str:
        if row is WEIGHTS:
            return "1"
        return "0" if row["direct_priority"] else str(row["site"])

    return value


def _nice_column(report: Report) -> Callable[[Row | None], str]:
    def value(row: Row | None) -> str:
        if row is WEIGHTS:
            return ""
        return "0" if row["direct_priority"] else str(row["nice"])

    return value


def _tres_column(normalized: bool) -> Callable[[Report], Callable[..., str]]:
    def bind(report: Report) -> Callable[[Row | None], str]:
        configured = report.weights["tres"]

        def value(row: Row | None) -> str:
            if row is WEIGHTS:
                return "" if normalized else (configured or "(null)")
            if row["direct_priority"]:
                return ""
            items = []
            for tres in row["tres"]:
                if not tres["weighted"]:
                    continue
                if normalized:
                    share = tres["weighted"] / tres["weight"] if tres["weight"] else 0.0
                    items.append(f"{tres['name']}={share:.2f}")
                else:
                    items.append(f"{tres['name']}={tres['weighted']:.0f}")
            return ",".join(items)

        return value

    return bind


#: Format letter -> (header, column builder), Slurm's ``fmt_data``.
FIELDS: dict[str, tuple[str, Callable[[Report], Callable[..., str]]]] = {
    "a": ("AGE", _factor("age", "age", True)),
    "A": ("AGE", _factor("age", "age", False)),
    "b": ("ASSOC", _factor("assoc", "assoc", True)),
    "B": ("ASSOC", _factor("assoc", "assoc", False)),
    "c": ("CLUSTER", _text("cluster")),
    "f": ("FAIRSHARE", _factor("fairshare", "fairshare", True)),
    "F": ("FAIRSHARE", _factor("fairshare", "fairshare", False)),
    "i": ("JOBID", _job_id_column),
    "j": ("JOBSIZE", _factor("job_size", "job_size", True)),
    "J": ("JOBSIZE", _factor("job_size", "job_size", False)),
    "n": ("QOSNAME", _text("qos")),
    "N": ("NICE", _nice_column),
    "o": ("ACCOUNT", _text("account")),
    "p": ("PARTITION", _factor("partition", "partition", True)),
    "P": ("PARTITION", _factor("partition", "partition", False)),
    "r": ("PARTITION", _text("partition")),
    "S": ("SITE", _site_column),
    "q": ("QOS", _factor("qos", "qos", True)),
    "Q": ("QOS", _factor("qos", "qos", False)),
    "u": ("USER", _text("user")),
    "y": ("PRIORITY", _norm_priority_column),
    "Y": ("PRIORITY", _priority_column),
    "t": ("TRES", _tres_column(True)),
    "T": ("TRES", _tres_column(False)),
}


def help_format() -> str:
    """``--helpformat``: the format letters, eight to a line, as Slurm prints them."""
    out = []
    count = 0
    for letter in "aAbBcfFijJnNopPrSqQuyYtT":
        if count & 8:
            count = 0
            out.append("\n")
        count += 1
        out.append(f"%{letter:<5}")
    out.append("\n")
    return "".join(out)


# ------------------------------------------------------------------ rows
def filter_rows(rows: Sequence[Row], settings: Settings) -> list[Row]:
    """The rows ``-j``, ``-u`` and ``-p`` select (Slurm's ``filter_job_list``)."""
    if settings.job_ids is None and settings.uids is None and settings.partitions is None:
        return list(rows)
    kept = []
    for row in rows:
        if settings.job_ids is not None and not any(
            _matches(row, job_id, task) for job_id, task in settings.job_ids
        ):
            continue
        if settings.uids is not None and row["uid"] not in settings.uids:
            continue
        if settings.partitions is not None and row["partition"] not in settings.partitions:
            continue
        kept.append(row)
    return kept


def _matches(row: Row, job_id: int, task: str | None) -> bool:
    """Whether ``-j`` id ``job_id[_task]`` names the row: the job, or a task of the array."""
    display = str(row["display_id"])
    if task is not None:
        return display == f"{job_id}_{task}"
    return row["job_id"] == job_id or display.startswith(f"{job_id}_")


def _tres_sum(row: Row) -> float:
    return float(sum(tres["weighted"] for tres in row["tres"]))


_SORT_KEYS: dict[str, Callable[[Row], Any]] = {
    "c": lambda row: row["cluster"],
    "i": lambda row: row["job_id"],
    "N": lambda row: row["nice"],
    "n": lambda row: row["qos"],
    "o": lambda row: row["account"],
    "r": lambda row: row["partition"],
    "u": lambda row: row["user"],
    "a": lambda row: row["age_weighted"],
    "f": lambda row: row["fairshare_weighted"],
    "j": lambda row: row["job_size_weighted"],
    "p": lambda row: row["partition_weighted"],
    "q": lambda row: row["qos_weighted"],
    "t": _tres_sum,
    "y": priority_of,
}


class SortFailure(Halt):
    """An invalid ``-S`` letter, found (as in Slurm) after the header was printed."""

    def __init__(self, printed: str, letter: str) -> None:
        super().__init__(1, f"{PROG}: error: Invalid sort specification: {letter}")
        self.printed = printed


def _sort_key(letter: str) -> Callable[[Row], Any] | None:
    return _SORT_KEYS.get(letter.lower() if letter in "AFJPQTY" else letter)


def sort_rows(rows: list[Row], spec: str) -> list[Row]:
    """Slurm's ``sort_job_list``: keys applied from the last to the first, ``-`` descends.

    An unknown letter raises ``SortFailure`` with nothing printed.
    """
    for index in range(len(spec) - 1, -1, -1):
        letter = spec[index]
        if letter in ",-+":
            continue
        key = _sort_key(letter)
        if key is None:
            raise SortFailure("", letter)
        descending = index > 0 and spec[index - 1] == "-"
        rows.sort(key=key, reverse=descending)
    return rows


def render(reply: Mapping[str, Any], settings: Settings) -> str:
    """sprio's output for a ``Priorities`` reply."""
    weights = reply["weights"] or {
        "age": 0,
        "assoc": 0,
        "fairshare": 0,
        "job_size": 0,
        "partition": 0,
        "qos": 0,
        "tres": "",
    }
    rows = list(reply["jobs"])
    if settings.jobs_given and not rows:
        return "Unable to find jobs matching user/id(s) specified\n"
    spec = settings.fmt if settings.fmt is not None else default_format(settings, weights)
    report = Report(spec, weights)
    lines = []
    if not settings.noheader:
        lines.append(report.line(None, header=True))
    if settings.weights:
        lines.append(report.line(WEIGHTS))
    elif rows:
        try:
            ordered = sort_rows(filter_rows(rows, settings), settings.sort)
        except SortFailure as failure:
            failure.printed = "".join(text + "\n" for text in lines)
            raise
        lines.extend(report.line(row) for row in ordered)
    return "".join(text + "\n" for text in lines)


def sprio(argv: list[str]) -> int:
    """Run sprio with ``argv``; return the exit status."""
    try:
        settings = parse_settings(argv, os.environ)
    except Halt as halt:
        return halt.report()
    for text in settings.warnings:
        print(text, file=sys.stderr)
    from cli import clusters

    client = clusters.one(PROG, settings.cluster) if settings.cluster else boundary.connect()
    try:
        reply = client.call("Priorities", {})
    except SlurmError as exc:
        print(f"Couldn't get priority factors from controller: {exc}", file=sys.stderr)
        return 1
    if reply["priority_type"] == "priority/basic":
        print(
            "You are not running a supported priority plugin\n(priority/basic).\n"
            "Only 'priority/multifactor' is supported.",
            file=sys.stderr,
        )
        return 1
    try:
        sys.stdout.write(render(reply, settings))
    except SortFailure as failure:
        sys.stdout.write(failure.printed)
        sys.stdout.flush()
        return failure.report()
    return 0


def main() -> None:
    boundary.run(PROG, sprio)
