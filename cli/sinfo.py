"""sinfo: partitions and nodes the way Slurm's sinfo shows them, byte for byte.

The controller is asked for every partition and node; rows are formed
(``cli.nodes.groups``), sorted and laid out (``cli.nodes.fields``, ``columns``) here, so
the grouping that scripts rely on ("one line per partition and state") is
Slurm's own.
"""

from __future__ import annotations

import os
import sys

from cli import boundary
from cli.columns import Bound, Column, Field, line, parse_letters, parse_names
from cli.command import Command, repeat, split_list
from cli.halt import Halt
from cli.nodes import fields, statenames
from cli.nodes.groups import DEFAULT_SORT, NODE_SORT, Grouping, NodeGroup, build, sort_groups
from cli.options import OPTIONAL, REQUIRED, WARNED, Option, OptionTable
from corral.errors import SlurmError
from corral.hostlist import compress

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

PROG = "sinfo"

PARTITION_FORMAT = "partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statecompact:.6 ,nodelist:0"
PARTITION_LONG_FORMAT = (
    "partition:9 ,available:.5 ,time:.10 ,size:.10 ,root:.4 ,oversubscribe:.8 ,"
    "groups:.10 ,nodes:.6 ,statelong:.11 ,nodelist:0"
)
NODE_FORMAT = "nodelist:0 ,nodes:.6 ,partition:.9 ,statecompact:6"
NODE_LONG_FORMAT = (
    "nodelist:0 ,nodes:.6 ,partition:.9 ,statelong:.11 ,cpus:4 ,socketcorethread:.8 ,"
    "memory:.6 ,disk:.8 ,weight:.6 ,features:.8 ,reason:20"
)
SUMMARY_FORMAT = "partition:9 ,available:.5 ,time:.10 ,nodeaiot:.16 ,nodelist:0"
REASON_FORMAT = "reason:20 ,user:9 ,timestamp:19 ,nodelist:0"
REASON_LONG_FORMAT = "reason:20 ,userlong:12 ,timestamp:19 ,statecompact:6 ,nodelist:0"
#: States ``-R`` lists unless ``-t`` says otherwise.
REASON_STATES = "down,fail,drain"
#: sinfo never makes a widened column narrower than this.
MIN_FIELD_WIDTH = 9

USAGE = """\
Usage: sinfo [-adelNRrsv] [-i seconds] [-t states] [-p partition] [-n nodes]
             [-S fields] [-o format] [-O Format] [--usage] [--help] [-V]
"""

HELP = """\
Usage: sinfo [OPTIONS]
  -a, --all                  show all partitions, hidden ones included
  -d, --dead                 only nodes that do not respond
  -e, --exact                group only nodes of identical configuration
  -h, --noheader             print no header line
  -i, --iterate=seconds      repeat the report every so many seconds
  -l, --long                 long report
  -n, --nodes=hostlist       only these nodes
  -N, --Node                 one line per node
  -o, --format=format        layout with %-letters, e.g. "%P %.5a %N"
  -O, --Format=format        layout with field names, e.g. "Partition,NodeList:30"
  -p, --partition=list       only these partitions
  -r, --responding           only nodes that respond
  -R, --list-reasons         why nodes are down, drained or failing
  -s, --summarize            node counts by state only
  -S, --sort=fields          sort keys, e.g. "#P,-t" (the default)
  -t, --states=list          only nodes in these states
  -T, --reservation          the advance reservations
  -v, --verbose              more messages
  -V, --version              print the version and exit

  --help                     show this help
  --usage                    show a short usage summary
"""

#: What the format options' notes say (docs/compatibility.md): a field of a feature
#: Corral lacks (licenses, burst buffers...) prints the value Slurm prints when unset.
_FIELDS_NOTE = "every Slurm field; those of features Corral lacks show Slurm's unset value"
_DUMP_NOTE = (
    "data_parser v0.0.42 only: the node and partition records corral-restd serves "
    "(GET /nodes and /partitions), not Slurm's grouped sinfo records"
)

TABLE = OptionTable(
    [
        Option("all", "a", "all"),
        Option("dead", "d", "dead"),
        Option("exact", "e", "exact"),
        Option("help", "", "help"),
        Option("hide", "", "hide"),
        Option("iterate", "i", "iterate", REQUIRED),
        Option("json", "", "json", OPTIONAL, note=_DUMP_NOTE),
        Option("local", "", "local", note="this cluster only, unless -M names others"),
        Option("clusters", "M", "clusters", REQUIRED),
        Option("clusters", "", "cluster", REQUIRED),
        Option("long", "l", "long"),
        Option("nodes", "n", "nodes", REQUIRED),
        Option("noconvert", "", "noconvert", use=WARNED, note="sizes are shown as they are"),
        Option("noheader", "h", "noheader"),
        Option("Node", "N", "Node"),
        Option("format", "o", "format", REQUIRED, note=_FIELDS_NOTE),
        Option("Format", "O", "Format", REQUIRED, note=_FIELDS_NOTE),
        Option("partition", "p", "partition", REQUIRED),
        Option("responding", "r", "responding"),
        Option("list-reasons", "R", "list-reasons"),
        Option("reservation", "T", "reservation"),
        Option("summarize", "s", "summarize"),
        Option("sort", "S", "sort", REQUIRED),
        Option(
            "states",
            "t",
            "states",
            REQUIRED,
            note="node state names and flags; others are an error",
        ),
        Option("usage", "", "usage"),
        Option("verbose", "v", "verbose", use=WARNED, note="sinfo prints no progress"),
        Option("version", "V", "version"),
        Option("yaml", "", "yaml", OPTIONAL, note=_DUMP_NOTE),
    ],
    prog="sinfo",
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)


class Settings:
    """What the command line and environment asked for."""

    __slots__ = (
        "all",
        "clusters",
        "dead",
        "default_format",
        "dump",
        "exact",
        "fmt",
        "iterate",
        "long",
        "names_format",
        "node_mode",
        "nodes",
        "noheader",
        "partitions",
        "reasons",
        "reservations",
        "responding",
        "sort",
        "states",
        "states_and",
        "summarize",
    )

    def __init__(self) -> None:
        self.clusters: str = ""  # -M: these clusters, each under "CLUSTER: name"
        self.fmt: str | None = None
        self.names_format: bool = False
        self.default_format: bool = False
        self.long: bool = False
        self.node_mode: bool = False
        self.reasons: bool = False
        self.reservations: bool = False
        self.summarize: bool = False
        self.exact: bool = False
        self.dead: bool = False
        self.responding: bool = False
        self.noheader: bool = False
        self.all: bool = False
        self.partitions: list[str] | None = None
        self.nodes: list[str] | None = None
        self.states: list[tuple[int, str]] | None = None
        self.states_and: bool = False
        self.sort: str | None = None
        self.iterate: int = 0
        self.dump: str = ""  # --json or --yaml: restd's records (cli/jsonout.py)


class Layout:
    """A parsed format: prefix, columns with their fields, and the match flags."""

    __slots__ = ("bound", "errors", "flags", "prefix")

    def __init__(
        self,
        prefix: str,
        bound: list[Bound],
        flags: set[str] | None = None,
        errors: list[str] | None = None,
    ) -> None:
        self.prefix = prefix
        self.bound = bound
        self.flags: set[str] = set() if flags is None else flags
        self.errors: list[str] = [] if errors is None else errors


def parse_states(text: str) -> tuple[list[tuple[int, str]], bool]:
    """``-t``: the selected states and whether all must hold (``&``); ``Halt`` if unknown."""
    if text.lower() == "all":
        every = [(base, "base") for base in range(len(statenames.BASE_NAMES))]
        return [*every, (statenames.DRAIN, "drain")], False
    selected = []
    for word in text.replace("&", ",").split(","):
        if not word:
            continue
        found = statenames.filter_word(word)
        if found is None:
            raise Halt(
                1,
                f'{PROG}: error: Bad state string: "{word}"',
                f"{PROG}: error: valid states: {statenames.filter_listing()}",
            )
        selected.append(found)
    return selected, "&" in text


def parse_settings(argv: list[str], env: Mapping[str, str]) -> Settings:
    """Settings from the command line and the SINFO_* environment; ``Halt`` on errors."""
    found, positional = COMMAND.parse(argv)
    settings = Settings()
    settings.sort = env.get("SINFO_SORT")
    if "SINFO_PARTITION" in env:
        settings.partitions = split_list(env["SINFO_PARTITION"])
    settings.all = "SINFO_ALL" in env
    set_a = set_p = False
    for opt, value in found:
        key, text = opt.key, value or ""
        COMMAND.answer(key)
        if key in ("format", "Format"):
            settings.fmt, settings.names_format = text, key == "Format"
        elif key == "all":
            set_a, settings.all, settings.partitions = True, True, None
        elif key == "partition":
            set_p, settings.partitions = True, split_list(text)
        elif key == "nodes":
            settings.nodes = COMMAND.hostlist(text, "nodes")
        elif key == "states":
            settings.states, settings.states_and = parse_states(text)
        elif key == "iterate":
            settings.iterate = int(text) if text.isdigit() else 0
            if settings.iterate <= 0:
                raise Halt(1, f"{PROG}: error: Error: invalid entry for --iterate={text}")
        elif key == "sort":
            settings.sort = text
        elif key == "clusters":
            settings.clusters = text
        elif key in ("json", "yaml"):
            from cli.jsonout import check_parser

            refused = check_parser(PROG, value)
            if refused:
                raise Halt(1, refused)
            settings.dump = key
        else:
            _flag(settings, key)
    if positional:
        sys.stdout.write(USAGE)
        raise Halt(1)
    COMMAND.check_format_and_long(settings.fmt, settings.long)
    if set_a and set_p:
        raise Halt(
            1,
            f"{PROG}: error: Conflicting options, -a and -p, specified. "
            "Please choose one or the other.",
        )
    _default_format(settings, env)
    if settings.reasons and settings.states is None:
        settings.states, settings.states_and = parse_states(REASON_STATES)
    return settings


#: Options that only switch a setting on: option key -> Settings attribute.
_FLAGS = {
    "dead": "dead",
    "exact": "exact",
    "long": "long",
    "Node": "node_mode",
    "noheader": "noheader",
    "responding": "responding",
    "list-reasons": "reasons",
    "reservation": "reservations",
    "summarize": "summarize",
}


def _flag(settings: Settings, key: str) -> None:
    attribute = _FLAGS.get(key)
    if attribute is not None:
        setattr(settings, attribute, True)


def _default_format(settings: Settings, env: Mapping[str, str]) -> None:
    """The format used when neither ``-o`` nor ``-O`` was given."""
    if settings.fmt is not None:
        return
    if not (settings.summarize or settings.node_mode or settings.reasons) and "SINFO_FORMAT" in env:
        settings.fmt = env["SINFO_FORMAT"]
        return
    settings.names_format = True
    settings.default_format = not settings.reasons
    if settings.summarize:
        settings.fmt = SUMMARY_FORMAT
    elif settings.node_mode:
        settings.fmt = NODE_LONG_FORMAT if settings.long else NODE_FORMAT
    elif settings.reasons:
        settings.fmt = REASON_LONG_FORMAT if settings.long else REASON_FORMAT
    else:
        settings.fmt = PARTITION_LONG_FORMAT if settings.long else PARTITION_FORMAT


def build_layout(spec: str, names: bool) -> Layout:
    """The columns of a ``-o`` (letters) or ``-O`` (names) format and their match flags."""
    if names:
        prefix, columns = "", parse_names(spec)
    else:
        prefix, columns = parse_letters(spec)
    table = fields.NAMES if names else fields.LETTERS
    layout = Layout(prefix, [])
    for column in columns:
        found = table.get(column.key.lower() if names else column.key)
        if found is None:
            shown = column.key
            layout.errors.append(f"Invalid node format specification: {shown}")
            literal = column.suffix if names else _literal(column)
            layout.bound.append(Bound(column, None, literal))
            continue
        flag = fields.MATCH_FLAGS.get(found, "")
        if flag:
            layout.flags.add(flag)
        layout.bound.append(Bound(column, found))
    return layout


def _literal(column: Column) -> str:
    width = str(column.width) if column.width else ""
    return f"%{'.' if column.right else ''}{width}{column.key}{column.suffix}"


def _widened(layout: Layout, groups: Sequence[NodeGroup], node_mode: bool) -> list[Bound]:
    """Slurm's default layouts widen PARTITION and (with -N) NODELIST to fit every row."""
    part_width = MIN_FIELD_WIDTH
    node_width = MIN_FIELD_WIDTH
    for group in groups:
        name = str(group.partition["name"])
        part_width = max(part_width, len(name) + (1 if group.partition["is_default"] else 0))
        nodes = compress(str(node["name"]) for node in group.nodes)
        node_width = max(node_width, len(nodes))
    bound = []
    for item in layout.bound:
        column, found = item.column, item.field
        if found in fields.PARTITION_FIELDS:
            column = Column(column.key, part_width, column.right, column.suffix)
        elif node_mode and found in fields.NODE_LIST_FIELDS:
            column = Column(column.key, node_width, column.right, column.suffix)
        bound.append(Bound(column, found, item.literal))
    return bound


def _marked(bound: list[Bound]) -> list[Bound]:
    """Give PARTITION columns of fixed width Slurm's ``*`` placement for the default one."""
    out = []
    for item in bound:
        if item.field is fields.LETTERS["P"] and item.column.width:
            width = item.column.width

            def value(group: NodeGroup, view: Any, width: int = width) -> str:
                name = str(group.partition["name"])
                if not group.partition["is_default"] or len(name) < width:
                    return name + ("*" if group.partition["is_default"] else "")
                return name[: width - 1] + "*"

            out.append(Bound(item.column, Field("PARTITION", value), item.literal))
        else:
            out.append(item)
    return out


def node_filter(settings: Settings) -> Callable[[Mapping[str, Any]], bool]:
    """The ``keep(node)`` test of ``-n``, ``-d``, ``-r`` and ``-t``."""
    wanted = set(settings.nodes) if settings.nodes is not None else None

    def keep(node: Mapping[str, Any]) -> bool:
        if wanted is not None and node["name"] not in wanted:
            return False
        not_responding = "NOT_RESPONDING" in node["state_flags"]
        if settings.dead and not not_responding:
            return False
        if settings.responding and not_responding:
            return False
        if settings.states is None:
            return True
        state = statenames.value(node)
        hits = [statenames.matches(state, int(node["alloc_cpus"]), s) for s in settings.states]
        return all(hits) if settings.states_and else any(hits)

    return keep


def render(
    nodes: Sequence[Mapping[str, Any]],
    partitions: Sequence[Mapping[str, Any]],
    settings: Settings,
    layout: Layout,
) -> str:
    """sinfo's report for NodeInfo and PartitionInfo dicts."""
    how = Grouping(layout.flags, settings.node_mode, settings.reasons, settings.exact)
    groups = build(
        nodes, partitions, how, part_names=settings.partitions, keep=node_filter(settings)
    )
    default_sort = NODE_SORT if settings.node_mode else DEFAULT_SORT
    groups = sort_groups(groups, settings.sort if settings.sort is not None else default_sort)
    bound = layout.bound
    if settings.default_format:
        bound = _widened(layout, groups, settings.node_mode)
    bound = _marked(bound)
    lines = [] if settings.noheader else [line(layout.prefix, bound, None, None)]
    lines.extend(line(layout.prefix, bound, group, None) for group in groups)
    return "".join(text + "\n" for text in lines)


def report(client: Any, settings: Settings, layout: Layout) -> int:
    """Fetch and print one report; return its exit status."""
    try:
        request = {"names": [], "all_partitions": settings.all}
        partitions = client.call("Partitions", request)["partitions"]
    except SlurmError as exc:
        print(f"slurm_load_partitions: {exc}", file=sys.stderr)
        return 1
    single = settings.nodes if settings.nodes is not None and len(settings.nodes) == 1 else []
    try:
        nodes = client.call("Nodes", {"names": single})["nodes"]
    except SlurmError as exc:
        print(f"slurm_load_node: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(render(nodes, partitions, settings, layout))
    return 0


def report_records(client: Any, settings: Settings, argv: Sequence[str]) -> int:
    """``--json``/``--yaml``: the nodes and partitions -n and -p select, as corral-restd
    serves them (``GET /slurm/v0.0.42/nodes`` and ``/partitions``), in data_parser's
    envelope."""
    from cli.jsonout import envelope, messages, render
    from corral.clientconf import client_settings
    from restd.cluster import node, partition

    try:
        request = {"names": settings.partitions or [], "all_partitions": settings.all}
        partitions = client.call("Partitions", request)["partitions"]
        nodes = client.call("Nodes", {"names": []})["nodes"]
    except SlurmError as exc:
        print(f"slurm_load_partitions: {exc}", file=sys.stderr)
        return 1
    if settings.nodes is not None:
        wanted = set(settings.nodes)
        nodes = [n for n in nodes if n["name"] in wanted]
    payload = {
        "nodes": [node(info) for info in messages("NodeInfo", nodes)],
        "partitions": [partition(info) for info in messages("PartitionInfo", partitions)],
    }
    cluster = client_settings().cluster_name or ""
    sys.stdout.write(render(envelope(payload, [PROG, *argv], cluster), settings.dump == "yaml"))
    return 0


def sinfo(argv: list[str]) -> int:
    """Run sinfo with ``argv``; return the exit status."""
    try:
        settings = parse_settings(argv, os.environ)
    except Halt as halt:
        return halt.report()
    layout = build_layout(settings.fmt or "", settings.names_format)
    for text in layout.errors:
        print(text, file=sys.stderr)
    from cli.clusters import each, targets

    found = targets(settings.clusters or os.environ.get("SLURM_CLUSTERS", ""))
    if settings.dump:
        if len(found) > 1:
            raise boundary.UsageError(f"--{settings.dump} shows one cluster: name one with -M")
        return report_records(found[0][1], settings, argv)
    stamp = not settings.noheader and bool(settings.iterate or settings.long)
    if settings.reservations:
        return repeat(
            lambda: each(found, lambda c: report_reservations(c, settings)),
            settings.iterate,
            stamp,
        )
    return repeat(
        lambda: each(found, lambda c: report(c, settings, layout)), settings.iterate, stamp
    )


def report_reservations(client: Any, settings: Settings) -> int:
    """``sinfo -T``: the reservations, or Slurm's line when there are none."""
    from cli.reservations import sinfo_table

    try:
        reply = client.call("Reservations", {})
    except SlurmError as exc:
        print(f"slurm_load_reservations: {exc}", file=sys.stderr)
        return 1
    if not reply["reservations"]:
        print("No reservations in the system")
        return 0
    sys.stdout.write(sinfo_table(reply["reservations"], not settings.noheader))
    return 0


def main() -> None:
    boundary.run(PROG, sinfo)
