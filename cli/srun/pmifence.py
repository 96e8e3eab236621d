"""srun's part of a PMI fence (``--mpi=pmi2``): the gather and the broadcast.

Each node's step runner sends the puts its tasks made since the last fence
(KVS frames), then FENCE once every task there has entered it
(``nodeagent/pmi.py``). When the last node's FENCE is in, srun sends every
KVS frame it gathered to every node, then FENCE: the union of the step's puts,
after which each runner lets its tasks go on. srun never reads the pairs, and
all of it travels on the step's sealed connections (``corral/stepcipher.py``),
so only holders of the step's key take part.
"""

from __future__ import annotations

from corral import stepio


class Fence:
    """The fence in progress: the pieces gathered and the nodes that have entered."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.pieces: list[bytes] = []
        self.entered: set[int] = set()
        self.completed = 0  # fences over, for the curious (bench/mpi.py)

    def add(self, payload: bytes) -> None:
        """A KVS frame's payload from a node in this fence."""
        self.pieces.append(payload)

    def enter(self, node_id: int) -> list[bytes]:
        """Node ``node_id`` entered; the frames for every node once all have (else [])."""
        self.entered.add(node_id)
        if len(self.entered) < self.nodes:
            return []
        frames = [stepio.frame(stepio.KVS, 0, piece) for piece in self.pieces]
        frames.append(stepio.frame(stepio.FENCE, 0))
        self.pieces, self.entered = [], set()
        self.completed += 1
        return frames
