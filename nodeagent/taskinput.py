"""The stdin pipes a step runner feeds: one per task that reads srun's input.

srun sends its standard input to every task by default (Slurm's ``--input=all``), to
one task with ``-i N``, and sattach may name one task (``--input-filter``); an IN
frame names its task or ``stepio.ALL_TASKS`` (``corral/stepio.py``). Each task takes
its bytes at its own pace, so each pipe has its own queue: a task that reads slowly
holds back only itself until its queue passes the runner's high-water mark, when the
runner stops reading srun's socket (as slurmstepd stops when its buffers are spent).

Standard library and the step protocol only: the runner imports this.
"""

from __future__ import annotations

import os

from corral import stepio


class TaskInput:
    """One task's stdin: the runner's (non-blocking) end of its pipe or terminal, the
    bytes not yet written, and whether its input has ended."""

    def __init__(self, task_id: int, fd: int) -> None:
        self.task_id = task_id
        self.fd = fd
        self.queued = bytearray()
        self.ended = False

    def flush(self) -> bool:
        """Write what the pipe takes now; False once the task cannot take any more
        (it closed its stdin or ended) or its input ended and all of it was written:
        the pipe is then to be closed."""
        while self.queued:
            try:
                written = os.write(self.fd, self.queued)
            except BlockingIOError:
                return True
            except OSError:  # EPIPE: the task closed its stdin or ended
                self.queued.clear()
                return False
            del self.queued[:written]
        return not self.ended


class Inputs:
    """The open stdin pipes of this node's tasks, by global task id."""

    def __init__(self) -> None:
        self.by_task: dict[int, TaskInput] = {}
        # False under srun -i N: input for every task then reaches none (measured on
        # 22.05: sattach without --input-filter feeds nothing there)
        self.broadcast = True

    def add(self, task_id: int, fd: int) -> None:
        self.by_task[task_id] = TaskInput(task_id, fd)

    def route(self, task: int) -> list[TaskInput]:
        """The open pipes an IN frame for ``task`` reaches."""
        if task == stepio.ALL_TASKS:
            return list(self.by_task.values()) if self.broadcast else []
        found = self.by_task.get(task)
        return [found] if found is not None else []

    def queue(self, task: int, payload: bytes) -> list[TaskInput]:
        """Queue an IN frame's bytes (empty: its end) for each task it names; the pipes
        to flush."""
        reached = self.route(task)
        for one in reached:
            if payload:
                one.queued += payload
            else:
                one.ended = True
        return reached

    def backlog(self) -> int:
        """The longest queue: what decides whether srun's socket is read."""
        return max((len(one.queued) for one in self.by_task.values()), default=0)

    def remove(self, one: TaskInput) -> None:
        """Forget and close ``one``'s pipe."""
        if self.by_task.get(one.task_id) is one:
            del self.by_task[one.task_id]
            os.close(one.fd)

    def all(self) -> list[TaskInput]:
        return list(self.by_task.values())
