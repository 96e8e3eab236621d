"""Which of a step's runners srun's standard input goes to, and as which IN frames.

Slurm 22.05's srun sends its stdin to every task by default; ``-i N`` to task N alone;
``-i FILE`` (no per-task pattern) sends the file's bytes to every task;
``-i none`` and per-task patterns send nothing (``corral/stepinput.py`` reads the
value). Under ``--pty`` the one terminal is task 0's. Runners connect one by one,
and input may come before some have: what was read is kept, in order, until every
runner it is for has connected and had all of it, so each gets the same stream.
"""

from __future__ import annotations

from corral import stepinput, stepio


class InputRoute:
    """The runners (node ids) an input is for, the task its frames name
    (``stepio.ALL_TASKS``: every task fed), and what was read before all of them
    connected. sattach routes its input so too."""

    def __init__(self, task: int, nodes: set[int]) -> None:
        self.task = task
        self.nodes = nodes
        self.connected: set[int] = set()
        self.history: list[bytes] = []  # kept while a runner it is for has not connected

    @classmethod
    def of_srun(cls, value: str, ntasks: int, ids: list[list[int]], pty: bool) -> InputRoute:
        """srun's: ``value`` its ``--input``, ``ids`` each node's global task ids."""
        form, task = stepinput.mode(value, ntasks)
        if pty:  # the terminal is task 0's alone
            form, task = stepinput.TASK, 0
        if form == stepinput.TASK:
            return cls(task, {n for n, node_ids in enumerate(ids) if task in node_ids})
        if form in (stepinput.ALL, stepinput.SRUN_FILE):
            return cls(stepio.ALL_TASKS, set(range(len(ids))))
        return cls(stepio.ALL_TASKS, set())

    @property
    def reads(self) -> bool:
        """Whether srun reads any input for the step."""
        return bool(self.nodes)

    def frame(self, data: bytes) -> bytes:
        return stepio.input_frame(data, self.task)

    def connect(self, node_id: int) -> list[bytes]:
        """Runner ``node_id`` connected: the IN frames it missed."""
        if node_id not in self.nodes or node_id in self.connected:
            return []
        self.connected.add(node_id)
        frames = [self.frame(data) for data in self.history]
        if self.connected == self.nodes:
            self.history.clear()
        return frames

    def read(self, data: bytes) -> tuple[list[int], bytes]:
        """Input read (empty: its end): the connected runners to send it to, and the
        frame."""
        if self.connected != self.nodes:
            self.history.append(data)
        return sorted(self.connected), self.frame(data)
