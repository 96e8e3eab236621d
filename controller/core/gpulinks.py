"""Which of a node's free GPUs a start takes when some are better connected than
others (gres.conf ``Links=``: NVLink counts between GPUs).

Two GPUs joined by NVLink exchange data several times faster than two that only
share a PCIe switch or the inter-socket link, so a job given k GPUs of a node
should get k that are linked among themselves: for 2 GPUs a linked pair over an
unlinked one, for 4 of 8 on an HGX-style node the 4 of one NVLink island. Slurm's
cons_tres does the same (``_set_node_bits``/``_set_sock_bits`` in
gres_select_filter.c: a GPU with the most links to those already picked next).

A set's worth is the sum of the link counts between each pair in it. Nodes have
at most 16 GPUs, so every set of k among the candidates is scored where there are
few (``EXHAUSTIVE`` sets at most: 8 GPUs, any k), and otherwise a greedy growth
from each candidate (the candidate with most links to those picked next) is
scored instead. Among sets of equal worth the earliest in the candidates' order
wins, so a node without links gets exactly the GPUs it got before: the first k.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from math import comb

__all__ = ["EXHAUSTIVE", "Links", "best_linked", "link_map"]

Links = tuple[tuple[int, int, int], ...]  # (GPU a, GPU b, link count), a < b

#: The most k-sets scored one by one; beyond, the greedy growth is scored.
EXHAUSTIVE = 1024


def link_map(links: Links) -> dict[int, dict[int, int]]:
    """``links`` as a symmetric map: GPU -> linked GPU -> link count."""
    out: dict[int, dict[int, int]] = {}
    for a, b, count in links:
        out.setdefault(a, {})[b] = count
        out.setdefault(b, {})[a] = count
    return out


def _worth(chosen: Sequence[int], links: Mapping[int, Mapping[int, int]]) -> int:
    return sum(links.get(a, {}).get(b, 0) for a, b in combinations(chosen, 2))


def _grown(
    seed: int, candidates: Sequence[int], count: int, links: Mapping[int, Mapping[int, int]]
) -> list[int]:
    """``count`` candidates from ``seed``, each next the one with most links to
    those picked (the earliest among equals)."""
    chosen = [seed]
    rest = [c for c in candidates if c != seed]
    while len(chosen) < count:
        nxt = max(
            rest, key=lambda c: (sum(links.get(c, {}).get(g, 0) for g in chosen), -rest.index(c))
        )
        chosen.append(nxt)
        rest.remove(nxt)
    return chosen


def best_linked(
    candidates: Sequence[int], count: int, links: Mapping[int, Mapping[int, int]]
) -> list[int] | None:
    """``count`` of ``candidates`` (in their order of preference) with the most links
    among them, in candidate order; the first ``count`` where no two are linked;
    None when there are fewer than ``count``."""
    if len(candidates) < count:
        return None
    if count < 2 or not any(links.get(c) for c in candidates):
        return list(candidates[:count])
    if comb(len(candidates), count) <= EXHAUSTIVE:
        sets: list[Sequence[int]] = list(combinations(candidates, count))
    else:
        sets = [_grown(seed, candidates, count, links) for seed in candidates]
    order = {c: i for i, c in enumerate(candidates)}
    best = max(
        sets,
        key=lambda s: (_worth(s, links), [-order[c] for c in sorted(s, key=order.__getitem__)]),
    )
    return sorted(best, key=order.__getitem__)
