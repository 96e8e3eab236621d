"""``--distribution`` (``-m``, SLURM_DISTRIBUTION): its grammar, for srun and the
controller alike.

``{*|block|cyclic|arbitrary|plane=<size>}[:{*|block|cyclic|fcyclic}[:{*|block|cyclic|fcyclic}]][,{Pack|NoPack}]``

The first word lays tasks out over nodes (``controller/tasklayout.py``); the
second and third say how a node's CPUs are dealt to its tasks for binding,
over sockets and over cores (``nodeagent/cpubind.py``); ``Pack`` fills nodes
one after the other under ``block``. ``plane`` takes no second word, and its
size may come from SLURM_DIST_PLANESIZE. A text Slurm would refuse raises
ValueError with srun's words.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INVALID", "Distribution", "job_text", "parse"]

INVALID = "Invalid --distribution specification"
_NODE = ("block", "cyclic", "arbitrary", "plane")
_CPU = ("block", "cyclic", "fcyclic")


@dataclass(frozen=True, slots=True)
class Distribution:
    """A parsed ``--distribution``: "" for a level left to its default (``*``)."""

    nodes: str = ""  # block, cyclic, arbitrary or plane
    plane: int = 0  # plane's size
    sockets: str = ""  # block, cyclic or fcyclic
    cores: str = ""
    pack: bool | None = None  # Pack, NoPack, or neither

    @property
    def method(self) -> str:
        """The node-level method in effect: block unless another was named."""
        return self.nodes or "block"

    @property
    def socket_method(self) -> str:
        """CPUs over sockets: cyclic by default, as Slurm's."""
        return self.sockets or "cyclic"

    @property
    def core_method(self) -> str:
        """CPUs over cores: the socket level's by default."""
        return self.cores or self.socket_method

    def text(self) -> str:
        """SLURM_DISTRIBUTION's value: the levels named, ``*`` for a default one."""
        if self.nodes == "plane":
            words = "plane"
        else:
            levels = [self.nodes or "*", self.sockets or "*", self.cores or "*"]
            while len(levels) > 1 and levels[-1] == "*":
                levels.pop()
            words = ":".join(levels) if levels != ["*"] else "block"
        if self.pack is not None:
            words += ",Pack" if self.pack else ",NoPack"
        return words


def parse(text: str, plane_size: str = "") -> Distribution:
    """``text`` as srun reads it (``plane_size``: SLURM_DIST_PLANESIZE)."""
    body, _, flag = text.partition(",")
    pack: bool | None = None
    if flag:
        if flag.lower() not in ("pack", "nopack"):
            raise ValueError(INVALID)
        pack = flag.lower() == "pack"
    levels = body.split(":")
    if len(levels) > 3 or not levels[0]:
        raise ValueError(INVALID)
    first, _, size = levels[0].partition("=")
    first = first.lower()
    if first not in (*_NODE, "*"):
        raise ValueError(INVALID)
    plane = 0
    if first == "plane":
        size = size or plane_size
        if not size.isdigit() or int(size) < 1:
            raise ValueError(f"Invalid plane size or size not specified\n{INVALID}")
        if len(levels) > 1:  # srun(1): no other distribution with plane
            raise ValueError(INVALID)
        plane = int(size)
    elif size:
        raise ValueError(INVALID)
    rest = [word.lower() for word in levels[1:]]
    if any(word not in (*_CPU, "*") for word in rest):
        raise ValueError(INVALID)
    sockets, cores = [*rest, "*", "*"][:2]
    return Distribution(
        nodes="" if first == "*" else first,
        plane=plane,
        sockets="" if sockets == "*" else sockets,
        cores="" if cores == "*" else cores,
        pack=pack,
    )


def job_text(text: str) -> str:
    """SLURM_DISTRIBUTION as Slurm 22.05's sbatch sets it for a job's ``-m text``: the
    levels given, each ``*`` as its default (``*:block``: ``block:block``;
    ``cyclic:*``: ``cyclic:cyclic``; ``block:fcyclic:*``: ``block:fcyclic:fcyclic``),
    ``plane`` without its size, the flag in lower case (``block,pack``)."""
    dist = parse(text)
    body, _, flag = text.partition(",")
    if dist.nodes == "plane":
        words = "plane"
    else:
        levels = (dist.method, dist.socket_method, dist.core_method)
        words = ":".join(levels[: len(body.split(":"))])
    return f"{words},{flag.lower()}" if flag else words
