"""What sinfo can print about a row of nodes: its ``-o`` letters and ``-O`` names.

A row (``groups.NodeGroup``) holds a partition and some of its nodes;
fields show partition settings, counts, or a node attribute as one value or a
``min+`` range when the nodes differ. Each field also names the "match flag"
that makes sinfo split rows on it. Headers and placeholders are Slurm's.
"""

from __future__ import annotations

import pwd

from cli.columns import Field
from cli.nodes import statenames
from cli.nodes.groups import NodeGroup
from cli.quantity import scaled
from corral.hostlist import compress
from corral.timefmt import format_sinfo_limit, format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Render = Callable[[NodeGroup, Any], str]


def _range(low: Any, high: Any, *, spread: bool = False, units: bool = False) -> str:
    """One value, or ``low+`` (``low-high`` when ``spread``) when the nodes differ."""
    low_text = scaled(low) if units else str(low)
    high_text = scaled(high) if units else str(high)
    if low == high:
        return high_text
    return f"{low_text}-{high_text}" if spread else f"{low_text}+"


def _span(key: str, *, spread: bool = False, units: bool = False) -> Render:
    def render(group: NodeGroup, view: Any) -> str:
        values = group.values(key) or [0]
        return _range(min(values), max(values), spread=spread, units=units)

    return render


def _first(key: str, empty: str = "(null)") -> Render:
    return lambda group, view: str(group.nodes[0][key] or empty) if group.nodes else empty


def _names(key: str) -> Render:
    return lambda group, view: compress(str(node[key]) for node in group.nodes if node[key])


def _partition(group: NodeGroup, view: Any) -> str:
    name = str(group.partition["name"])
    return name + "*" if group.partition["is_default"] else name


def _avail(group: NodeGroup, view: Any) -> str:
    state = str(group.partition["state"]).lower()
    return state if state in ("up", "down", "drain", "inactive") else "unknown"


def _state(form: Callable[[int], str]) -> Render:
    return lambda group, view: form(group.state) if group.nodes else "n/a"


def _counts(group: NodeGroup) -> tuple[int, int, int, int]:
    """Nodes allocated, idle, other (drained or down) and total, as sinfo counts them."""
    alloc = idle = other = 0
    for node in group.nodes:
        state = statenames.value(node)
        base = state & statenames.BASE_MASK
        if base in (statenames.ALLOCATED, statenames.MIXED) or state & statenames.COMPLETING:
            alloc += 1
        elif state & statenames.DRAIN or base == statenames.DOWN:
            other += 1
        else:
            idle += 1
    return alloc, idle, other, len(group.nodes)


def _cpu_counts(group: NodeGroup, view: Any) -> str:
    alloc = idle = other = total = 0
    for node in group.nodes:
        state = statenames.value(node)
        used = int(node["alloc_cpus"])
        total += int(node["cpus"])
        if state & statenames.DRAIN or state & statenames.BASE_MASK == statenames.DOWN:
            other += int(node["cpus"]) - used
        else:
            idle += int(node["cpus"]) - used
        alloc += used
    return f"{alloc}/{idle}/{other}/{total}"


def _job_size(group: NodeGroup, view: Any) -> str:
    low, high = group.partition["min_nodes"], group.partition["max_nodes"]
    if high == 0:
        return f"{max(low, 1)}-infinite"
    return _range(max(low, 1), high, spread=True, units=True)


def _default_time(group: NodeGroup, view: Any) -> str:
    minutes = group.partition["default_time"]
    return "n/a" if minutes == 0 else format_sinfo_limit(minutes)


def _groups(group: NodeGroup, view: Any) -> str:
    allowed = str(group.partition["allow_groups"])
    return "all" if allowed in ("", "ALL") else allowed


def _reason(group: NodeGroup, view: Any) -> str:
    reason = str(group.nodes[0]["reason"]) if group.nodes else ""
    return "none" if not reason or reason.startswith("(null)") else reason


def _reason_time(group: NodeGroup, view: Any) -> str:
    stamp = int(group.nodes[0]["reason_time"]) if group.nodes else 0
    return format_timestamp(stamp) if stamp else "Unknown"


def _reason_user(group: NodeGroup, view: Any) -> str:
    user = str(group.nodes[0]["reason_user"]) if group.nodes else ""
    return user or "Unknown"


def _reason_user_long(group: NodeGroup, view: Any) -> str:
    user = _reason_user(group, view)
    if user == "Unknown":
        return user
    try:
        return f"{user}({pwd.getpwnam(user).pw_uid})"
    except KeyError:
        return user


def _cpu_load(group: NodeGroup, view: Any) -> str:
    loads = group.values("cpu_load") or [0.0]
    low, high = min(loads), max(loads)
    return f"{high:.2f}" if low == high else f"{low:.2f}-{high:.2f}"


def _sct(group: NodeGroup, view: Any) -> str:
    parts = (
        _span("sockets", units=True)(group, view),
        _span("cores_per_socket", units=True)(group, view),
        _span("threads_per_core", units=True)(group, view),
    )
    return ":".join(parts)


def _const(text: str) -> Render:
    return lambda group, view: text


_NODELIST = Field("NODELIST", _names("name"), header_cut=False)
_HOSTNAMES = Field("HOSTNAMES", _names("hostname"), header_cut=False)
_PARTITION = Field("PARTITION", _partition)
_STATE_COMPACT = Field("STATE", _state(statenames.compact))
_STATE_LONG = Field("STATE", _state(statenames.long_name))

#: Field, match flag: the attribute that splits rows when the field is shown.
_ALL: dict[str, tuple[Field, str]] = {
    "a": (Field("AVAIL", _avail), "avail"),
    "A": (Field("NODES(A/I)", lambda g, v: "/".join(map(str, _counts(g)[:2]))), ""),
    "b": (Field("ACTIVE_FEATURES", _first("features")), "features_act"),
    "B": (Field("MAX_CPUS_PER_NODE", _const("UNLIMITED")), "max_cpus_per_node"),
    "c": (Field("CPUS", _span("cpus", units=True)), "cpus"),
    "C": (Field("CPUS(A/I/O/T)", _cpu_counts), "cpus"),
    "d": (Field("TMP_DISK", _span("tmp_disk")), "disk"),
    "D": (Field("NODES", lambda g, v: str(len(g.nodes))), ""),
    "e": (Field("FREE_MEM", _span("free_memory", spread=True)), "free_mem"),
    "E": (Field("REASON", _reason), "reason"),
    "f": (Field("AVAIL_FEATURES", _first("available_features")), "features"),
    "F": (Field("NODES(A/I/O/T)", lambda g, v: "/".join(map(str, _counts(g)))), ""),
    "g": (Field("GROUPS", _groups), "groups"),
    "G": (Field("GRES", _first("gres")), "gres"),
    "h": (
        Field("OVERSUBSCRIBE", lambda g, v: str(g.partition["oversubscribe"] or "NO")),
        "oversubscribe",
    ),
    "H": (Field("TIMESTAMP", _reason_time), "reason_time"),
    "I": (
        Field("PRIO_JOB_FACTOR", lambda g, v: str(g.partition["priority_job_factor"])),
        "priority_job_factor",
    ),
    "l": (
        Field("TIMELIMIT", lambda g, v: format_sinfo_limit(int(g.partition["max_time"]))),
        "max_time",
    ),
    "L": (Field("DEFAULTTIME", _default_time), "default_time"),
    "m": (Field("MEMORY", _span("real_memory")), "memory"),
    "M": (
        Field("PREEMPT_MODE", lambda g, v: str(g.partition.get("preempt_mode") or "OFF")),
        "preempt_mode",
    ),
    "n": (_HOSTNAMES, "hostnames"),
    "N": (_NODELIST, ""),
    "o": (Field("NODE_ADDR", _names("addr"), header_cut=False), "node_addr"),
    "O": (Field("CPU_LOAD", _cpu_load), "cpu_load"),
    "p": (Field("PRIO_TIER", lambda g, v: str(g.partition["priority_tier"])), "priority_tier"),
    "P": (_PARTITION, "partition"),
    "r": (Field("ROOT", _const("no")), "root"),
    "R": (Field("PARTITION", lambda g, v: str(g.partition["name"])), "partition"),
    "s": (Field("JOB_SIZE", _job_size), "job_size"),
    "S": (Field("ALLOCNODES", _const("all")), ""),
    "t": (_STATE_COMPACT, "state"),
    "T": (_STATE_LONG, "state"),
    "u": (Field("USER", _reason_user), "reason_user"),
    "U": (Field("USER", _reason_user_long), "reason_user"),
    "v": (Field("VERSION", _first("version", "N/A")), "version"),
    "V": (Field("CLUSTER", _const("N/A")), ""),
    "w": (Field("WEIGHT", _span("weight")), "weight"),
    "X": (Field("SOCKETS", _span("sockets", units=True)), "sockets"),
    "Y": (Field("CORES", _span("cores_per_socket", units=True)), "cores"),
    "Z": (Field("THREADS", _span("threads_per_core", units=True)), "threads"),
    "z": (Field("S:C:T", _sct), "sct"),
}

#: ``-o`` letters.
LETTERS: dict[str, Field] = {letter: field for letter, (field, _) in _ALL.items()}

#: ``-O`` names (lower case) and the letter they share their field with.
_NAME_LETTERS = {
    "allocnodes": "S",
    "available": "a",
    "cluster": "V",
    "cpus": "c",
    "cpusload": "O",
    "cpusstate": "C",
    "cores": "Y",
    "defaulttime": "L",
    "disk": "d",
    "features": "f",
    "featuresact": "b",
    "freemem": "e",
    "groups": "g",
    "gres": "G",
    "maxcpuspernode": "B",
    "memory": "m",
    "nodeaddr": "o",
    "nodeai": "A",
    "nodeaiot": "F",
    "nodehost": "n",
    "nodelist": "N",
    "nodes": "D",
    "oversubscribe": "h",
    "partition": "P",
    "partitionname": "R",
    "preemptmode": "M",
    "priorityjobfactor": "I",
    "prioritytier": "p",
    "reason": "E",
    "root": "r",
    "share": "h",
    "size": "s",
    "socketcorethread": "z",
    "sockets": "X",
    "statecompact": "t",
    "statelong": "T",
    "threads": "Z",
    "time": "l",
    "timestamp": "H",
    "user": "u",
    "userlong": "U",
    "version": "v",
    "weight": "w",
}

_STATE_COMPLETE = Field("STATECOMPLETE", _state(lambda state: statenames.complete(state).lower()))
_EXTRA_NAMES: dict[str, tuple[Field, str]] = {
    "allocmem": (
        Field("ALLOCMEM", lambda g, v: str(g.nodes[-1]["alloc_memory"] if g.nodes else 0)),
        "alloc_mem",
    ),
    "comment": (Field("COMMENT", _const("(null)")), "comment"),
    "extra": (Field("EXTRA", _const("(null)")), "extra"),
    "gresused": (Field("GRES_USED", _const("(null)")), "gres_used"),
    "port": (Field("PORT", _span("port", units=True)), "port"),
    "statecomplete": (_STATE_COMPLETE, "statecomplete"),
}

#: ``-O`` names, keyed in lower case.
NAMES: dict[str, Field] = {name: _ALL[letter][0] for name, letter in _NAME_LETTERS.items()}
NAMES.update({name: field for name, (field, _) in _EXTRA_NAMES.items()})

#: The match flag of every field (empty when the field never splits rows).
MATCH_FLAGS: dict[Field, str] = {field: flag for field, flag in _ALL.values()}
MATCH_FLAGS.update(dict(_EXTRA_NAMES.values()))

#: Fields whose width sinfo widens to fit the longest partition or node list.
PARTITION_FIELDS = (_PARTITION, _ALL["R"][0])
NODE_LIST_FIELDS = (_NODELIST, _HOSTNAMES)
