"""squeue: list jobs the way Slurm's squeue does, byte for byte.

Options and environment are read as Slurm reads them, the controller is asked
once for the jobs matching the filters, and the rows are sorted and laid out
here (``cli.jobs.order``, ``cli.jobs.fields``, ``columns``), so what scripts parse is
exactly what Slurm would have printed.
"""

from __future__ import annotations

import gc
import os
import sys

from cli import boundary
from cli.columns import Bound, line, lines, parse_letters, parse_names
from cli.command import Command, known_user, repeat, split_list
from cli.halt import Halt
from cli.jobs import statenames
from cli.jobs.fields import LETTERS, NAMES, JobView
from cli.jobs.ids import InvalidJobId, squeue_job_id
from cli.jobs.order import (
    DEFAULT_SORT,
    START_SORT,
    InvalidSort,
    parse_sort,
    sort_jobs,
    sort_reads,
)
from cli.options import OPTIONAL, REQUIRED, WARNED, Option, OptionTable
from corral.errors import ESLURM_INVALID_JOB_ID, SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from corral.client import Client

PROG = "squeue"

DEFAULT_FORMAT = (
    "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,statecompact:.2 ,"
    "timeused:.10 ,numnodes:.6 ,reasonlist:0"
)
LONG_FORMAT = (
    "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,state:.8 ,"
    "timeused:.10 ,timelimit:.9 ,numnodes:.6 ,reasonlist:0"
)
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"

#: What squeue lists without ``-t``, named ids or not: a job that ended stays in the
#: controller until MinJobAge but only ``-t all`` (or its state) shows it, so scripts
#: that poll ``squeue -h -j ID`` until it prints nothing see the end.
DEFAULT_STATES = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING")

USAGE = """\
Usage: squeue [-A account] [-i seconds] [-j jobid] [-n name] [-o format]
              [-O format] [-p partitions] [-q qos] [-S fields] [--start]
              [-t states] [-u user_name] [--me] [-w nodes] [--usage] [-ahlrvV]
"""

HELP = """\
Usage: squeue [OPTIONS]
  -A, --account=list        show only jobs of these accounts
  -a, --all                 also show jobs in hidden partitions
  -h, --noheader            print no header line
  -i, --iterate=seconds     repeat the report every so many seconds
  -j, --jobs=list           show only these jobs (123, 123_4, 123_[1-3])
  -L, --licenses=list       show only jobs asking for these licenses
  -l, --long                long report
  -n, --name=list           show only jobs with these names
  -o, --format=format       layout with %-letters, e.g. "%.18i %.9P %R"
  -O, --Format=format       layout with field names, e.g. "JobID,State:10"
  -p, --partition=list      show only jobs in these partitions
  -q, --qos=list            show only jobs with these QOS
  -r, --array               one line per job array element
  -S, --sort=fields         sort keys, e.g. "P,t,-p" (the default)
      --start               expected start times of pending jobs
  -t, --states=list         show jobs in these states ("all" for every state)
  -u, --user=list           show only jobs of these users
      --me                  show only my jobs
  -v, --verbose             more messages
  -V, --version             print the version and exit
  -w, --nodelist=hostlist   show only jobs on these nodes

  --help                    show this help
  --usage                   show a short usage summary
"""

#: What the format options' notes say (docs/compatibility.md): a field of a feature
#: Corral lacks (licenses, burst buffers...) prints the value Slurm prints when unset.
_FIELDS_NOTE = "every Slurm field; those of features Corral lacks show Slurm's unset value"
_DUMP_NOTE = "data_parser v0.0.42 only: the JOB_INFO records corral-restd serves"
_STATES_NOTE = "job state names and abbreviations, or all; others are an error"

TABLE = OptionTable(
    [
        Option("account", "A", "account", REQUIRED),
        Option("account", "U", "accounts", REQUIRED),
        Option("all", "a", "all"),
        Option("array", "r", "array"),
        Option("Format", "O", "Format", REQUIRED, note=_FIELDS_NOTE),
        Option("format", "o", "format", REQUIRED, note=_FIELDS_NOTE),
        Option("help", "", "help"),
        Option("hide", "", "hide"),
        Option("iterate", "i", "iterate", REQUIRED),
        Option("jobs", "j", "jobs", OPTIONAL),
        Option("json", "", "json", OPTIONAL, note=_DUMP_NOTE),
        Option("jobs", "", "job", OPTIONAL),
        Option("local", "", "local", note="this cluster only, unless -M names others"),
        Option("clusters", "M", "clusters", REQUIRED),
        Option("clusters", "", "cluster", REQUIRED),
        Option("licenses", "L", "licenses", REQUIRED),
        Option("licenses", "", "license", REQUIRED),
        Option("long", "l", "long"),
        Option("me", "", "me"),
        Option("name", "n", "name", REQUIRED),
        Option("noconvert", "", "noconvert", use=WARNED, note="sizes are shown as they are"),
        Option("nodelist", "w", "nodelist", REQUIRED),
        Option("nodelist", "", "nodes", REQUIRED),
        Option("nodelist", "", "node", REQUIRED),
        Option("noheader", "h", "noheader"),
        Option("partition", "p", "partition", REQUIRED),
        Option("partition", "", "partitions", REQUIRED),
        Option("qos", "q", "qos", REQUIRED),
        Option(
            "sort",
            "S",
            "sort",
            REQUIRED,
            note="any format letter or field, +/- for the order; others are an error",
        ),
        Option("start", "", "start"),
        Option("states", "t", "states", REQUIRED, note=_STATES_NOTE),
        Option("steps", "s", "steps", OPTIONAL),
        Option("states", "", "state", REQUIRED, note=_STATES_NOTE),
        Option("usage", "", "usage"),
        Option("user", "u", "user", REQUIRED),
        Option("user", "", "users", REQUIRED),
        Option("verbose", "v", "verbose", use=WARNED, note="squeue prints no progress"),
        Option("version", "V", "version"),
        Option("yaml", "", "yaml", OPTIONAL, note=_DUMP_NOTE),
    ],
    prog="squeue",
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)


class Settings:
    """What the command line and environment asked for."""

    __slots__ = (
        "accounts",
        "all",
        "array",
        "clusters",
        "dump",
        "fmt",
        "fmt_long",
        "iterate",
        "job_ids",
        "licenses",
        "long",
        "names",
        "nodes",
        "noheader",
        "partitions",
        "qos",
        "sort",
        "start",
        "states",
        "steps",
        "users",
        "warnings",
    )

    def __init__(self) -> None:
        self.job_ids: list[str] = []
        self.users: list[str] | None = None
        self.partitions: list[str] = []
        self.states: list[str] = []
        self.names: list[str] = []
        self.nodes: list[str] = []
        self.accounts: list[str] = []
        self.qos: list[str] = []
        self.licenses: list[str] = []  # -L: jobs asking for any of these licenses
        self.fmt: str | None = None
        self.fmt_long: str | None = None
        self.long: bool = False
        self.start: bool = False
        self.array: bool = False
        self.noheader: bool = False
        self.sort: str | None = None
        self.iterate: int = 0
        self.warnings: list[str] = []
        self.steps: list[str] | None = None  # -s: list steps (these, or all)
        self.all: bool = False  # -a: jobs in hidden partitions too
        self.dump: str = ""  # --json or --yaml: restd's records (cli/jsonout.py)
        self.clusters: str = ""  # -M: these clusters' queues, each under "CLUSTER: name"


class Layout:
    """A parsed format: the literal prefix and the bound columns."""

    __slots__ = ("bound", "errors", "prefix")

    def __init__(self, prefix: str, bound: list[Bound], errors: list[str]) -> None:
        self.prefix = prefix
        self.bound = bound
        self.errors = errors


def parse_states(text: str) -> list[str]:
    """``-t``: long state names, or ``["ALL"]``; raise ``Halt`` on an unknown name."""
    if text.lower() == "all":
        return ["ALL"]
    states = []
    for item in split_list(text):
        name = statenames.parse_state(item)
        if name is None:
            listing = ",".join(statenames.state_listing())
            raise Halt(
                1,
                f"{PROG}: error: Invalid job state specified: {item}",
                f"{PROG}: error: Valid job states include: {listing}\n",
            )
        states.append(name)
    return states


def check_users(text: str) -> tuple[list[str], list[str]]:
    """Known users of a ``-u`` list and the error lines for unknown ones."""
    users, errors = [], []
    for item in split_list(text):
        if known_user(item):
            users.append(item)
        else:
            errors.append(f"{PROG}: error: Invalid user: {item}\n")
    return users, errors


def parse_settings(argv: list[str], env: Mapping[str, str]) -> Settings:
    """Settings from the command line, then the SQUEUE_* environment; ``Halt`` on errors."""
    found, positional = COMMAND.parse(argv)
    settings = Settings()
    jobs_flag = False
    override_env = False
    if "SQUEUE_ARRAY" in env:
        settings.array = True
    settings.sort = env.get("SQUEUE_SORT")
    for opt, value in found:
        key = opt.key
        COMMAND.answer(key)
        if key in ("Format", "format"):
            other = settings.fmt if key == "Format" else settings.fmt_long
            if other is not None:
                first, second = ("-O (--Format)", "-o (--format)")
                if key == "format":
                    first, second = second, first
                raise Halt(1, f"{PROG}: error: {first} is incompatible with {second}")
            if key == "Format":
                settings.fmt_long = value
            else:
                settings.fmt = value
            override_env = True
        elif key == "jobs":
            jobs_flag = True
            if value is not None:
                settings.job_ids = _job_ids(value)
        elif key == "long":
            settings.long = True
            override_env = True
        elif key == "start":
            settings.start = True
            override_env = True
        elif key == "steps":
            settings.steps = split_list(value) if value else []
        elif key in ("json", "yaml"):
            from cli.jsonout import check_parser

            refused = check_parser(PROG, value)
            if refused:
                raise Halt(1, refused)
            settings.dump = key
        else:
            _apply(settings, key, value or "")
    COMMAND.check_format_and_long(settings.fmt, settings.long)
    if not override_env:
        if "SQUEUE_FORMAT" in env:
            settings.fmt = env["SQUEUE_FORMAT"]
        elif "SQUEUE_FORMAT2" in env:
            settings.fmt_long = env["SQUEUE_FORMAT2"]
    if positional and jobs_flag:
        settings.job_ids = _job_ids(positional.pop(0))
    if positional:
        sys.stdout.write(USAGE)
        raise Halt(1, f"{PROG}: error: Unrecognized option: {positional[0]}")
    _apply_env(settings, env)
    if settings.start:
        if settings.fmt is None:
            settings.fmt = START_FORMAT
        if settings.sort is None:
            settings.sort = START_SORT
        if not settings.states:
            settings.states = ["PENDING"]
    return settings


def _job_ids(text: str) -> list[str]:
    try:
        return [squeue_job_id(item) for item in split_list(text)]
    except InvalidJobId as exc:
        raise Halt(1, f"{PROG}: error: Invalid job id: {exc}") from None


def _apply(settings: Settings, key: str, value: str) -> None:
    """Record one filter or flag option."""
    if key == "account":
        settings.accounts = split_list(value)
    elif key == "array":
        settings.array = True
    elif key == "clusters":
        settings.clusters = value
    elif key == "all":
        settings.all = True
    elif key == "iterate":
        try:
            settings.iterate = int(value)
        except ValueError:
            settings.iterate = 0
        if settings.iterate <= 0:
            raise Halt(1, f"{PROG}: error: --iterate={value}\n")
    elif key == "licenses":
        settings.licenses = split_list(value)
    elif key == "me":
        settings.users = [str(os.geteuid())]
    elif key == "name":
        settings.names = split_list(value)
    elif key == "nodelist":
        settings.nodes = COMMAND.hostlist(value, "nodelist")
    elif key == "noheader":
        settings.noheader = True
    elif key == "partition":
        settings.partitions = split_list(value)
    elif key == "qos":
        settings.qos = split_list(value)
    elif key == "sort":
        settings.sort = value
    elif key == "states":
        settings.states = parse_states(value)
    elif key == "user":
        settings.users, errors = check_users(value)
        settings.warnings.extend(errors)


def _apply_env(settings: Settings, env: Mapping[str, str]) -> None:
    """The SQUEUE_* filters, each used only when its option was not given."""
    if "SQUEUE_ALL" in env:
        settings.all = True
    if not settings.accounts and "SQUEUE_ACCOUNT" in env:
        settings.accounts = split_list(env["SQUEUE_ACCOUNT"])
    if not settings.names and "SQUEUE_NAMES" in env:
        settings.names = split_list(env["SQUEUE_NAMES"])
    if not settings.partitions and "SQUEUE_PARTITION" in env:
        settings.partitions = split_list(env["SQUEUE_PARTITION"])
    if not settings.licenses and "SQUEUE_LICENSES" in env:
        settings.licenses = split_list(env["SQUEUE_LICENSES"])
    if not settings.qos and "SQUEUE_QOS" in env:
        settings.qos = split_list(env["SQUEUE_QOS"])
    if not settings.states and "SQUEUE_STATES" in env:
        settings.states = parse_states(env["SQUEUE_STATES"])
    if settings.users is None and "SQUEUE_USERS" in env:
        settings.users, errors = check_users(env["SQUEUE_USERS"])
        settings.warnings.extend(errors)


def build_layout(settings: Settings) -> Layout:
    """The columns to print: ``-o``, else ``-O``, else the default or ``-l`` layout."""
    if settings.fmt is not None:
        return letters_layout(settings.fmt)
    if settings.fmt_long is not None:
        return names_layout(settings.fmt_long)
    return names_layout(LONG_FORMAT if settings.long else DEFAULT_FORMAT)


def letters_layout(spec: str) -> Layout:
    """A ``-o`` layout; ``%all`` is every known letter separated by ``|``."""
    if spec.lower() == "%all":
        letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
        letters += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
        known = [letter for letter in letters if letter in LETTERS]
        spec = "|".join(f"%{letter}" for letter in known)
    prefix, columns = parse_letters(spec)
    bound, errors = [], []
    for column in columns:
        field = LETTERS.get(column.key)
        if field is None:
            token = f"{'.' if column.right else ''}{column.width or ''}{column.key}"
            errors.append(f"{PROG}: error: Invalid job format specification: {column.key}")
            bound.append(Bound(column, None, f"%{token}{column.suffix}"))
        else:
            bound.append(Bound(column, field))
    return Layout(prefix, bound, errors)


def names_layout(spec: str) -> Layout:
    """A ``-O`` layout; names match case-insensitively."""
    bound, errors = [], []
    for column in parse_names(spec):
        field = NAMES.get(column.key.lower())
        if field is None:
            errors.append(f"{PROG}: error: Invalid job format specification: {column.key}")
            bound.append(Bound(column, None, column.suffix))
        else:
            bound.append(Bound(column, field))
    return Layout("", bound, errors)


def render(
    jobs: Sequence[Mapping[str, Any]],
    now: int,
    layout: Layout,
    *,
    sort: str = DEFAULT_SORT,
    header: bool = True,
    env: Mapping[str, str] | None = None,
) -> str:
    """squeue's report for ``jobs`` (JobInfo dicts) at controller time ``now``."""
    view = JobView(now, env if env is not None else {})
    rows = lines(layout.prefix, layout.bound, sort_jobs(list(jobs), sort, now), view)
    if header:
        rows.insert(0, line(layout.prefix, layout.bound, None, view))
    rows.append("")
    return "\n".join(rows)


def job_fields(layout: Layout, sort: str) -> list[str]:
    """The JobInfo fields that printing ``layout`` sorted by ``sort`` reads.

    Decoding dominates a long listing, so squeue asks the controller for these
    alone (``JobsRequest.fields``); the others decode to their defaults.
    """
    reads = sort_reads(sort)
    for item in layout.bound:
        if item.field is not None:
            reads.update(item.field.reads)
    return sorted(reads)


def request(settings: Settings, fields: Sequence[str]) -> dict[str, Any]:
    """The ``Jobs`` request for these settings, for ``fields`` only (all when empty)."""
    return {
        "filter": {
            "job_ids": settings.job_ids,
            "users": settings.users or [],
            "partitions": settings.partitions,
            "states": settings.states or list(DEFAULT_STATES),
            "names": settings.names,
            "nodes": settings.nodes,
            "accounts": settings.accounts,
            "qos": settings.qos,
        },
        "expand_arrays": settings.array,
        "detail": False,
        "fields": list(fields),
        "all_partitions": settings.all,
    }


def report(client: Any, settings: Settings, layout: Layout, sort: str) -> int:
    """Fetch and print one report; return its exit status."""
    header = not settings.noheader
    if settings.users == []:
        sys.stdout.write(render([], 0, layout, sort=sort, header=header))
        return 0
    fields = job_fields(layout, sort)
    if settings.licenses and fields and "licenses" not in fields:
        fields.append("licenses")
    # The records are decoded with these fields alone (``codec.decode``'s ``narrow``).
    narrow = (("JobInfo", tuple(fields)),) if fields else ()
    try:
        reply = client.call("Jobs", request(settings, fields), narrow=narrow)
    except SlurmError as exc:
        if exc.code == ESLURM_INVALID_JOB_ID and len(settings.job_ids) > 1:
            sys.stdout.write(render([], 0, layout, sort=sort, header=header))
            return 0
        print(f"slurm_load_jobs error: {exc}", file=sys.stderr)
        return 1
    jobs = reply["jobs"]
    if settings.licenses:
        jobs = [job for job in jobs if asks_for(job.get("licenses") or "", settings.licenses)]
    sys.stdout.write(render(jobs, reply["now"], layout, sort=sort, header=header, env=os.environ))
    return 0


def report_records(client: Any, settings: Settings, argv: Sequence[str]) -> int:
    """``--json``/``--yaml``: the selected jobs as ``GET /slurm/v0.0.42/jobs`` lists
    them (restd's JOB_INFO records), in data_parser's envelope."""
    from cli.jsonout import envelope, messages, render
    from corral.clientconf import client_settings
    from restd.jobs import job_info

    try:
        reply = client.call("Jobs", request(settings, []))
    except SlurmError as exc:
        print(f"slurm_load_jobs error: {exc}", file=sys.stderr)
        return 1
    payload = {
        "jobs": [job_info(job) for job in messages("JobInfo", reply["jobs"])],
        "last_backfill": {"set": False, "infinite": False, "number": 0},
        "last_update": {"set": True, "infinite": False, "number": int(reply["last_update"])},
    }
    cluster = client_settings().cluster_name or ""
    document = envelope(payload, [PROG, *argv], cluster)
    sys.stdout.write(render(document, settings.dump == "yaml"))
    return 0


def asks_for(licenses: str, names: Sequence[str]) -> bool:
    """Whether a job's ``licenses`` (``fluent:2,ansys:1``) name any of ``names``
    (squeue -L: "jobs requesting or using one or more of the named licenses")."""
    return any(item.partition(":")[0] in names for item in licenses.split(",") if item)


def report_steps(client: Any, settings: Settings) -> int:
    """``squeue -s``: the running steps of the jobs the filters select."""
    from cli.jobs import steps

    query = request(settings, steps.FIELDS)
    query["filter"]["states"] = ["RUNNING"]
    try:
        reply = client.call("Jobs", query)
    except SlurmError as exc:
        print(f"slurm_load_job_steps error: {exc}", file=sys.stderr)
        return 1
    chosen = steps.rows(reply["jobs"], int(reply["now"]), settings.steps or ())
    sys.stdout.write(
        steps.render(chosen, settings.fmt or steps.DEFAULT_FORMAT, not settings.noheader)
    )
    return 0


def squeue(argv: list[str]) -> int:
    """Run squeue with ``argv``; return the exit status."""
    try:
        settings = parse_settings(argv, os.environ)
        sort = settings.sort if settings.sort is not None else DEFAULT_SORT
        try:
            parse_sort(sort)
        except InvalidSort as exc:
            raise Halt(1, f"{PROG}: error: Invalid sort specification: {exc}") from None
        layout = build_layout(settings)
    except Halt as halt:
        return halt.report()
    for text in (*settings.warnings, *layout.errors):
        print(text, file=sys.stderr)
    from cli.clusters import each

    targets = _clusters(settings)
    if settings.dump:
        return report_records(targets[0][1], settings, argv)

    if settings.steps is not None:
        stamp = not settings.noheader and bool(settings.iterate or settings.long)
        return repeat(
            lambda: each(targets, lambda c: report_steps(c, settings)), settings.iterate, stamp
        )

    def once(client: Client) -> int:
        # A report is tens of thousands of new, acyclic dicts and lists, which the
        # cyclic collector would scan again and again as they pile up (~10 ms for
        # 10,000 jobs); reference counting frees them all when the report is done.
        gc.disable()
        try:
            return report(client, settings, layout, sort)
        finally:
            gc.enable()

    stamp = not settings.noheader and bool(settings.iterate or settings.long)
    return repeat(lambda: each(targets, once), settings.iterate, stamp)


def _clusters(settings: Settings) -> list[tuple[str, Client]]:
    """The controllers to ask: this cluster's, or each -M names (SLURM_CLUSTERS too)."""
    from cli.clusters import targets

    found = targets(settings.clusters or os.environ.get("SLURM_CLUSTERS", ""))
    if settings.dump and len(found) > 1:
        raise boundary.UsageError(f"--{settings.dump} shows one cluster: name one with -M")
    return found


def main() -> None:
    boundary.run(PROG, squeue)
