"""The Prolog and Epilog of a job on its nodes that do not run its batch script.

The batch script's supervisor runs the Prolog and Epilog on the batch node.
On the job's other nodes (every node of an allocation from salloc or srun)
the controller asks for them with a ``JobHook``: the Prolog at allocation
under PrologFlags=Alloc, else just before the job's first step on the node;
the Epilog once the job has given its nodes back. The agent runs each in a
worker thread, off its event loop, and answers with a ``HookDone``.

What a program did must not be lost: a failed Prolog requeues the job and
drains the node, a failed Epilog drains it. So each result is written (and
fsync'ed) under ``hookresults/`` in the spool before it is sent, sent again
on every new stream until the controller's ``AckHook``, and after the ack
kept as ``.acked`` until the job's Epilog there is acknowledged: a JobHook
repeated by a restarted controller is then answered from the file, never
run twice. A program an agent restart cut short left no record: the
controller asks again for a Prolog an allocation still waits for; any other
is lost, as slurmd's would be.

A step whose node's Prolog still runs waits for it; one whose node's Prolog
failed is refused (the controller requeues the job meanwhile). The Epilog
first waits for the job's steps there to end, at most KillWait plus
``EPILOG_GRACE`` seconds, as slurmd ends a job's processes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable

from corral.dirsync import replace_durably
from corral.wire import corral_pb2 as pb
from nodeagent.hooks import run_node_program
from nodeagent.runs import RunTable
from nodeagent.spool import SiteHooks

log = logging.getLogger(__name__)

Send = Callable[[pb.AgentMessage], None]
#: (job, restarts, node, epilog): one program's run.
Key = tuple[int, int, str, bool]

#: Seconds past KillWait the Epilog waits for the job's steps on its node to end.
EPILOG_GRACE = 10
ACKED = ".acked"


def _key(msg: pb.JobHook | pb.HookDone | pb.AckHook) -> Key:
    return (msg.job_id, msg.restarts, msg.node, msg.epilog)


def _name(key: Key) -> str:
    job_id, restarts, node, epilog = key
    return f"{job_id}.{restarts}.{node}.{'epilog' if epilog else 'prolog'}"


class NodeHooks:
    """The JobHooks of this agent's nodes: running ones, and results kept until acked."""

    def __init__(self, root: str, site: SiteHooks, table: RunTable) -> None:
        self.dir = os.path.join(root, "hookresults")
        os.makedirs(self.dir, 0o700, exist_ok=True)
        self.site = site
        self.table = table
        self._running: dict[Key, asyncio.Task[None]] = {}
        self._pending: set[asyncio.Task[None]] = set()  # steps waiting for their Prolog
        self._send: Send | None = None
        self._failed: set[tuple[int, str]] = set()  # (job, node) whose Prolog failed
        for done in self._kept(acked=True):
            if not done.epilog and not done.ok:
                self._failed.add((done.job_id, done.node))

    def connect(self, send: Send) -> None:
        self._send = send

    def disconnect(self) -> None:
        self._send = None

    # ------------------------------------------------------------ results on disk

    def _path(self, key: Key) -> str:
        return os.path.join(self.dir, _name(key))

    def _kept(self, *, acked: bool) -> list[pb.HookDone]:
        """The results on disk (those already acknowledged too, when ``acked``)."""
        found = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".tmp") or (name.endswith(ACKED) and not acked):
                continue
            with open(os.path.join(self.dir, name), "rb") as src:
                try:
                    found.append(pb.HookDone.FromString(src.read()))
                except Exception:  # a torn or foreign file: nothing to report from it
                    log.warning("hook result %s unreadable: ignored", name)
        return found

    def unacked(self) -> list[pb.HookDone]:
        """Every HookDone the controller has not acknowledged, for a new stream."""
        return self._kept(acked=False)

    def _keep(self, done: pb.HookDone) -> None:
        path = self._path(_key(done))
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, done.SerializeToString())
            os.fsync(fd)
        finally:
            os.close(fd)
        replace_durably(tmp, path)

    def ack(self, msg: pb.AckHook) -> None:
        """The controller keeps the result: a Prolog's stays as ``.acked`` (a repeated
        JobHook is not run again); an Epilog's ends the job here, and both go."""
        path = self._path(_key(msg))
        with contextlib.suppress(FileNotFoundError):
            if not msg.epilog:
                os.replace(path, path + ACKED)
                return
            os.unlink(path)
            prolog = self._path((msg.job_id, msg.restarts, msg.node, False))
            for stale in (prolog, prolog + ACKED):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(stale)
            self._failed.discard((msg.job_id, msg.node))

    def _report(self, done: pb.HookDone) -> None:
        if self._send is not None:  # else the next stream's opening carries it
            self._send(pb.AgentMessage(hook_done=done))

    # ------------------------------------------------------------ running

    def hook(self, msg: pb.JobHook) -> None:
        """Run the program ``msg`` asks for, unless it runs or ran already."""
        key = _key(msg)
        if msg.node not in self.table.hostnames:
            log.warning("job_id=%d hook for node %s not served here: ignored", msg.job_id, msg.node)
            return
        if key in self._running:
            return
        path = self._path(key)
        if os.path.exists(path + ACKED):
            return
        if os.path.exists(path):
            with open(path, "rb") as src:
                self._report(pb.HookDone.FromString(src.read()))
            return
        task = asyncio.get_running_loop().create_task(self._run(key, msg))
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))

    async def _run(self, key: Key, msg: pb.JobHook) -> None:
        program = self.site.epilog if msg.epilog else self.site.prolog
        context = "epilog_slurmd" if msg.epilog else "prolog_slurmd"
        ok, why = True, ""
        if msg.epilog:
            await self._steps_over(msg.job_id, msg.node)
        if program:  # none: slurm.conf changed here since the controller read it
            env = {**msg.environment, "SLURMD_NODENAME": msg.node}
            result = await asyncio.to_thread(
                run_node_program, self.site, program, env, msg.job_id, context
            )
            ok, why = result.ok, result.describe()
        done = pb.HookDone(
            job_id=msg.job_id,
            restarts=msg.restarts,
            node=msg.node,
            epilog=msg.epilog,
            ok=ok,
            message="" if ok else why,
        )
        if not ok and not msg.epilog:
            self._failed.add((msg.job_id, msg.node))
        await asyncio.to_thread(self._keep, done)
        self._report(done)

    async def _steps_over(self, job_id: int, node: str) -> None:
        deadline = time.monotonic() + self.table.kill_wait + EPILOG_GRACE
        while self.table.steps_on(job_id, node) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    # ------------------------------------------------------------ steps

    def launch_step(self, msg: pb.LaunchStep) -> None:
        """Launch ``msg`` once its node's Prolog is over; refuse it if that failed."""
        waits = [
            task
            for (job_id, _, node, epilog), task in self._running.items()
            if job_id == msg.job_id and node == msg.node and not epilog
        ]
        if not waits:
            self._launch(msg)
            return
        task = asyncio.get_running_loop().create_task(self._launch_after(msg, waits))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _launch_after(self, msg: pb.LaunchStep, waits: list[asyncio.Task[None]]) -> None:
        await asyncio.wait(waits)
        self._launch(msg)

    def _launch(self, msg: pb.LaunchStep) -> None:
        if (msg.job_id, msg.node) in self._failed:
            self.table.refuse(msg, "Prolog failed")
        else:
            self.table.launch(msg)
