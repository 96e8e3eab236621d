"""sacct: finished and live jobs from the accounting records, as Slurm 24.11's sacct.

The options become a ``HistoryFilter`` here, time window included, the way
Slurm's sacct builds its ``job_cond`` (``slurmdb_job_cond_def_start_end``):
the controller forwards it to corral-dbd and sends back the matching JobInfo
records ordered by cluster, submit time and job id. Layout is Slurm's
``print_fields``: fixed widths cut with ``+``, or ``|``-separated with ``-p``
and ``-P``, because workflow tools (submitit, Snakemake, parsl) parse it.
Errors use Slurm's words and exit status 1; bad options are refused before the
controller is asked anything.
"""

from __future__ import annotations

import os
import pwd
import sys
import time

from cli import boundary, options
from cli.command import Command, split_list
from cli.halt import Halt
from cli.jobs import statenames
from cli.options import OPTIONAL, REFUSED, REQUIRED, WARNED, Option, OptionTable
from cli.printfields import NOT_PARSABLE, PARSABLE, PARSABLE2
from cli.sacct.fields import (
    BRIEF_FIELDS,
    DEFAULT_FIELDS,
    LONG_FIELDS,
    FieldError,
    Layout,
    Printer,
    Step,
    View,
    expand_array,
    help_format,
    job_steps,
    parse_fields,
)
from corral.errors import ESLURM_DISABLED, SlurmError
from corral.timefmt import format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any

    Job = Mapping[str, Any]

PROG = "sacct"

USAGE = "Usage: sacct [options]\n\tUse --help for help\n"

HELP = """\
sacct [<OPTION>]
    Valid <OPTION> values are:
     -a, --allusers       show the jobs of every user (the default for root,
                          with -j and with -N); otherwise only your own
     -A, --accounts=list  only jobs charged to these accounts
     -b, --brief          same as '--format=jobid,state,exitcode'
         --array          show each task of a pending job array on its own line
         --delimiter=str  separator of the -p and -P forms (default '|')
     -D, --duplicates     every run of a requeued job, not only the last
     -e, --helpformat     list the fields '--format' accepts
     -E, --endtime=time   jobs eligible before this time (default: now; with
                          -s, the start time)
     -h, --help           this text
     -j, --jobs=list      only these jobs: 123, 123_4, 123_[1-3], 123.batch;
                          may be repeated
         --json           the records as JSON (slurmrestd v0.0.42 job records)
     -l, --long           the long field list (see --helpformat)
     -L, --allclusters    jobs of every cluster
     -M, --clusters=list  jobs of these clusters ('all' for every cluster)
     -n, --noheader       no header lines
         --name=list      only jobs with these names
         --noconvert      print sizes in MiB, unscaled
     -N, --nodelist=nodes only jobs that ran on any of these nodes
     -o, --format=list    the fields to print, each as name[%[-]width]
     -p, --parsable       '|' after every field
     -P, --parsable2      '|' between fields
     -r, --partition=list only jobs in these partitions
     -s, --state=list     only jobs in these states (CD, F, CA, TO, R, PD, NF,
                          OOM, PR, BF, DL, RQ, RS, RV, S or the long names)
     -S, --starttime=time jobs eligible after this time (default: 00:00 today;
                          with -s, now; with -j, the epoch)
     -T, --truncate       refused: times are not truncated to the window
     -u, --user=list      only jobs of these users (names or uids; -1 for all)
         --units=[KMGTP]  print sizes in this unit
         --usage          a one-line usage summary
     -v, --verbose        accepted
     -V, --version        print the version
     -X, --allocations    job allocations only, no steps

     Times: HH:MM[:SS][AM|PM], MMDD[YY][-HH:MM[:SS]], MM/DD[/YY]-HH:MM[:SS],
     YYYY-MM-DD[THH:MM[:SS]], now[{+|-}N[seconds|minutes|hours|days|weeks]],
     today, midnight, noon.
"""

#: The data_parser version of ``--json``'s records (cli/sacct/jsonrecords.py).
JSON_PARSER = "v0.0.42"

#: What the format options' notes say (docs/compatibility.md): a field of a feature
#: Corral lacks (licenses, burst buffers...) prints the value Slurm prints when unset.
_FIELDS_NOTE = "every Slurm field; those of features Corral lacks show Slurm's unset value"

TABLE = OptionTable(
    [
        Option("allusers", "a", "allusers"),
        Option("accounts", "A", "accounts", REQUIRED),
        Option("allocations", "X", "allocations"),
        Option("allocations", "t", ""),  # deprecated spelling of -X
        Option("array", "", "array"),
        Option("brief", "b", "brief"),
        Option("delimiter", "", "delimiter", REQUIRED),
        Option("duplicates", "D", "duplicates"),
        Option("federation", "", "federation", note="no federation: the same as --local"),
        Option("helpformat", "e", "helpformat"),
        Option("helpformat", "", "help-fields"),
        Option("endtime", "E", "endtime", REQUIRED),
        Option(
            "expand_patterns",
            "",
            "expand-patterns",
            use=REFUSED,
            note="file name patterns are not expanded",
        ),
        Option("help", "h", "help"),
        Option("local", "", "local"),
        Option("name", "", "name", REQUIRED),
        Option("jobs", "j", "jobs", REQUIRED),
        Option("long", "l", "long"),
        Option("allclusters", "L", "allclusters"),
        Option("clusters", "M", "cluster", REQUIRED),
        Option("clusters", "", "clusters", REQUIRED),
        Option("nodelist", "N", "nodelist", REQUIRED),
        Option("noconvert", "", "noconvert"),
        Option("units", "", "units", REQUIRED, note="K, M, G, T or P"),
        Option("noheader", "n", "noheader"),
        Option("format", "o", "fields", REQUIRED, note=_FIELDS_NOTE),
        Option("format", "", "format", REQUIRED, note=_FIELDS_NOTE),
        Option("parsable", "p", "parsable"),
        Option("parsable2", "P", "parsable2"),
        Option("partition", "r", "partition", REQUIRED),
        Option(
            "state",
            "s",
            "state",
            REQUIRED,
            note="job state names and abbreviations; others are an error",
        ),
        Option("starttime", "S", "starttime", REQUIRED),
        Option(
            "truncate", "T", "truncate", use=REFUSED, note="times are not truncated to the window"
        ),
        Option("user", "u", "uid", REQUIRED),
        Option("use_local_uid", "", "use-local-uid", use=WARNED, note="the uid recorded is shown"),
        Option("usage", "U", "usage"),
        Option("user", "", "user", REQUIRED),
        Option("verbose", "v", "verbose", use=WARNED, note="sacct prints no progress"),
        Option("version", "V", "version"),
        Option("whole_hetjob", "", "whole-hetjob", OPTIONAL),
        Option("json", "", "json", OPTIONAL, note="data_parser v0.0.42 only (the default)"),
    ],
    prog="sacct",
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

#: States slurmdbd records, the only ones ``-s`` may name (sacct's ``_supported_state``).
ACCOUNTED_STATES = frozenset((*statenames.BASE_STATES, "REQUEUED", "RESIZING", "REVOKED"))
#: Step names ``-j 123.<step>`` accepts besides a number.
_STEP_NAMES = ("batch", "extern", "interactive", "TBD")
_UNITS = "KMGTP"


class JobSelection:
    """One ``-j`` item: the job, an array task (``4`` or ``[1-3]``) and a step, if named."""

    __slots__ = ("job_id", "step", "task")

    def __init__(self, job_id: int, task: str | None = None, step: str | None = None) -> None:
        self.job_id = job_id
        self.task = task
        self.step = step

    def filter_id(self) -> str:
        """The id the controller filters on: ``123``, ``123_4`` or ``123_[1-3]``."""
        return str(self.job_id) if self.task is None else f"{self.job_id}_{self.task}"

    def matches(self, job: Job) -> bool:
        """Whether ``job`` is (a task of) the selected job."""
        if self.task is None:
            return self.job_id in (job["job_id"], job["array_job_id"], job.get("het_job_id"))
        if job["array_job_id"] != self.job_id:
            return False
        if not self.task.startswith("["):
            return str(job["array_task_id"]) == self.task
        return True  # a task of the range: the controller chose it

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobSelection):
            return NotImplemented
        return (self.job_id, self.task, self.step) == (other.job_id, other.task, other.step)

    def __hash__(self) -> int:
        return hash((self.job_id, self.task, self.step))

    def __repr__(self) -> str:
        return f"JobSelection({self.job_id!r}, {self.task!r}, {self.step!r})"


class Settings:
    """What the command line and environment asked for, and the window to search."""

    __slots__ = (
        "accounts",
        "all_clusters",
        "all_users",
        "allocations",
        "array",
        "clusters",
        "columns",
        "delimiter",
        "duplicates",
        "end",
        "jobs",
        "json",
        "names",
        "noconvert",
        "nodes",
        "noheader",
        "parsable",
        "partitions",
        "start",
        "states",
        "uids",
        "units",
        "warnings",
    )

    def __init__(self) -> None:
        self.accounts: list[str] = []
        self.all_clusters = False
        self.all_users = False
        self.allocations = False
        self.array = False
        self.clusters: list[str] = []
        self.columns: list[Any] = []
        self.delimiter = "|"
        self.duplicates = False
        self.end = 0
        self.json = False
        self.jobs: list[JobSelection] = []
        self.names: list[str] = []
        self.noconvert = False
        self.noheader = False
        self.nodes: list[str] | None = None
        self.parsable = NOT_PARSABLE
        self.partitions: list[str] = []
        self.start = 0
        self.states: list[str] = []
        self.uids: list[int] | None = None
        self.units: int | None = None
        self.warnings: list[str] = []


def _fatal(message: str) -> Halt:
    return Halt(1, f"{PROG}: fatal: {message}")


def _error(message: str) -> Halt:
    return Halt(1, f"{PROG}: error: {message}")


def parse_settings(argv: list[str], env: Mapping[str, str], now: int, uid: int) -> Settings:
    """Settings from the command line and SACCT_FORMAT; ``Halt`` on errors or help.

    ``now`` and ``uid`` are the caller's clock and user, so the default window
    and the default user list can be tested.
    """
    try:
        found, positional = options.parse(TABLE, argv, permute=True)
    except options.OptionError as exc:
        # sacct lets getopt explain and exits: no "Try --help" line.
        raise Halt(1, f"{PROG}: {exc}") from None
    settings = Settings()
    fields = ""
    brief = long = False
    start: int | None = None
    end: int | None = None
    help_text: str | None = None
    for opt, value in found:
        key = opt.key
        text = value or ""
        if key == "version":
            print(boundary.version_line())
            raise Halt(0)
        if key == "help":
            help_text = HELP
        elif key == "usage":
            help_text = USAGE
        elif key == "helpformat":
            help_text = help_format()
        elif key == "format":
            fields += text + ","
        elif key == "brief":
            brief = True
        elif key == "long":
            long = True
        elif key == "starttime":
            start = parse_time(text, now)
        elif key == "endtime":
            end = parse_time(text, now)
        else:
            _apply(settings, key, text, value)
    COMMAND.check_format_and_long(fields or None, long)
    settings.start, settings.end = window(
        start, end, jobs=bool(settings.jobs), states=bool(settings.states), now=now
    )
    if settings.start > settings.end:
        raise _error(
            f"Start time ({format_timestamp(settings.start)}) requested is after end time "
            f"({format_timestamp(settings.end)})."
        )
    settings.columns = _columns(fields, brief, long, env)
    if positional:
        raise Halt(
            1, f"{PROG}: error: Unknown arguments:", *(f"{PROG}: error:  {a}" for a in positional)
        )
    if help_text is not None:
        sys.stdout.write(help_text)
        raise Halt(0)
    settings.uids = default_users(settings, uid)
    return settings


def _apply(settings: Settings, key: str, text: str, value: str | None) -> None:
    """Record one selection or output option."""
    if key == "allusers":
        settings.all_users = True
    elif key == "accounts":
        settings.accounts += split_list(text)
    elif key == "allocations":
        settings.allocations = True
    elif key == "array":
        settings.array = True
    elif key == "duplicates":
        settings.duplicates = True
    elif key == "delimiter":
        settings.delimiter = text
    elif key == "allclusters":
        settings.all_clusters = True
    elif key == "clusters":
        if text.lower() in ("all", "-1"):
            settings.all_clusters = True
        else:
            settings.all_clusters = False
            settings.clusters += split_list(text.lower())
    elif key in ("federation", "local"):
        settings.all_clusters = False
    elif key == "jobs":
        settings.jobs += parse_jobs(text)
    elif key == "name":
        settings.names += split_list(text)
    elif key == "nodelist":
        if settings.nodes is not None:
            settings.warnings.append(f"{PROG}: error: Already asked for nodes '{text}'")
        else:
            settings.nodes = COMMAND.hostlist(text, "nodelist")
    elif key == "noconvert":
        settings.noconvert = True
    elif key == "units":
        settings.units = parse_units(text)
    elif key == "noheader":
        settings.noheader = True
    elif key == "parsable":
        settings.parsable = PARSABLE
    elif key == "parsable2":
        settings.parsable = PARSABLE2
    elif key == "partition":
        settings.partitions += split_list(text)
    elif key == "state":
        _add_new(settings.states, parse_states(text))
    elif key == "user":
        if text == "-1":
            settings.all_users = True
        else:
            settings.all_users = False
            settings.uids = settings.uids or []
            _add_new(settings.uids, parse_users(text))
    elif key == "whole_hetjob":
        if value is not None and value.lower() not in ("yes", "y", "no", "n"):
            raise _error(f'Invalid --whole-hetjob value "{value}". Valid values: [yes|no].')
    elif key == "json":
        if value and value.removeprefix("data_parser/") != JSON_PARSER:
            raise _error(f"--json={value} is not supported: only data_parser {JSON_PARSER} is")
        settings.json = True
    # use_local_uid and verbose are warned about by the option table


def _add_new(items: list[Any], new: list[Any]) -> None:
    """Append the items of ``new`` not yet in ``items`` (Slurm's lists have no repeats)."""
    for item in new:
        if item not in items:
            items.append(item)


def _columns(fields: str, brief: bool, long: bool, env: Mapping[str, str]) -> list[Any]:
    """The columns: ``-o`` lists, then ``-b``'s and ``-l``'s, else SACCT_FORMAT or the default."""
    if brief:
        fields += BRIEF_FIELDS + ","
    if long:
        fields += LONG_FIELDS + ","
    if not fields:
        fields = env.get("SACCT_FORMAT", DEFAULT_FIELDS) + ","
    try:
        return parse_fields(fields)
    except FieldError as exc:
        raise Halt(1, f"{PROG}: {exc}") from None


def parse_time(text: str, now: int) -> int:
    """A ``-S``/``-E`` time; ``Halt`` with parse_time's message (no prefix) if bad.

    Slurm's message gives the position where parsing stopped; Corral's parser
    does not track it and always says 0.
    """
    from corral.timefmt import parse_timestamp

    try:
        return parse_timestamp(text, now, past=True)
    except ValueError:
        raise Halt(1, f"Invalid time specification (pos=0): {text}") from None


def midnight(now: int) -> int:
    """00:00 of ``now``'s day, local time."""
    day = time.localtime(now)
    return int(time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0, 0, 0, -1)))


def window(
    start: int | None, end: int | None, *, jobs: bool, states: bool, now: int
) -> tuple[int, int]:
    """The [start, end] to search, from ``-S``/``-E`` (None if not given).

    Slurm 24.11's defaults: with ``-s``, start is now (the epoch with ``-j``)
    and end is the start (now when that is the epoch), so the states are those
    held at an instant; with only ``-j``, from the epoch to now; otherwise
    from midnight to now. Slurm then widens end by a second to include it;
    ``HistoryFilter``'s window is inclusive, so the end is sent as is.
    """
    if states:
        if start is None and not jobs:
            start = now
        if start and end is None:
            end = start
    elif start is None and not jobs:
        start = midnight(now)
    return start or 0, now if end is None else end


def default_users(settings: Settings, uid: int) -> list[int]:
    """The uids to show, ``[]`` for every user.

    ``-a``, ``-u -1``, root, and ``-j`` or ``-N`` without ``-u`` mean every
    user; otherwise ``-u``'s list, else the caller alone.
    """
    if settings.all_users:
        return []
    if settings.uids:
        return settings.uids
    if settings.jobs or settings.nodes is not None or uid == 0:
        return []
    return [uid]


def parse_users(text: str) -> list[int]:
    """``-u``: uids of names or numbers; ``Halt`` at an unknown user, as Slurm does."""
    uids = []
    for name in split_list(text):
        if name.isdigit():
            uids.append(int(name))
            continue
        try:
            uids.append(pwd.getpwnam(name).pw_uid)
        except KeyError:
            raise _error(f"Invalid user id: {name}") from None
    return uids


def parse_states(text: str) -> list[str]:
    """``-s``: long state names; ``Halt`` for unknown or unaccounted states."""
    states = []
    for item in split_list(text):
        name = statenames.parse_state(item)
        if name is None:
            raise _fatal(f"unrecognized job state value '{item}'")
        if name not in ACCOUNTED_STATES:
            raise _fatal(f"job state {item} is not supported / accounted")
        states.append(name)
    return states


def parse_units(text: str) -> int:
    """``--units``: the unit index (K=1 ... P=5) of its first letter; ``Halt`` if none."""
    letter = text[:1].upper()
    if not letter or letter not in _UNITS:
        raise Halt(
            1,
            f"{PROG}: error: Invalid unit type '{text[:1]}'. Possible options are '{_UNITS}'",
            f"{PROG}: fatal: Invalid unit type",
        )
    return _UNITS.index(letter) + 1


def _split_jobs(text: str) -> list[str]:
    """A ``-j`` list split at commas outside brackets; a leading quote ends at its mate."""
    if text[:1] in ("'", '"'):
        text = text[1:].split(text[0], 1)[0]
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth <= 0:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return [item for item in items if item]


def _leading_number(text: str) -> int:
    """C's ``atoi`` for text that starts with a digit."""
    digits = text[: len(text) - len(text.lstrip("0123456789"))]
    return int(digits)


def parse_jobs(text: str) -> list[JobSelection]:
    """``-j``: ``123``, ``123_4``, ``123.batch``, ``123.0``; ``Halt`` as Slurm would.

    Slurm reads the number at the start of each part (``12x`` is job 12) and
    stops with a fatal error when a part does not start with a digit. A task
    range ``123_[1-3]`` is a Corral extension (Slurm 24.11's sacct refuses
    it); a het job offset ``123+1`` selects job 123, and a step's part ``123.1+1``
    every part of step 123.1 (measured on 22.05).
    """
    selections = []
    for item in _split_jobs(text):
        if not item[0].isdigit():
            raise _fatal(f"Bad job/step specified: {item}")
        name, dot, step = item.partition(".")
        if dot:
            if step in _STEP_NAMES:
                pass
            elif step[:1].isdigit():
                step = str(_leading_number(step))
            else:
                raise _fatal(f"Bad step specified: {name}")
        number, under, task = name.partition("_")
        if under:
            task = _task(number, task)
        selections.append(
            JobSelection(_leading_number(number), task if under else None, step if dot else None)
        )
    return selections


def _task(number: str, task: str) -> str:
    """The array part of ``-j 123_<task>``: a number or a bracketed range."""
    if task.startswith("[") and task.endswith("]"):
        from corral import arrayspec

        try:
            arrayspec.parse(task)
        except ValueError:
            pass
        else:
            return task
    elif task[:1].isdigit():
        return str(_leading_number(task))
    raise _fatal(f"Bad job array element specified: {number}")


# ------------------------------------------------------------------ the call
def request(settings: Settings) -> dict[str, Any]:
    """The ``History`` request for these settings."""
    job_ids: list[str] = []
    for selection in settings.jobs:
        if selection.filter_id() not in job_ids:
            job_ids.append(selection.filter_id())
    clusters = ["all"] if settings.all_clusters else settings.clusters
    return {
        "filter": {
            "job_ids": job_ids,
            "uids": settings.uids or [],
            "accounts": settings.accounts,
            "partitions": settings.partitions,
            "states": settings.states,
            "names": settings.names,
            "nodes": settings.nodes or [],
            "clusters": clusters,
            "start": settings.start,
            "end": settings.end,
            "duplicates": settings.duplicates,
        }
    }


def with_components(client: Any, settings: Settings, jobs: list[Job]) -> list[Job]:
    """``-j 123`` of a heterogeneous job: its other components too, each after its
    leader, as Slurm lists them (accounting files each component under its own id,
    which the leader's HetJobIdSet names: one more ``History`` call asks for them)."""
    wanted = {s.job_id for s in settings.jobs if s.task is None}
    have = {int(job["job_id"]) for job in jobs}
    missing = sorted(
        {
            i
            for job in jobs
            if job.get("het_job_id") in wanted and job.get("het_job_id_set")
            for i in _id_set(str(job["het_job_id_set"]))
        }
        - have
    )
    if not missing:
        return jobs
    asked = request(settings)
    asked["filter"]["job_ids"] = [str(i) for i in missing]
    found = [j for j in client.call("History", asked)["jobs"] if j.get("het_job_id") in wanted]
    out: list[Job] = []
    for job in jobs:
        out.append(job)
        if job.get("het_job_id") and not job.get("het_job_offset"):  # a leader
            out += [j for j in found if j["het_job_id"] == job["job_id"]]
    return out


def _id_set(text: str) -> range:
    """``123-125`` (a HetJobIdSet) as its ids."""
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def records(
    jobs: Sequence[Job], settings: Settings
) -> Iterator[tuple[Job | None, Job, Step | None]]:
    """The rows to print: (job or None when only steps were asked, job, step or None).

    A job is followed by its steps unless ``-X``; when ``-j`` named only some
    steps of a job (``123.batch``), just those steps are printed.
    """
    for record in jobs:
        for job in expand_array(record) if settings.array else (record,):
            chosen = [s for s in settings.jobs if s.matches(job)]
            whole = not chosen or any(s.step is None for s in chosen)
            steps = {s.step for s in chosen if s.step is not None}
            if whole:
                yield job, job, None
            if settings.allocations:
                continue
            for step in job_steps(job):
                if whole or step.id.partition("+")[0] in steps:  # 123.1: all its parts
                    yield None, job, step


def render(jobs: Sequence[Job], now: int, settings: Settings, env: Mapping[str, str]) -> str:
    """sacct's report for the ``History`` reply's ``jobs`` at controller time ``now``."""
    view = View(now, env, units=settings.units, noconvert=settings.noconvert)
    layout = Layout(settings.columns, Printer(settings.parsable, settings.delimiter))
    out = [] if settings.noheader else [layout.header()]
    out += [layout.line(job, step, view) for _, job, step in records(jobs, settings)]
    return "".join(out)


def render_json(
    jobs: Sequence[Job], now: int, settings: Settings, env: Mapping[str, str], argv: Sequence[str]
) -> str:
    """``--json``: each job with its steps."""
    from cli.sacct.jsonrecords import document

    view = View(now, env, units=settings.units, noconvert=settings.noconvert)
    grouped: list[tuple[Job, list[Step]]] = []
    for _, job, step in records(jobs, settings):
        if not grouped or grouped[-1][0] is not job:
            grouped.append((job, []))
        if step is not None:
            grouped[-1][1].append(step)
    return document(grouped, view, [PROG, *argv], _user_name(os.getuid()))


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def sacct(argv: list[str]) -> int:
    """Run sacct with ``argv``; return the exit status.

    A controller error (dbd down, a bad filter) reaches the boundary, which
    prints ``sacct: error: <message>`` and exits 1; disabled accounting is
    said as Slurm says it, without the prefix.
    """
    try:
        settings = parse_settings(argv, os.environ, int(time.time()), os.getuid())
    except Halt as halt:
        return halt.report()
    for text in settings.warnings:
        print(text, file=sys.stderr)
    client = boundary.connect()
    try:
        reply = client.call("History", request(settings))
    except SlurmError as exc:
        if exc.code != ESLURM_DISABLED:
            raise
        print(exc.message, file=sys.stderr)
        return 1
    reply["jobs"] = with_components(client, settings, reply["jobs"])
    if settings.json:
        sys.stdout.write(render_json(reply["jobs"], reply["now"], settings, os.environ, argv))
    else:
        sys.stdout.write(render(reply["jobs"], reply["now"], settings, os.environ))
    return 0
