"""The tasks' output as srun and sattach print it: as it comes, or with ``-l`` each
line prefixed by its task (``  3: ``, the width of the largest task id), a line's
start kept until its end comes so that tasks' lines never mix."""

from __future__ import annotations

import sys

from corral import stepio


class TaskLines:
    """One client's stdout and stderr for a step's tasks."""

    def __init__(self, label: bool, ntasks: int) -> None:
        self.label = label
        self.width = len(str(max(ntasks - 1, 0)))
        self.partial: dict[tuple[int, int], bytes] = {}

    def write(self, kind: int, task: int, data: bytes) -> None:
        """``data`` task ``task`` wrote on stdout (kind OUT) or stderr (ERR)."""
        stream = sys.stdout.buffer if kind == stepio.OUT else sys.stderr.buffer
        if not self.label:
            stream.write(data)
            stream.flush()
            return
        prefix = f"{task:>{self.width}}: ".encode()
        data = self.partial.pop((kind, task), b"") + data
        *lines, rest = data.split(b"\n")
        if lines:
            stream.write(b"".join(prefix + line + b"\n" for line in lines))
            stream.flush()
        if rest:
            self.partial[(kind, task)] = rest

    def flush(self) -> None:
        """The lines still unended, ended: the step is over."""
        for (kind, task), rest in sorted(self.partial.items()):
            stream = sys.stdout.buffer if kind == stepio.OUT else sys.stderr.buffer
            stream.write(f"{task:>{self.width}}: ".encode() + rest + b"\n")
        self.partial.clear()
        sys.stdout.flush()
        sys.stderr.flush()
