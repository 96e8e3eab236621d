"""gres.conf, read the way Slurm reads it (gres.conf(5)).

gres.conf sits beside slurm.conf and describes each node's generic resources
in more detail than slurm.conf's ``Gres=``: the device files (``File=``, with
hostlist-style ranges such as ``/dev/nvidia[0-3]``, or ``MultipleFiles=`` for
the several files of one MIG device), the ``Cores=`` each device is close to,
the ``Links=`` between GPUs, a ``Type``, a ``Count`` and ``Flags``. A line
starting ``NodeName=<hostlist>`` applies to those nodes only, any other line
to every node. ``AutoDetect=`` on a line of its own sets the default for
every node; beside ``NodeName=`` it sets those nodes' own.

The syntax is slurm.conf's (``corral.confsyntax``): case-insensitive keys,
``#`` comments, ``\\`` continuations, ``Include``. Unlike Slurm, which logs and
skips much of what it cannot use, every problem here is a ``ConfigError``
naming the file and line: an unknown key, a Name not in GresTypes, a Count
that disagrees with File, a bad range, bad Cores or Links, File with
MultipleFiles, an unknown AutoDetect or Flags value, and the per-node rules
slurmd enforces (File or Type on some records of a name but not others,
duplicate records, duplicate device files, a Links list whose length is not
the node's number of devices of that name).

``GresConf.devices_for(node)`` resolves one node's devices (one per file, the
``mps``/``shard`` counts spread over the GPUs as Slurm spreads them), and
``cross_check`` compares them with the node's slurm.conf ``Gres=`` in the
words slurmctld uses when it drains a node whose GRES fall short.

Why this module is over 500 lines: it is the one model of gres.conf: its
line kinds, device ranges and MIG files, Cores and Links, AutoDetect, and the
checks against slurm.conf's ``Gres=`` that make a wrong file fail at start-up.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from corral import gres, hostlist
from corral.confsyntax import NOWHERE, ConfigError, Reader, Where, read_text

__all__ = [
    "AUTODETECT",
    "ENV_FLAGS",
    "FLAGS",
    "GLOBAL_FLAGS",
    "SHARED",
    "AutoDetectRule",
    "CrossCheck",
    "GresConf",
    "GresDevice",
    "GresRecord",
    "cross_check",
    "format_ranges",
    "load",
    "parse",
]

#: AutoDetect values (gres.conf(5)); ``off`` turns a global default off for some nodes.
AUTODETECT = ("nvml", "rsmi", "oneapi", "nrt", "nvidia", "off")
#: Flags words, lower case -> the spelling gres.conf(5) uses.
FLAGS = {
    word.lower(): word
    for word in (
        "CountOnly",
        "explicit",
        "one_sharing",
        "all_sharing",
        "nvidia_gpu_env",
        "amd_gpu_env",
        "intel_gpu_env",
        "opencl_env",
        "no_gpu_env",
    )
}
#: The flags that choose a GPU's environment variables.
ENV_FLAGS = frozenset({"nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env"})
#: Flags that, set on one record of a name, hold for that name on every node.
GLOBAL_FLAGS = frozenset({"CountOnly", "explicit", "one_sharing", "all_sharing"})
#: The GRES that share a GPU: their Count is spread over the node's gres/gpu devices.
SHARED = ("mps", "shard")
#: The environment flag AutoDetect implies when a GPU record sets none.
_AUTODETECT_ENV = {
    "nvml": "nvidia_gpu_env",
    "nvidia": "nvidia_gpu_env",
    "rsmi": "amd_gpu_env",
    "oneapi": "intel_gpu_env",
}
#: Largest value of one Links entry (Slurm's GRES_MAX_LINK).
MAX_LINK = 1023
#: Largest core index Cores= may name (Slurm allows 65535 CPUs per node).
MAX_CORE = 65535
#: Counts from here up are Slurm's NO_VAL64/INFINITE64, never a real count.
NO_VAL64 = 0xFFFFFFFFFFFFFFFE

# Keys of a gres.conf line, lower case -> canonical. Files, CPUs and Link are
# Slurm's older spellings of File, Cores and Links.
_KEYS = {
    key.lower(): key
    for key in (
        "AutoDetect",
        "Count",
        "CPUs",
        "Cores",
        "File",
        "Files",
        "Flags",
        "Link",
        "Links",
        "MultipleFiles",
        "Name",
        "NodeName",
        "Type",
    )
}


@dataclass(frozen=True, slots=True)
class GresRecord:
    """One ``Name=`` line of gres.conf, values checked and expanded.

    ``files`` are the device files (``File=`` or ``MultipleFiles=``) one per
    name; with ``multiple_files`` they are all one device. ``count`` is the
    line's Count, by default the number of files (1 for MultipleFiles), else 1.
    ``cores`` is None when the line says nothing (any core), ``links`` None
    without ``Links=``. ``flags`` are the words the line writes, in gres.conf(5)'s
    spelling. ``nodes`` is None for a line without NodeName (every node).
    """

    name: str
    type: str = ""
    files: tuple[str, ...] = ()
    multiple_files: bool = False
    count: int = 1
    cores: tuple[int, ...] | None = None
    links: tuple[int, ...] | None = None
    flags: frozenset[str] = frozenset()
    nodes: frozenset[str] | None = None
    nodes_expr: str = ""
    where: Where = NOWHERE

    def applies_to(self, node: str) -> bool:
        return self.nodes is None or node in self.nodes

    @property
    def shared(self) -> bool:
        """Whether this is a GRES that shares GPUs (mps, shard)."""
        return self.name.lower() in SHARED

    @property
    def devices(self) -> int:
        """How many devices the line describes: its files, or 1 for MultipleFiles."""
        return 1 if self.multiple_files else len(self.files)


@dataclass(frozen=True, slots=True)
class AutoDetectRule:
    """An ``AutoDetect=`` setting: for ``nodes``, or (None) the default for every node."""

    value: str
    nodes: frozenset[str] | None = None
    nodes_expr: str = ""
    where: Where = NOWHERE


@dataclass(frozen=True, slots=True)
class GresDevice:
    """One of a node's GRES devices as gres.conf describes it.

    ``files`` holds the device's file (several for a MIG device, none for a
    count-only record); ``count`` is what the device provides: 1 for a GPU, a
    share of the line's Count for mps and shard, the whole Count for a
    count-only record. ``index`` numbers the node's devices of one name from 0.
    ``flags`` are in effect: the line's own, inherited from the line above it
    (same name and type), implied by AutoDetect, or set for the name elsewhere.
    """

    name: str
    type: str
    files: tuple[str, ...]
    count: int
    cores: tuple[int, ...] | None
    links: tuple[int, ...] | None
    flags: frozenset[str]
    index: int
    where: Where


@dataclass(frozen=True, slots=True)
class CrossCheck:
    """What a node's gres.conf devices and its slurm.conf ``Gres=`` disagree on.

    ``reasons`` are slurmctld's reasons to drain the node, in the order it
    tests them (it keeps the first: ``reason``); ``warnings`` note devices
    gres.conf has beyond what slurm.conf configures, which Slurm ignores.
    """

    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def reason(self) -> str | None:
        return self.reasons[0] if self.reasons else None


@dataclass(frozen=True, slots=True)
class GresConf:
    """A whole gres.conf: its records and AutoDetect settings, in file order."""

    path: str
    records: tuple[GresRecord, ...] = ()
    autodetect: str | None = None
    node_autodetect: tuple[AutoDetectRule, ...] = ()
    warnings: tuple[str, ...] = ()

    def records_for(self, node: str) -> tuple[GresRecord, ...]:
        """The records that apply to ``node``, in file order."""
        return tuple(record for record in self.records if record.applies_to(node))

    def autodetect_for(self, node: str) -> str | None:
        """``node``'s AutoDetect: its own setting, else the default; None when unset."""
        for rule in self.node_autodetect:
            if rule.nodes is not None and node in rule.nodes:
                return rule.value
        return self.autodetect

    def devices_for(self, node: str) -> tuple[GresDevice, ...]:
        """``node``'s devices, in file order. ConfigError if its records break a
        per-node rule (``parse`` checks the nodes it is given, or all named ones)."""
        try:
            return _resolve(
                self.records_for(node),
                self.autodetect_for(node),
                _global_flags(self.records),
                f"node {node}",
            )
        except _NodeError as problem:
            raise ConfigError(problem.path, problem.line, problem.message) from None


# ------------------------------------------------------------------ reading
def parse(
    text: str,
    path: str,
    *,
    gres_types: Iterable[str] | None = None,
    nodes: Iterable[str] | None = None,
    cluster_name: str | None = None,
) -> GresConf:
    """Parse gres.conf ``text``; ``path`` names it in messages and anchors Include.

    ``gres_types`` is slurm.conf's GresTypes (a Name outside it is an error;
    None checks nothing). The per-node rules are checked for ``nodes`` (say,
    slurm.conf's nodes), or when None for every node gres.conf names and for
    the nodes it does not (those only the lines without NodeName apply to).
    ``cluster_name`` is ``%c`` in Include.
    """
    types = None if gres_types is None else tuple(gres_types)
    reader = _Reader(None if types is None else {t.lower() for t in types}, cluster_name)
    reader.feed(text, path, (os.path.abspath(path),))
    conf = GresConf(
        path=path,
        records=tuple(reader.records),
        autodetect=reader.autodetect,
        node_autodetect=tuple(reader.node_autodetect),
        warnings=tuple(reader.warnings),
    )
    _check_nodes(conf, nodes)
    return conf


def load(
    path: str,
    *,
    gres_types: Iterable[str] | None = None,
    nodes: Iterable[str] | None = None,
    cluster_name: str | None = None,
) -> GresConf:
    """Read and parse the gres.conf at ``path`` (see ``parse``)."""
    text = read_text(path, (path, None), "")
    return parse(text, path, gres_types=gres_types, nodes=nodes, cluster_name=cluster_name)


class _Reader(Reader):
    """Collects gres.conf's records and AutoDetect settings, one line at a time."""

    def __init__(self, gres_types: set[str] | None, cluster: str | None) -> None:
        self.gres_types = gres_types
        self.cluster = cluster
        self.records: list[GresRecord] = []
        self.autodetect: str | None = None
        self.node_autodetect: list[AutoDetectRule] = []
        self.node_values: dict[str, str] = {}
        self.warnings: list[str] = []

    def cluster_name(self) -> str | None:
        return self.cluster

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        if not found:
            return
        keys: dict[str, str] = {}
        for key, value in found:
            canonical = _KEYS.get(key.lower())
            if canonical is None:
                raise ConfigError(*where, f"Parsing error at unrecognized key: {key}")
            keys[canonical] = value
        node_expr = keys.get("NodeName")
        nodes = None if node_expr is None else frozenset(_hosts(node_expr, where))
        if "AutoDetect" in keys:
            # Slurm reads a line by its first key: after Name=, AutoDetect= is in-line.
            inline = "Name" in keys and _KEYS[found[0][0].lower()] != "AutoDetect"
            self._autodetect(keys["AutoDetect"], nodes, node_expr or "", where, inline)
        if "Name" not in keys:
            if "AutoDetect" not in keys:
                raise ConfigError(*where, "Invalid GRES data, no type name")
            return
        self.records.append(self._record(keys, nodes, node_expr or "", where))

    def _autodetect(
        self,
        value: str,
        nodes: frozenset[str] | None,
        node_expr: str,
        where: Where,
        inline: bool,
    ) -> None:
        """A node-local AutoDetect, the default (alone or first on its line), or an
        in-line one without NodeName, which Slurm ignores with an error."""
        lowered = value.lower()
        if lowered not in AUTODETECT:
            raise ConfigError(*where, f"unknown autodetect flag '{value}'")
        note = f"{where[0]}:{where[1]}: "
        if nodes is not None:
            for node in sorted(nodes):
                if self.node_values.setdefault(node, lowered) != lowered:
                    raise ConfigError(
                        *where,
                        "duplicate node-local AutoDetect specification does not match the first",
                    )
            self.node_autodetect.append(AutoDetectRule(lowered, nodes, node_expr, where))
        elif inline:
            self.warnings.append(note + "In-line AutoDetect requires NodeName to take effect")
        else:
            if self.autodetect is not None and self.autodetect != lowered:
                self.warnings.append(
                    note + "AutoDetect specified more than once, latest value used"
                )
            self.autodetect = lowered

    def _record(
        self, keys: dict[str, str], nodes: frozenset[str] | None, node_expr: str, where: Where
    ) -> GresRecord:
        name = keys["Name"]
        if not name:
            raise ConfigError(*where, "Invalid GRES data, no type name")
        if self.gres_types is not None and name.lower() not in self.gres_types:
            allowed = ",".join(sorted(self.gres_types)) or "(null)"
            raise ConfigError(*where, f"invalid GRES name '{name}': not in GresTypes ({allowed})")
        kind = keys.get("Type", "")
        shared = name.lower() in SHARED
        file_text = keys.get("File", keys.get("Files"))
        multiple = keys.get("MultipleFiles")
        files: tuple[str, ...] = ()
        if file_text is not None:
            if multiple is not None:
                raise ConfigError(*where, "File and MultipleFiles options are mutually exclusive")
            files = _files("File", file_text, where)
        elif multiple is not None:
            files = _files("MultipleFiles", multiple, where)
            if len(files) < 2:
                raise ConfigError(
                    *where, "MultipleFiles does not contain multiple files. Use File instead"
                )
        devices = 1 if multiple is not None else len(files)
        count = devices or 1
        if "Count" in keys:
            count = _count(name, keys["Count"], where)
            if devices and count != devices and not shared:
                raise ConfigError(
                    *where,
                    f"Invalid GRES record for {name}, count does not match File value "
                    f"({count} != {devices})",
                )
        cores_key = "Cores" if "Cores" in keys else "CPUs"
        cores = None if cores_key not in keys else _cores(name, cores_key, keys[cores_key], where)
        links_text = keys.get("Link", keys.get("Links"))
        links = None
        if links_text is not None:
            links = _links(links_text, where)
            described = devices if devices else count
            if described != 1:
                raise ConfigError(
                    *where,
                    f"Links={links_text} needs a line with a single device, not {described}",
                )
        flags: frozenset[str] = frozenset()
        if "Flags" in keys:
            flags = _flags(name, kind, keys["Flags"], where)
        return GresRecord(
            name=name,
            type=kind,
            files=files,
            multiple_files=multiple is not None,
            count=count,
            cores=cores,
            links=links,
            flags=flags,
            nodes=nodes,
            nodes_expr=node_expr,
            where=where,
        )


# ------------------------------------------------------------------ values
def _hosts(value: str, where: Where) -> list[str]:
    try:
        names = hostlist.expand(value)
    except ValueError as exc:
        raise ConfigError(*where, f"bad NodeName value '{value}': invalid hostlist") from exc
    if not names:
        raise ConfigError(*where, f"bad NodeName value '{value}': no host names")
    return names


def _files(key: str, value: str, where: Where) -> tuple[str, ...]:
    """Device files: a comma list whose items may carry ``[0-3,5]`` ranges."""
    try:
        names = hostlist.expand(value)
    except ValueError:
        names = []
    if not names:
        raise ConfigError(*where, f"can't parse {key}={value}")
    return tuple(names)


def _count(name: str, value: str, where: Where) -> int:
    """A Count: digits with an optional K/M/G/T/P (x1024) or KB/MB/... (x1000) suffix."""
    number = gres._number(value)
    if number is None:
        raise ConfigError(*where, f"Invalid GRES record for {name}, invalid count {value}")
    if number >= NO_VAL64:
        raise ConfigError(*where, f"GRES {name} has invalid count value {number}")
    return number


def _cores(name: str, key: str, value: str, where: Where) -> tuple[int, ...]:
    """A core list such as ``0-15,32-47`` (brackets allowed), sorted, each core once."""
    bad = ConfigError(*where, f"Invalid GRES data for {name}, {key}={value}")
    text = value
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    cores: set[int] = set()
    for item in text.split(","):
        low, dash, high = item.partition("-")
        if not _digits(low) or (dash and not _digits(high)):
            raise bad
        first, last = int(low), int(high) if dash else int(low)
        if first > last or last > MAX_CORE:
            raise bad
        cores.update(range(first, last + 1))
    return tuple(sorted(cores))


def _digits(text: str) -> bool:
    return 0 < len(text) <= 10 and text.isascii() and text.isdigit()


def _links(value: str, where: Where) -> tuple[int, ...]:
    """Links: a comma list with one -1 (the device itself), the others 0..MAX_LINK."""
    links: list[int] = []
    for token in value.split(","):
        digits = token[1:] if token.startswith("-") else token
        number = int(token) if _digits(digits) else None
        if number is None or not -1 <= number <= MAX_LINK:
            raise ConfigError(*where, f"Failed to parse token '{token}' in links string '{value}'")
        links.append(number)
    selves = links.count(-1)
    if selves > 1:
        raise ConfigError(*where, f"links string '{value}' has more than one -1")
    if selves == 0:
        raise ConfigError(*where, f"-1 wasn't found in links string '{value}'")
    return tuple(links)


def _flags(name: str, kind: str, value: str, where: Where) -> frozenset[str]:
    """Flags words, any case, as gres.conf(5) spells them."""
    found: set[str] = set()
    for word in value.split(","):
        if not word:
            continue
        canonical = FLAGS.get(word.lower())
        if canonical is None:
            raise ConfigError(*where, f"bad Flags value '{value}': unknown flag '{word}'")
        found.add(canonical)
    record = f"Invalid GRES record name={name} type={kind or '(null)'}: Flags ({value})"
    if "no_gpu_env" in found and found & ENV_FLAGS:
        raise ConfigError(
            *where,
            f'{record} contains "no_gpu_env", which must be mutually exclusive to all other '
            "GRES env flags of same node and name",
        )
    if {"one_sharing", "all_sharing"} <= found:
        raise ConfigError(*where, f"{record}: one_sharing and all_sharing are mutually exclusive")
    return frozenset(found)


def format_ranges(values: Iterable[int]) -> str:
    """``0-15,32-47``: sorted numbers as a range list (how Cores= is written)."""
    runs: list[list[int]] = []
    for value in sorted(set(values)):
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)


# ------------------------------------------------------------------ per node
def _global_flags(records: Iterable[GresRecord]) -> dict[str, frozenset[str]]:
    """Per name (lower case): the flags one record sets for that name on every node."""
    found: dict[str, set[str]] = {}
    for record in records:
        found.setdefault(record.name.lower(), set()).update(record.flags & GLOBAL_FLAGS)
    mps = found.get("mps")
    if mps is not None and "all_sharing" not in mps:
        mps.add("one_sharing")  # gres.conf(5): the default for MPS
    return {name: frozenset(flags) for name, flags in found.items()}


class _NodeError(ConfigError):
    """A per-node rule broken by ``records[order]``; the earliest such is reported."""

    def __init__(self, order: int, where: Where, message: str) -> None:
        super().__init__(*where, message)
        self.order = order


#: ``fail(position, message)``: the error for the node's ``records[position]``.
_Fail = Callable[[int, str], _NodeError]


def _label(nodes: Sequence[str]) -> str:
    if not nodes:
        return "every node"
    return f"node {hostlist.compress(nodes)}"


def _check_nodes(conf: GresConf, nodes: Iterable[str] | None) -> None:
    """Apply the per-node rules to each distinct set of records some node gets.

    Nodes that get the same records are checked once; of the problems found,
    the one at the earliest record is raised.
    """
    if nodes is None:
        named: dict[str, None] = {}
        for record in conf.records:
            named.update(dict.fromkeys(sorted(record.nodes or ())))
        groups: dict[tuple[int, ...], list[str]] = {
            tuple(i for i, r in enumerate(conf.records) if r.nodes is None): []
        }
        candidates: Iterable[str] = named
    else:
        groups = {}
        candidates = nodes
    for node in candidates:
        key = tuple(i for i, r in enumerate(conf.records) if r.applies_to(node))
        groups.setdefault(key, []).append(node)
    flags = _global_flags(conf.records)
    problems: list[_NodeError] = []
    for indices, members in groups.items():
        records = [conf.records[i] for i in indices]
        autodetect = conf.autodetect_for(members[0]) if members else conf.autodetect
        try:
            _resolve(records, autodetect, flags, _label(members), indices)
        except _NodeError as problem:
            problems.append(problem)
    if problems:
        first = min(problems, key=lambda problem: problem.order)
        raise ConfigError(first.path, first.line, first.message)


def _resolve(
    records: Sequence[GresRecord],
    autodetect: str | None,
    global_flags: dict[str, frozenset[str]],
    label: str,
    orders: Sequence[int] | None = None,
) -> tuple[GresDevice, ...]:
    """One node's devices from its records, checking slurmd's per-node rules.

    ``label`` names the node(s) in messages; ``orders`` are the records'
    positions in the file (which problem ``_check_nodes`` reports first).
    """
    order = list(range(len(records))) if orders is None else list(orders)

    def fail(position: int, message: str) -> _NodeError:
        return _NodeError(order[position], records[position].where, message)

    _check_consistency(records, fail)
    env = _env_flags(records, autodetect, fail)
    per_record: list[list[GresDevice]] = [[] for _ in records]
    seen_files: dict[str, set[str]] = {}
    gpus: list[GresDevice] = []
    for position, record in enumerate(records):
        if record.shared:
            continue
        name = record.name.lower()
        flags = env[position] | global_flags.get(name, frozenset())
        if record.files and not record.multiple_files:
            files_seen = seen_files.setdefault(name, set())
            for file in record.files:
                if file in files_seen:
                    raise fail(position, f"{record.name} duplicate device file name ({file})")
                files_seen.add(file)
            chunks: list[tuple[str, ...]] = [(file,) for file in record.files]
            counts = [1] * len(chunks)
        else:
            chunks = [record.files]
            counts = [1 if record.multiple_files else record.count]
        for files, count in zip(chunks, counts, strict=True):
            device = GresDevice(
                record.name,
                record.type,
                files,
                count,
                record.cores,
                record.links,
                flags,
                0,
                record.where,
            )
            per_record[position].append(device)
            if name == "gpu" and files:
                gpus.append(device)
    _share(records, per_record, gpus, env, global_flags)
    devices = _number([device for group in per_record for device in group])
    _check_links(records, devices, label, fail)
    return devices


def _check_consistency(records: Sequence[GresRecord], fail: _Fail) -> None:
    """Per name: File on all records or none, Type likewise, no duplicate plain records."""
    first: dict[str, GresRecord] = {}
    seen: dict[str, int] = {}
    for position, record in enumerate(records):
        name = record.name.lower()
        seen[name] = seen.get(name, 0) + 1
        earlier = first.setdefault(name, record)
        if bool(earlier.files) != bool(record.files):
            raise fail(
                position,
                f'gres.conf for {record.name}, some records have "File" specification while '
                "others do not",
            )
        if bool(earlier.type) != bool(record.type):
            raise fail(
                position,
                f'gres.conf for {record.name}, some records have "Type=" specification while '
                "others do not",
            )
        if not record.files and not record.type and seen[name] > 1:
            raise fail(position, f"gres.conf duplicate records for {record.name}")


def _env_flags(
    records: Sequence[GresRecord], autodetect: str | None, fail: _Fail
) -> list[frozenset[str]]:
    """Each record's flags with its environment flags settled.

    A record without environment flags takes those of the record right above
    it when that has the same name and type; two such records that both set
    them must agree. A GPU record left without any gets AutoDetect's
    (nvml/nvidia: nvidia_gpu_env, rsmi: amd_gpu_env, oneapi: intel_gpu_env),
    else all four.
    """
    settled: list[frozenset[str]] = []
    previous: GresRecord | None = None
    for position, record in enumerate(records):
        flags = set(record.flags)
        own_env = record.flags & (ENV_FLAGS | {"no_gpu_env"})
        same = (
            previous is not None
            and previous.name.lower() == record.name.lower()
            and previous.type == record.type
        )
        before = settled[-1] & (ENV_FLAGS | {"no_gpu_env"}) if same else frozenset()
        if own_env and before and own_env != before:
            raise fail(
                position,
                f"Invalid GRES record name={record.name} type={record.type or '(null)'}: Flags "
                f"({','.join(sorted(record.flags))}) does not match env flags for previous GRES "
                "of same node and name",
            )
        if not own_env:
            if before:
                flags |= before
            elif record.name.lower() == "gpu":
                implied = _AUTODETECT_ENV.get(autodetect or "")
                flags |= {implied} if implied else ENV_FLAGS
        settled.append(frozenset(flags))
        previous = record
    return settled


def _share(
    records: Sequence[GresRecord],
    per_record: list[list[GresDevice]],
    gpus: list[GresDevice],
    env: list[frozenset[str]],
    global_flags: dict[str, frozenset[str]],
) -> None:
    """The mps/shard devices: a Count per file, or one Count spread over the GPUs.

    With File, each file gets Count / files (Slurm drops the remainder), typed
    and placed like the GPU with that file. A single record without File has
    its Count spread over the node's GPUs, the last ones taking the remainder;
    without GPUs (or beside other records of its name) it stays one count-only
    device.
    """
    by_file = {device.files[0]: device for device in gpus}
    plain: dict[str, int] = {}
    for record in records:
        if record.shared and not record.files:
            plain[record.name.lower()] = plain.get(record.name.lower(), 0) + 1
    for position, record in enumerate(records):
        if not record.shared:
            continue
        name = record.name.lower()
        flags = env[position] | global_flags.get(name, frozenset())
        if record.files:
            share = record.count // len(record.files)
            for file in record.files:
                gpu = by_file.get(file)
                per_record[position].append(
                    GresDevice(
                        record.name,
                        record.type if gpu is None else gpu.type,
                        (file,),
                        share,
                        record.cores if gpu is None else gpu.cores,
                        None,
                        flags,
                        0,
                        record.where,
                    )
                )
        elif gpus and plain[name] == 1:
            left = record.count
            for remaining, gpu in zip(range(len(gpus), 0, -1), gpus, strict=True):
                share = left // remaining
                left -= share
                per_record[position].append(
                    GresDevice(
                        record.name,
                        gpu.type,
                        gpu.files,
                        share,
                        gpu.cores,
                        None,
                        flags,
                        0,
                        record.where,
                    )
                )
        else:
            per_record[position].append(
                GresDevice(
                    record.name,
                    record.type,
                    (),
                    record.count,
                    record.cores,
                    None,
                    flags,
                    0,
                    record.where,
                )
            )


def _number(devices: list[GresDevice]) -> tuple[GresDevice, ...]:
    """The devices with ``index`` counting each name's devices from 0."""
    counters: dict[str, int] = {}
    numbered: list[GresDevice] = []
    for device in devices:
        name = device.name.lower()
        index = counters.get(name, 0)
        counters[name] = index + 1
        numbered.append(replace(device, index=index))
    return tuple(numbered)


def _check_links(
    records: Sequence[GresRecord], devices: Sequence[GresDevice], label: str, fail: _Fail
) -> None:
    """Each Links list has one entry per device of its name on the node."""
    totals: dict[str, int] = {}
    for device in devices:
        totals[device.name.lower()] = totals.get(device.name.lower(), 0) + 1
    for position, record in enumerate(records):
        if record.links is None:
            continue
        total = totals.get(record.name.lower(), 0)
        if len(record.links) != total:
            text = ",".join(str(link) for link in record.links)
            raise fail(
                position,
                f"Invalid GRES Links value ({text}) on {label}: {len(record.links)} values "
                f"for {total} {record.name} devices",
            )


# ------------------------------------------------------------------ cross-check
def cross_check(
    configured: Iterable[gres.Item],
    devices: Iterable[GresDevice],
    *,
    cores: int | None = None,
) -> CrossCheck:
    """Compare a node's slurm.conf ``Gres=`` items with its gres.conf devices.

    A name gres.conf says nothing about keeps slurm.conf's count, as in Slurm.
    Otherwise, in slurmctld's words: fewer in all than configured is
    ``gres/gpu count reported lower than configured (4 < 8)``; fewer of a
    configured type is ``gres/gpu:a100 count too low (1 < 2)``; a type
    slurm.conf does not configure (when it configures types for the name) is
    ``gres/gpu type (h100) reported but not configured``. ``cores``, the
    node's core count, also checks Cores= against it.
    """
    conf_total: dict[str, int] = {}
    conf_types: dict[str, dict[str, int]] = {}
    for name, kind, count in configured:
        key = name.lower()
        conf_total[key] = conf_total.get(key, 0) + count
        types = conf_types.setdefault(key, {})
        if kind:
            types[kind] = types.get(kind, 0) + count
    found_total: dict[str, int] = {}
    found_types: dict[str, dict[str, int]] = {}
    names: dict[str, str] = {}
    core_reasons: list[str] = []
    for device in devices:
        key = device.name.lower()
        names.setdefault(key, device.name)
        found_total[key] = found_total.get(key, 0) + device.count
        types = found_types.setdefault(key, {})
        types[device.type] = types.get(device.type, 0) + device.count
        if cores is not None and device.cores and device.cores[-1] >= cores:
            core_reasons.append(
                f"Invalid GRES data for {device.name}, Cores={format_ranges(device.cores)} "
                f"(only {cores} cores are available)"
            )
    reasons: list[str] = []
    for key, wanted_total in conf_total.items():
        if key not in found_total:
            continue
        if found_total[key] < wanted_total:
            reasons.append(
                f"gres/{key} count reported lower than configured "
                f"({found_total[key]} < {wanted_total})"
            )
        typed = conf_types[key]
        for kind, wanted in typed.items():
            have = found_types[key].get(kind, 0)
            if have < wanted:
                reasons.append(f"gres/{key}:{kind} count too low ({have} < {wanted})")
        reasons.extend(
            f"gres/{key} type ({kind}) reported but not configured"
            for kind in found_types[key]
            if typed and kind and kind not in typed
        )
    reasons.extend(core_reasons)
    return CrossCheck(
        tuple(dict.fromkeys(reasons)), tuple(_extra(names, found_types, conf_total, conf_types))
    )


def _extra(
    names: dict[str, str],
    found_types: dict[str, dict[str, int]],
    conf_total: dict[str, int],
    conf_types: dict[str, dict[str, int]],
) -> list[str]:
    """slurmd's warnings about gres.conf devices slurm.conf does not account for.

    Untyped slurm.conf items (and untyped gres.conf devices) match any type.
    """
    extras: list[tuple[str, int]] = []
    for key, types in found_types.items():
        typed = conf_types.get(key, {})
        if key in conf_total and (not typed or "" in types):
            extra = sum(types.values()) - conf_total[key]
            extras.append((names[key], extra))
            continue
        for kind, have in types.items():
            label = f"{names[key]}:{kind}" if kind else names[key]
            extras.append((label, have - typed.get(kind, 0)))
    return [
        f"A line in gres.conf for GRES {label} has {extra} more configured than expected "
        "in slurm.conf. Ignoring extra GRES."
        for label, extra in extras
        if extra > 0
    ]
