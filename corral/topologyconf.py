"""topology.conf: the network's switches (topology/tree) or blocks (topology/block).

Slurm reads topology.conf beside slurm.conf when ``TopologyPlugin`` is
``topology/tree`` or ``topology/block``, in slurm.conf's syntax
(``corral.confsyntax``: case-insensitive keys, ``#`` comments, Include).

topology/tree (Slurm 22.05 and later): one line per switch,
``SwitchName=s0 Nodes=tux[0-3] LinkSpeed=900`` for a leaf switch and
``SwitchName=s4 Switches=s[0-3]`` for one above. A switch's level is 0 for a
leaf and one more than its highest child otherwise; it reaches the nodes of
all its children. A switch may be the child of several (Slurm's own example
lists four spines over the same leaves).

topology/block (Slurm 23.11 and later; 22.05 has no such plugin): one line
per base block, ``BlockName=b1 Nodes=node[1-32]``, and ``BlockSizes=30,120``:
the planning base block size in nodes, then the sizes of the aggregated
levels, each a power of two times the base (without it: the base size is the
first block's node count and the levels aggregate 1, 2, 4, 8 and 16 base
blocks). Base blocks, in file order, are aggregated into aligned groups of
each level's size, as Slurm's ``block_record_validate`` builds them.

What Slurm only warns about and Corral refuses, with file and line, because
the placement would then not be the one written: a node name that is not in
slurm.conf (Slurm skips it), a node under two leaf switches or in two blocks
(Slurm counts it twice), and a file with no switch or block (Slurm then
places jobs without topology). Nodes under no switch or block are allowed,
as in Slurm, with the same warning: a job placed by topology never gets them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from corral import hostlist
from corral.confsyntax import ConfigError, Reader, Where, integer, read_text

__all__ = [
    "BLOCK",
    "TREE",
    "Block",
    "Switch",
    "TopologyConf",
    "load",
    "parse",
]

TREE = "topology/tree"
BLOCK = "topology/block"
#: Aggregated block levels without BlockSizes: 1, 2, 4, 8 and 16 base blocks.
DEFAULT_BLOCK_LEVELS = (0, 1, 2, 3, 4)
#: Slurm's MAX_BLOCK_LEVELS: 2**15 base blocks at most in one block.
MAX_BLOCK_LEVEL = 15
_MAX_NAME = 64  # Slurm 24.11: "cannot be longer than 64 characters"


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch: the nodes it reaches (in slurm.conf's order) and its children."""

    name: str
    level: int  # 0: a leaf switch
    link_speed: int
    nodes: tuple[str, ...]  # every node under it
    switches: tuple[str, ...]  # its child switches; () for a leaf
    nodes_text: str  # Nodes= as written ("" above the leaves)
    switches_text: str  # Switches= as written ("" for a leaf)


@dataclass(frozen=True, slots=True)
class Block:
    """A base block (``level`` 0) or a block aggregated from base blocks."""

    name: str  # aggregated: the base blocks' names as a hostlist (block[1-2])
    index: int  # Slurm's BlockIndex
    level: int  # the index of its size in ``TopologyConf.block_levels``
    nodes: tuple[str, ...]
    bases: tuple[int, ...]  # the base blocks in it (positions in the file)
    size: int  # BlockSize: the planning base block size times its base blocks


@dataclass(frozen=True, slots=True)
class TopologyConf:
    """topology.conf as read for ``plugin`` (TREE or BLOCK)."""

    plugin: str
    path: str
    switches: tuple[Switch, ...] = ()
    blocks: tuple[Block, ...] = ()  # base blocks in file order, then aggregated by level
    block_size: int = 0  # the planning base block size, in nodes
    # Per block level, base blocks per block as a power of two: (0, 2) for BlockSizes=30,120.
    block_levels: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def base_blocks(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.level == 0)

    @property
    def levels(self) -> int:
        """How many levels a job may name: switch levels, or block sizes."""
        if self.plugin == TREE:
            return 1 + max((s.level for s in self.switches), default=0)
        return len(self.block_levels)

    def records(self) -> list[tuple[str, str, str]]:
        """``scontrol show topology``'s records, in Slurm's order: (name, the nodes under
        it as a hostlist, the line scontrol prints, in Slurm's words)."""
        if self.plugin == TREE:
            return [
                (s.name, hostlist.compress(s.nodes, sort=False), _switch_line(s))
                for s in self.switches
            ]
        return [
            (b.name, hostlist.compress(b.nodes, sort=False), _block_line(b)) for b in self.blocks
        ]


def _switch_line(switch: Switch) -> str:
    """Slurm's ``slurm_print_topo_record``: a leaf's Nodes= as written, a switch
    above its nodes as one ranged list (Slurm's bitmap2node_name)."""
    nodes = switch.nodes_text or hostlist.compress(switch.nodes, sort=False)
    line = f"SwitchName={switch.name} Level={switch.level} LinkSpeed={switch.link_speed}"
    line += f" Nodes={nodes}"
    if switch.switches_text:
        line += f" Switches={switch.switches_text}"
    return line


def _block_line(block: Block) -> str:
    """Slurm 24.11's topology/block record."""
    kind = "AggregatedBlock" if block.level else "BlockName"
    nodes = hostlist.compress(block.nodes, sort=False)
    return f"{kind}={block.name} BlockIndex={block.index} Nodes={nodes} BlockSize={block.size}"


def load(path: str, plugin: str, nodes: Sequence[str]) -> TopologyConf:
    """Read the topology.conf at ``path`` for ``plugin``; ``nodes`` are slurm.conf's,
    in its order."""
    if not os.path.exists(path):
        raise ConfigError(path, None, f"TopologyPlugin={plugin} needs this file")
    return parse(read_text(path, (path, None), ""), path, plugin, nodes)


def parse(text: str, path: str, plugin: str, nodes: Sequence[str]) -> TopologyConf:
    """Parse topology.conf ``text`` (see the module docstring)."""
    reader = _Lines(plugin)
    reader.feed(text, path, (os.path.abspath(path),))
    known = {name: i for i, name in enumerate(nodes)}
    if plugin == TREE:
        return _tree(reader.lines, path, known)
    return _blocks(reader.lines, reader.sizes, path, known)


_Line = tuple[Where, str, dict[str, str]]  # where, the record's name, its other keys


class _Lines(Reader):
    """The SwitchName= or BlockName= lines; any other key is refused, as Slurm's
    parser stops at a key it does not know."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        tree = plugin == TREE
        self.first = "SwitchName" if tree else "BlockName"
        self.keys: tuple[str, ...] = ("Switches", "Nodes", "LinkSpeed") if tree else ("Nodes",)
        self.lines: list[_Line] = []
        self.sizes: tuple[str, Where] | None = None

    def cluster_name(self) -> str | None:
        return None

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        if not found:
            return
        key, value = found[0]
        if self.plugin == BLOCK and key.lower() == "blocksizes" and len(found) == 1:
            self.sizes = (value, where)
            return
        if key.lower() != self.first.lower():
            raise ConfigError(*where, f"Parsing error at unrecognized key: {key}")
        rest: dict[str, str] = {}
        for other, text in found[1:]:
            spelled = next((k for k in self.keys if k.lower() == other.lower()), None)
            if spelled is None:
                raise ConfigError(*where, f"Parsing error at unrecognized key: {other}")
            rest[spelled] = text
        self.lines.append((where, value, rest))


# ---------------------------------------------------------------- topology/tree


def _tree(lines: list[_Line], path: str, known: dict[str, int]) -> TopologyConf:
    if not lines:
        raise ConfigError(path, None, "No switches configured")
    seen: dict[str, Where] = {}
    leaves: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}  # node -> its leaf switch
    for where, name, keys in lines:
        _check_switch(where, name, keys, seen)
        seen[name] = where
        if "Nodes" in keys:
            leaves[name] = _leaf_nodes(where, name, keys["Nodes"], known, owner)
    children = {
        name: _children(where, name, keys["Switches"], seen)
        for where, name, keys in lines
        if "Switches" in keys
    }
    levels, reach = _resolve(lines, leaves, children, known)
    switches = tuple(
        Switch(
            name=name,
            level=levels[name],
            link_speed=_link_speed(where, keys.get("LinkSpeed")),
            nodes=reach[name],
            switches=children.get(name, ()),
            nodes_text=keys.get("Nodes", ""),
            switches_text=keys.get("Switches", ""),
        )
        for where, name, keys in lines
    )
    warnings = _unreached(path, "switches", owner, known)
    if not any(len(s.nodes) == len(known) for s in switches):
        warnings.append(
            f"{path}: TOPOLOGY: warning -- no switch can reach all nodes through its "
            "descendants. If this is not intentional, fix the topology.conf file."
        )
    return TopologyConf(TREE, path, switches=switches, warnings=tuple(warnings))


def _check_switch(where: Where, name: str, keys: dict[str, str], seen: dict[str, Where]) -> None:
    if name in seen:
        raise ConfigError(*where, f"Switch ({name}) has already been defined")
    if len(name) > _MAX_NAME:
        raise ConfigError(*where, f"SwitchName {name} is longer than {_MAX_NAME} characters")
    if "Nodes" in keys and "Switches" in keys:
        raise ConfigError(*where, f"switch {name} has both child switches and nodes")
    if "Nodes" not in keys and "Switches" not in keys:
        raise ConfigError(*where, f"switch {name} has neither child switches nor nodes")


def _leaf_nodes(
    where: Where, name: str, text: str, known: dict[str, int], owner: dict[str, str]
) -> tuple[str, ...]:
    """A leaf switch's nodes, in slurm.conf's order; each node under one leaf only."""
    names = _node_names(where, text, known, f"switch config ({name})", "switch configuration")
    twice = [n for n in names if n in owner]
    if twice:
        raise ConfigError(
            *where, f"Multiple leaf switches contain nodes: {hostlist.compress(twice)}"
        )
    owner.update(dict.fromkeys(names, name))
    return names


def _node_names(
    where: Where, text: str, known: dict[str, int], config: str, words: str
) -> tuple[str, ...]:
    """``Nodes=`` as slurm.conf's nodes, in its order; unknown names are refused."""
    try:
        names = hostlist.expand(text)
    except ValueError:
        raise ConfigError(*where, f"Invalid node name ({text}) in {config}") from None
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            *where, f"Invalid hostnames in {words}: {hostlist.compress(unknown, sort=False)}"
        )
    if not names:
        raise ConfigError(*where, f"Invalid node name ({text}) in {config}")
    return tuple(sorted(set(names), key=known.__getitem__))


def _children(where: Where, name: str, text: str, seen: dict[str, Where]) -> tuple[str, ...]:
    try:
        names = hostlist.expand(text)
    except ValueError:
        raise ConfigError(*where, f"Invalid switches: {text}") from None
    for child in names:
        if child not in seen or child == name:
            raise ConfigError(*where, f"Switch configuration {name} has invalid child ({child})")
    if not names:
        raise ConfigError(*where, f"Invalid switches: {text}")
    return tuple(dict.fromkeys(names))


def _resolve(
    lines: list[_Line],
    leaves: dict[str, tuple[str, ...]],
    children: dict[str, tuple[str, ...]],
    known: dict[str, int],
) -> tuple[dict[str, int], dict[str, tuple[str, ...]]]:
    """Each switch's level and nodes, children before parents; a cycle is refused
    with Slurm's words at the first switch on it."""
    levels = dict.fromkeys(leaves, 0)
    reach = dict(leaves)
    waiting = [(where, name) for where, name, _ in lines if name in children]
    while waiting:
        later = []
        for where, name in waiting:
            kids = children[name]
            if all(k in levels for k in kids):
                levels[name] = 1 + max(levels[k] for k in kids)
                union = {n for k in kids for n in reach[k]}
                reach[name] = tuple(sorted(union, key=known.__getitem__))
            else:
                later.append((where, name))
        if len(later) == len(waiting):
            raise ConfigError(*later[0][0], "Switch configuration is not a tree")
        waiting = later
    return levels, reach


def _link_speed(where: Where, text: str | None) -> int:
    if text is None:
        return 1
    return integer("LinkSpeed", text, where)


def _unreached(path: str, what: str, owner: Iterable[str], known: dict[str, int]) -> list[str]:
    """Slurm's warning for nodes no switch (block) reaches: jobs placed by topology
    never get them."""
    placed = set(owner)
    missing = [n for n in known if n not in placed]
    if not missing:
        return []
    names = hostlist.compress(missing, sort=False)
    return [f"{path}: {what} lack access to {len(missing)} nodes: {names}"]


# ---------------------------------------------------------------- topology/block


def _blocks(
    lines: list[_Line], sizes: tuple[str, Where] | None, path: str, known: dict[str, int]
) -> TopologyConf:
    """Base blocks, then Slurm's aggregated blocks for each level of BlockSizes."""
    if not lines:
        raise ConfigError(path, None, "No blocks configured")
    base_size, exponents = _block_sizes(sizes)
    bases: list[tuple[str, tuple[str, ...]]] = []
    owner: dict[str, str] = {}
    for where, name, keys in lines:
        if any(name == b for b, _ in bases):
            raise ConfigError(*where, f"Block ({name}) has already been defined")
        if "Nodes" not in keys:
            raise ConfigError(*where, f"block {name} hasn't got nodes")
        names = _node_names(
            where, keys["Nodes"], known, f"block config ({name})", "block configuration"
        )
        twice = [n for n in names if n in owner]
        if twice:
            raise ConfigError(*where, f"Multiple blocks contain nodes: {hostlist.compress(twice)}")
        owner.update(dict.fromkeys(names, name))
        base_size = base_size or len(names)
        if len(names) < base_size:
            raise ConfigError(
                *where, f"Block configuration ({name}) children count lower than bblock_node_cnt"
            )
        bases.append((name, names))
    levels = _used_levels(exponents, len(bases))
    blocks = _aggregate(bases, levels, base_size, known)
    return TopologyConf(
        BLOCK,
        path,
        blocks=blocks,
        block_size=base_size,
        block_levels=levels,
        warnings=tuple(_unreached(path, "blocks", owner, known)),
    )


def _block_sizes(sizes: tuple[str, Where] | None) -> tuple[int, tuple[int, ...]]:
    """BlockSizes as (base size in nodes, 0: the first block's; the level exponents)."""
    if sizes is None:
        return 0, DEFAULT_BLOCK_LEVELS
    text, where = sizes
    base = 0
    exponents: list[int] = []
    for item in text.split(","):
        size = int(item) if item.strip().isdigit() else 0
        base = base or size
        ratio = size // base if base else 0
        exponent = ratio.bit_length() - 1
        if size <= 0 or size % base or ratio != 1 << exponent or exponent > MAX_BLOCK_LEVEL:
            raise ConfigError(*where, f"Invalid BlockSizes value: {item}")
        exponents.append(exponent)
    return base, tuple(sorted(set(exponents)))


def _used_levels(exponents: tuple[int, ...], count: int) -> tuple[int, ...]:
    """The levels Slurm keeps: up to the first that holds every base block."""
    kept: list[int] = []
    for exponent in exponents:
        kept.append(exponent)
        if 1 << exponent >= count:
            break
    return tuple(kept)


def _aggregate(
    bases: list[tuple[str, tuple[str, ...]]],
    levels: tuple[int, ...],
    base_size: int,
    known: dict[str, int],
) -> tuple[Block, ...]:
    """Base blocks, then each level's aligned groups of base blocks (Slurm's
    ``block_record_validate``: a last, short group is kept when it holds more than
    one block of the level below)."""
    blocks = [
        Block(name, i, 0, names, (i,), base_size * (1 << levels[0]))
        for i, (name, names) in enumerate(bases)
    ]
    made: list[Block] = []
    for i in range(len(bases)):
        for j in range(1, len(levels)):
            width = 1 << levels[j]
            if i % width:
                continue
            members = tuple(range(i, min(i + width, len(bases))))
            if width > len(members) and (1 << levels[j - 1]) >= len(members):
                continue
            made.append(
                Block(
                    hostlist.compress((bases[k][0] for k in members), sort=False),
                    len(bases) + len(made),
                    j,
                    tuple(sorted({n for k in members for n in bases[k][1]}, key=known.__getitem__)),
                    members,
                    base_size * width,
                )
            )
    made.sort(key=lambda b: b.level)
    return (*blocks, *made)
