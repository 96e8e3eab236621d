"""``scontrol listpids``: the processes of the runs on this host, by job, step and task.

slurmd answers it from each step's proctrack container. Here each run's process
group (the one its runner forks every task into: ``nodeagent/runner.py``) is
looked for in ``/proc``, with each task's own pid (a pty's task leads a session
of its own), and each task is named by the ids its runner recorded when it
started (``Started.tasks``); the other processes of a run (a task's children)
have none. The agent answers on its client socket, for the caller the kernel
names: root and SlurmUser see every run, a user only their own jobs'.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from corral.wire import corral_pb2 as pb
from nodeagent.runkinds import BATCH, Run
from nodeagent.spool import JobDir, StepDir


def _groups() -> dict[int, list[int]]:
    """Every process of this host by its process group."""
    members: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            members.setdefault(os.getpgid(int(entry)), []).append(int(entry))
        except ProcessLookupError:  # gone meanwhile
            continue
    return members


def _owner(run: Run) -> tuple[str, int] | None:
    """(node, uid) of a run, from its launch; None when it cannot be read."""
    if isinstance(run.dir, JobDir):
        launch = run.dir.read_launch()
        return None if launch is None else (launch.node, launch.uid)
    if isinstance(run.dir, StepDir):
        spec = run.dir.read_spec()
        return None if spec is None else (spec.node, spec.uid)
    return None


def answer(
    runs: Iterable[Run], request: pb.ListPidsRequest, uid: int, privileged: bool
) -> pb.ListPidsReply:
    """The rows of the live runs ``request`` selects that ``uid`` may see."""
    reply = pb.ListPidsReply()
    chosen: list[tuple[Run, str]] = []
    for run in runs:
        job_id, step, _ = run.key
        owner = _owner(run)
        if run.done is not None or owner is None or (not privileged and owner[1] != uid):
            continue
        if request.job_id and job_id != request.job_id:
            continue
        if request.step and str(step) != request.step:
            continue
        if request.node and owner[0] != request.node:
            continue
        chosen.append((run, str(step)))
    reply.runs = len(chosen)
    groups = _groups() if chosen else {}
    alive = {pid for members in groups.values() for pid in members}
    for run, step in sorted(chosen, key=lambda item: (item[0].key[0], item[1] != BATCH, item[1])):
        started = run.started or run.dir.read_started()
        if started is None:
            continue
        tasks = {pid: (local, rank) for pid, local, rank in started.tasks}
        pids = set(groups.get(started.pid, ())) | {p for p in tasks if p in alive}
        for pid in sorted(pids):
            local, rank = tasks.get(pid, (-1, -1))
            reply.rows.add(pid=pid, job_id=run.key[0], step=step, local_id=local, global_id=rank)
    return reply
