"""Checkpoints a job reports by touching a file: for jobs that cannot run scontrol.

Preemption and reclaim take first the victims that lose the least work, those that
have run the least since their last checkpoint (docs/design.md, "Victims that lose
the least work"). A job reports one with ``scontrol update job N Checkpointed=now``;
one in a container, or on a node without the commands, touches the file its
``CORRAL_CHECKPOINT_FILE`` names instead (``touch "$CORRAL_CHECKPOINT_FILE"``,
``os.utime(path)``, or saving a file over it by rename).

Each run (the batch script, a step's tasks on one node) has its own file, in a
directory of the job user's own inside the run's directory, made by the agent at
launch and dated 1970, never touched (:meth:`nodeagent.spool.RunDir.create_checkpoint`),
and removed with the run's directory. Every :data:`INTERVAL` seconds the agent looks
at each live run's file and reports every modification time it has not reported on
the current stream (:class:`CheckpointWatch`), all in one ``Checkpoints`` message; the
controller records each as Checkpointed= (``controller/agentlink.py``).

Why a look of its own every few seconds: the JobAcctGatherFrequency samples may be
off (``jobacct_gather/none``, or a frequency of 0), and a checkpoint must not depend
on accounting; the 0.1 s poll of the run directories is for runs without a notify
pipe, and would look at every file ten times a second. The time reported is the
file's, not the time it was seen, so the interval only delays the report; one lstat
per live run every two seconds costs nothing beside the runs themselves. lstat, not
stat: the agent, root, never follows a link the user put in place of the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from corral.wire import corral_pb2 as pb
from nodeagent.runkinds import RunKey

#: The job's environment variable naming its run's file (Corral's own: Slurm has none).
CHECKPOINT_ENV = "CORRAL_CHECKPOINT_FILE"
#: Seconds between two looks at the live runs' files.
INTERVAL = 2.0


@dataclass(frozen=True, slots=True)
class Watched:
    """One live run's file, and the job and node a touch of it reports for."""

    key: RunKey
    path: str
    job_id: int
    node: str


def touched(path: str) -> int | None:
    """The file's modification time in nanoseconds; None while it is missing, or
    dated 1970 or before (never touched)."""
    try:
        mtime = os.lstat(path).st_mtime_ns
    except OSError:
        return None
    return mtime if mtime > 0 else None


class CheckpointWatch:
    """What one stream has been told: per run, the modification time last reported."""

    def __init__(self) -> None:
        self._reported: dict[RunKey, int] = {}

    def look(self, files: Iterable[Watched]) -> list[pb.Checkpoint]:
        """A Checkpoint for each file touched since it was last reported (the run's
        first touch included); runs no longer among ``files`` are forgotten."""
        reported: dict[RunKey, int] = {}
        found = []
        for watched in files:
            mtime = touched(watched.path)
            last = self._reported.get(watched.key)
            if mtime is not None and mtime != last:
                found.append(_checkpoint(watched, mtime))
                last = mtime
            if last is not None:
                reported[watched.key] = last
        self._reported = reported
        return found

    def last(self, watched: Watched) -> pb.Checkpoint | None:
        """The Checkpoint of a run that has just ended, if it touched its file since the
        last look (a step that saves its state and exits at once); the run is forgotten."""
        mtime = touched(watched.path)
        if mtime is None or mtime == self._reported.pop(watched.key, None):
            return None
        return _checkpoint(watched, mtime)


def _checkpoint(watched: Watched, mtime_ns: int) -> pb.Checkpoint:
    return pb.Checkpoint(job_id=watched.job_id, node=watched.node, time=mtime_ns // 1_000_000_000)
