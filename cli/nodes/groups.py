"""sinfo's rows: nodes grouped by partition and by whatever the format shows.

Slurm's sinfo puts a node into the first row of its partition whose shown
attributes (state, features, reason...) equal the node's, so a partition with
idle and allocated nodes gets one row per state. Which attributes count
depends on the fields printed ("match flags"); CPU, memory and similar
counts only split rows with ``-e``, otherwise a row shows their range. ``-N``
gives every node its own row. Rows are then sorted, by default partition
order then state (highest numeric state first).
"""

from __future__ import annotations

from cli.nodes import statenames

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence
    from typing import Any

    Node = Mapping[str, Any]
    Partition = Mapping[str, Any]

DEFAULT_SORT = "#P,-t"
NODE_SORT = "N"


class NodeGroup:
    """One sinfo row: the partition it was made for and the nodes shown on it.

    The names on the row, and the values of the attributes rows are compared by
    (``holds``, ``least``), are kept as nodes join: asking the row's nodes one by one
    for each node grouped made a listing of 10,000 nodes take seconds.
    """

    __slots__ = ("_least", "_names", "_seen", "nodes", "part_index", "partition")

    def __init__(
        self, partition: Partition, part_index: int, nodes: list[Node] | None = None
    ) -> None:
        self.partition = partition
        self.part_index = part_index
        self.nodes: list[Node] = [] if nodes is None else nodes
        self._names = {node["name"] for node in self.nodes}
        self._seen: dict[str, set[Any]] = {}
        self._least: dict[str, Any] = {}

    @property
    def state(self) -> int:
        """Slurm's numeric state of the row (its first node's); 0 when empty."""
        return statenames.value(self.nodes[0]) if self.nodes else 0

    def values(self, key: str) -> list[Any]:
        return [node[key] for node in self.nodes]

    def holds(self, key: str, value: Any) -> bool:
        """Whether a node on the row has ``value`` as its ``key``."""
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = set(self.values(key))
        return value in seen

    def least(self, key: str) -> Any:
        """The smallest ``key`` of the row's nodes (the row has some)."""
        if key not in self._least:
            self._least[key] = min(self.values(key))
        return self._least[key]

    def add(self, node: Node) -> None:
        if node["name"] in self._names:
            return
        self._names.add(node["name"])
        self.nodes.append(node)
        for key, seen in self._seen.items():
            seen.add(node[key])
        for key, least in self._least.items():
            self._least[key] = min(least, node[key])


# Partition attributes compared when their field is shown: flag -> keys.
_PART_KEYS: dict[str, tuple[str, ...]] = {
    "avail": ("state",),
    "groups": ("allow_groups",),
    "job_size": ("min_nodes", "max_nodes"),
    "default_time": ("default_time",),
    "max_time": ("max_time",),
    "oversubscribe": ("oversubscribe",),
    "priority_tier": ("priority_tier",),
    "priority_job_factor": ("priority_job_factor",),
}

# Node attributes that must equal the row's first node's: flag -> key.
_NODE_KEYS: dict[str, str] = {
    "features": "available_features",
    "features_act": "features",
    "gres": "gres",
    "reason": "reason",
    "reason_time": "reason_time",
    "reason_user": "reason_user",
}

# Node counts compared only with -e: flag -> keys.
_EXACT_KEYS: dict[str, tuple[str, ...]] = {
    "cpus": ("cpus",),
    "sockets": ("sockets",),
    "cores": ("cores_per_socket",),
    "threads": ("threads_per_core",),
    "sct": ("sockets", "cores_per_socket", "threads_per_core"),
    "disk": ("tmp_disk",),
    "memory": ("real_memory",),
    "weight": ("weight",),
    "cpu_load": ("cpu_load",),
    "free_mem": ("free_memory",),
    "port": ("port",),
    "version": ("version",),
}


class Grouping:
    """How rows are formed: the match flags of the format and sinfo's mode options."""

    __slots__ = ("exact", "flags", "node_mode", "reasons")

    def __init__(
        self,
        flags: Collection[str],
        node_mode: bool = False,
        reasons: bool = False,
        exact: bool = False,
    ) -> None:
        self.flags = flags
        self.node_mode = node_mode
        self.reasons = reasons
        self.exact = exact


def _same_partition(group: NodeGroup, index: int, part: Partition, how: Grouping) -> bool:
    if how.reasons or group.part_index == index:
        return True
    if "partition" in how.flags and group.partition["name"] != part["name"]:
        return False
    for flag, keys in _PART_KEYS.items():
        if flag in how.flags and any(group.partition[key] != part[key] for key in keys):
            return False
    return True


def _same_node(group: NodeGroup, node: Node, how: Grouping) -> bool:
    if how.node_mode:
        return False
    first = group.nodes[0]
    if "hostnames" in how.flags and not group.holds("hostname", node["hostname"]):
        return False
    if "node_addr" in how.flags and not group.holds("addr", node["addr"]):
        return False
    for flag, key in _NODE_KEYS.items():
        if flag in how.flags and node[key] != first[key]:
            return False
    state = statenames.value(node)
    if "state" in how.flags and statenames.long_name(state) != statenames.long_name(group.state):
        return False
    if "statecomplete" in how.flags and statenames.complete(state) != statenames.complete(
        group.state
    ):
        return False
    if "alloc_mem" in how.flags and node["alloc_memory"] != group.nodes[-1]["alloc_memory"]:
        return False
    if not how.exact:
        return True
    for flag, keys in _EXACT_KEYS.items():
        if flag in how.flags and any(node[key] != group.least(key) for key in keys):
            return False
    return True


def build(
    nodes: Sequence[Node],
    partitions: Sequence[Partition],
    how: Grouping,
    *,
    part_names: Collection[str] | None = None,
    keep: Callable[[Node], bool] = lambda node: True,
) -> list[NodeGroup]:
    """The rows for ``nodes`` in ``partitions``, before sorting.

    Every selected partition gets a row even without matching nodes (printed
    with 0 nodes and state ``n/a``), unless ``-N`` or the format shows no
    partition. ``keep`` is the node filter (``-n``, ``-t``, ``-d``, ``-r``).
    """
    rows = _Rows(how)
    chosen = [
        (index, part)
        for index, part in enumerate(partitions)
        if part_names is None or part["name"] in part_names
    ]
    if not how.node_mode and "partition" in how.flags:
        for index, part in chosen:
            rows.append(NodeGroup(part, index))
    by_name = {node["name"]: node for node in nodes if keep(node)}
    for index, part in chosen:
        for name in part["node_names"]:
            node = by_name.get(name)
            if node is not None:
                _insert(rows, index, part, node, how)
    return rows.groups


class _Rows:
    """The rows made so far, and the ones a node may join.

    With host names or addresses shown (``%n``, ``%o``) a node joins only a row that
    already holds its own name or address, so every row holds one, and with a name
    per host every node makes a row of its own: looking through all the rows for
    each node made ``sinfo -o %n`` on 10,000 nodes take 13 s. Such rows are found
    here by that name and address; the rows still without a node (a partition's
    row made before its nodes) may take any node. Otherwise every row is a candidate
    (there are few: one per state and partition, say).
    """

    __slots__ = ("by_host", "empty", "groups", "keys")

    def __init__(self, how: Grouping) -> None:
        self.groups: list[NodeGroup] = []
        flags = () if how.node_mode else how.flags
        self.keys = tuple(
            key for flag, key in (("hostnames", "hostname"), ("node_addr", "addr")) if flag in flags
        )
        self.empty: list[tuple[int, NodeGroup]] = []  # (position, row) of the rows with no node
        self.by_host: dict[tuple[Any, ...], list[tuple[int, NodeGroup]]] = {}

    def _host(self, node: Node) -> tuple[Any, ...]:
        return tuple(node[key] for key in self.keys)

    def append(self, group: NodeGroup) -> None:
        entry = (len(self.groups), group)
        self.groups.append(group)
        if not self.keys:
            return
        if group.nodes:
            self.by_host.setdefault(self._host(group.nodes[0]), []).append(entry)
        else:
            self.empty.append(entry)

    def candidates(self, node: Node) -> Sequence[NodeGroup]:
        """The rows ``node`` may join, in the order they were made."""
        if not self.keys:
            return self.groups
        found = self.by_host.get(self._host(node), [])
        if self.empty:
            found = sorted(self.empty + found, key=lambda entry: entry[0])
        return [group for _, group in found]

    def joined(self, group: NodeGroup) -> None:
        """Note that a node joined ``group``: a row that had none is now found by its host."""
        if not self.keys or len(group.nodes) != 1:
            return
        for i, (position, row) in enumerate(self.empty):
            if row is group:
                del self.empty[i]
                self.by_host.setdefault(self._host(group.nodes[0]), []).append((position, row))
                return


def _insert(rows: _Rows, index: int, part: Partition, node: Node, how: Grouping) -> None:
    if how.node_mode:  # every node its own row: no row to look for (10,000 rows with -N)
        rows.groups.append(NodeGroup(part, index, [node]))
        return
    for group in rows.candidates(node):
        if not _same_partition(group, index, part, how):
            continue
        if group.nodes and not _same_node(group, node, how):
            continue
        group.add(node)
        rows.joined(group)
        return
    rows.append(NodeGroup(part, index, [node]))


def _split_host(name: str) -> tuple[str, int]:
    end = len(name)
    while end and name[end - 1].isdigit():
        end -= 1
    return name[:end], int(name[end:]) if end < len(name) else -1


def _first_host(group: NodeGroup, key: str) -> tuple[str, int]:
    names = [str(node[key]) for node in group.nodes]
    return min((_split_host(name) for name in names), default=("", -1))


_AVAIL_ORDER = {"INACTIVE": 0, "DOWN": 1, "DRAIN": 2, "UP": 3}


def _part(key: str) -> Callable[[NodeGroup], Any]:
    return lambda group: group.partition[key]


def _min(key: str) -> Callable[[NodeGroup], Any]:
    return lambda group: min(group.values(key), default=0)


def _first(key: str) -> Callable[[NodeGroup], Any]:
    return lambda group: group.nodes[0][key] if group.nodes else ""


def _job_size(group: NodeGroup) -> int:
    most = group.partition["max_nodes"]
    return 0xFFFFFFFF if most == 0 else most + group.partition["min_nodes"]


def _unlimited_last(key: str) -> Callable[[NodeGroup], Any]:
    def minutes(group: NodeGroup) -> int:
        value = group.partition[key]
        return 0xFFFFFFFF if value == -1 else value

    return minutes


_SORT_KEYS: dict[str, Callable[[NodeGroup], Any]] = {
    "a": lambda group: _AVAIL_ORDER.get(group.partition["state"], 0),
    "A": lambda group: sum(1 for node in group.nodes if _allocated(node)),
    "c": _min("cpus"),
    "d": _min("tmp_disk"),
    "D": lambda group: len(group.nodes),
    "e": _min("free_memory"),
    "E": _first("reason"),
    "f": _first("available_features"),
    "F": lambda group: sum(1 for node in group.nodes if _allocated(node)),
    "g": _part("allow_groups"),
    "h": _part("oversubscribe"),
    "H": _first("reason_time"),
    "l": _unlimited_last("max_time"),
    "m": _min("real_memory"),
    "n": lambda group: _first_host(group, "hostname"),
    "N": lambda group: _first_host(group, "name"),
    "o": lambda group: _first_host(group, "addr"),
    "O": _min("cpu_load"),
    "p": _part("priority_tier"),
    "R": _part("name"),
    "s": _job_size,
    "S": _part("priority_job_factor"),
    "t": lambda group: group.state,
    "T": lambda group: group.state,
    "u": _first("reason_user"),
    "U": _first("reason_user"),
    "w": _min("weight"),
    "X": _min("sockets"),
    "Y": _min("cores_per_socket"),
    "Z": _min("threads_per_core"),
}


def _allocated(node: Node) -> bool:
    base = statenames.value(node) & statenames.BASE_MASK
    return base in (statenames.ALLOCATED, statenames.MIXED) or "COMPLETING" in node["state_flags"]


def sort_groups(groups: list[NodeGroup], spec: str) -> list[NodeGroup]:
    """Rows in sinfo's order for sort spec ``spec`` (``#P`` is partition order)."""
    ordered = list(groups)
    for index in range(len(spec) - 1, -1, -1):
        letter = spec[index]
        if letter in ",#+-":
            continue
        before = spec[index - 1] if index else ""
        descending = before == "-"
        if letter == "P":
            if before == "#":
                ordered.sort(key=lambda group: group.part_index, reverse=descending)
            else:
                ordered.sort(key=_part("name"), reverse=descending)
        elif letter in _SORT_KEYS:
            ordered.sort(key=_SORT_KEYS[letter], reverse=descending)
    return ordered
