"""The agent's stream to the controller (AgentLink.Attach), kept up forever.

Each stream starts the same way: AgentHello (served nodes, version, start
time, jobs alive here), then the StepDones made while no stream was up and
every JobDone not yet acknowledged, in that order: a job's steps are recorded
before the job ends (its end cancels the steps still unrecorded); last, every
HookDone not yet acknowledged. The controller answers Welcome (heartbeat
interval, KillWait) and from then on sends launch, launch_step, signal,
suspend, resize, update and ack_done requests, which all go to the agent's one table of runs
(:mod:`nodeagent.runs`), and hook and ack_hook requests, the Prolog and
Epilog of jobs whose batch script runs elsewhere, which go to
:mod:`nodeagent.nodehooks` (as launch_step does first, so that a step waits
for its node's Prolog), and sbcast's file_block requests, which
:mod:`nodeagent.filebcast` writes and answers on the stream they came on.
JobRunning and JobDone reports produced while the stream is up are queued
on it; while it is down they are dropped, because the next hello and JobDone
backlog say the same thing (StepDones, which nothing acknowledges, wait for
the next stream instead, and those a stream may not have delivered are taken
back for the next). When the stream breaks
the agent reconnects after 0.1 s, doubling up to 2 s while attempts keep
failing; jobs keep running meanwhile. With several SlurmctldHost lines a stream
that could not start (the controller away, or a backup in standby refusing it)
is tried at the next line's controller at once, and the pause comes only after
a round of them all (docs/ha.md): the agent registers with whichever serves,
and its backlog of results goes there. After a hello the controller says again
whether each job it ever suspended is suspended, so a resume lost with a
broken stream leaves no job stopped for good.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

from corral import __version__, grpctls
from corral.tlsconf import TlsConfig
from corral.wire import corral_pb2 as pb
from nodeagent.filebcast import FileBlocks, Send
from nodeagent.nodehooks import NodeHooks
from nodeagent.runs import RunTable
from nodeagent.signing import AgentAuth

log = logging.getLogger(__name__)

MAX_MESSAGE = 64 * 1024 * 1024
BACKOFF_MIN = 0.1
BACKOFF_MAX = 2.0
ATTACH = "/corral.v1.AgentLink/Attach"
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.max_receive_message_length", MAX_MESSAGE),
]


class Link:
    """One agent's connection to the serving controller, reconnecting until cancelled."""

    def __init__(
        self,
        targets: Sequence[str],
        nodes: Sequence[pb.NodeRegistration],
        table: RunTable,
        start_time: int,
        auth: AgentAuth,
        tls: TlsConfig,
        hooks: NodeHooks | None = None,
    ) -> None:
        self.targets = list(targets)
        self.target = self.targets[0]  # the controller of the stream being tried
        self.tls = tls
        self.nodes = list(nodes)
        self.table = table
        self.hooks = hooks  # the Prolog and Epilog of jobs' other nodes (JobHook)
        self.start_time = start_time
        self.auth = auth
        self.files = FileBlocks()  # sbcast's blocks, written as the job's user
        self._answer: Send | None = None  # the stream that is up, for answers
        self.reboot: Callable[[str], None] | None = None  # RebootProgram (nodeagent/reboot.py)

    async def run(self) -> None:
        """Keep a stream up until cancelled, with whichever controller serves."""
        channels = [grpctls.channel(t, self.tls, options=CHANNEL_OPTIONS) for t in self.targets]
        attaches = [
            channel.stream_stream(
                ATTACH,
                request_serializer=pb.AgentMessage.SerializeToString,
                response_deserializer=pb.ControllerMessage.FromString,
            )
            for channel in channels
        ]
        try:
            delay = BACKOFF_MIN
            was_up = True
            at = 0
            while True:
                self.target = self.targets[at]
                welcomed = await self._session(attaches[at], quiet=not was_up)
                if welcomed:
                    delay = BACKOFF_MIN
                else:
                    at = (at + 1) % len(attaches)
                was_up = welcomed
                if welcomed or at == 0:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_MAX)
        finally:
            for channel in channels:
                await channel.close()

    def _opening(self) -> list[pb.AgentMessage]:
        """Hello plus the StepDone and JobDone backlogs, taken at one instant."""
        step_dones = self.table.backlog()
        reported = [
            pb.StepRunning(job_id=d.job_id, step_id=d.step_id, node=d.node) for d in step_dones
        ]
        hello = self.auth.hello(
            pb.AgentHello(
                nodes=self.nodes,
                version=__version__,
                agent_start_time=self.start_time,
                running=self.table.running(),
                steps=[*self.table.steps(), *reported],
                reports_steps=True,
            )
        )
        backlog = [pb.AgentMessage(done=done) for done in self.table.unacked()]
        steps = [pb.AgentMessage(step_done=done) for done in step_dones]
        hooks = [pb.AgentMessage(hook_done=d) for d in self.hooks.unacked()] if self.hooks else []
        return [pb.AgentMessage(hello=hello), *steps, *backlog, *hooks]

    async def _session(self, attach: Any, *, quiet: bool) -> bool:
        """Run one stream to its end; True if the controller welcomed us."""
        queue: asyncio.Queue[pb.AgentMessage] = asyncio.Queue()
        # Connect before taking the snapshot: every report made after it is
        # queued, every one made before is in it, none is in both.
        self.table.connect(queue.put_nowait)
        self._answer = queue.put_nowait
        if self.hooks is not None:
            self.hooks.connect(queue.put_nowait)
        opening = self._opening()

        async def outgoing() -> AsyncIterator[pb.AgentMessage]:
            for message in opening:
                yield message
            while True:
                yield await queue.get()

        call = attach(outgoing())
        heartbeat: asyncio.Task[None] | None = None
        welcomed = False
        try:
            async for reply in call:
                refused = self.auth.refusal(reply)
                if refused is not None:
                    self._refuse(reply, refused)
                elif reply.WhichOneof("body") == "welcome":
                    welcomed = True
                    if heartbeat is not None:
                        heartbeat.cancel()
                    heartbeat = self._welcome(reply.welcome, queue)
                else:
                    self._dispatch(reply)
            log.warning("controller %s closed the stream", self.target)
        except grpc.aio.AioRpcError as exc:
            level = logging.DEBUG if quiet else logging.WARNING
            log.log(level, "stream to %s broke: %s %s", self.target, exc.code(), exc.details())
        finally:
            self.table.disconnect()
            self._answer = None
            if self.hooks is not None:
                self.hooks.disconnect()
            if heartbeat is not None:
                heartbeat.cancel()
            call.cancel()
            self.table.restore(_undelivered(opening if not welcomed else [], queue))
        return welcomed

    def _welcome(
        self, welcome: pb.Welcome, queue: asyncio.Queue[pb.AgentMessage]
    ) -> asyncio.Task[None] | None:
        log.info(
            "attached to controller %s (cluster %s, heartbeat %ds, kill_wait %ds)",
            self.target,
            welcome.cluster,
            welcome.heartbeat_interval,
            welcome.kill_wait,
        )
        self.table.kill_wait = welcome.kill_wait
        if welcome.heartbeat_interval == 0:
            return None
        return asyncio.create_task(_beat(queue, welcome.heartbeat_interval))

    def _refuse(self, reply: pb.ControllerMessage, reason: str) -> None:
        """A message without a valid controller credential: nothing is done, but a
        launch of a job this agent does not have is reported as failed."""
        kind = reply.WhichOneof("body")
        if kind == "launch":
            self.table.refuse(reply.launch, reason)
        elif kind == "launch_step":
            self.table.refuse(reply.launch_step, reason)
        else:
            job_id = getattr(getattr(reply, kind), "job_id", 0) if kind else 0
            log.warning("controller message %s (job_id=%d) refused: %s", kind, job_id, reason)

    def _dispatch(self, reply: pb.ControllerMessage) -> None:
        kind = reply.WhichOneof("body")
        job_id = getattr(getattr(reply, kind), "job_id", 0) if kind else 0
        try:
            if kind == "launch":
                self.table.launch(reply.launch)
            elif kind == "launch_step" and self.hooks is not None:
                self.hooks.launch_step(reply.launch_step)
            elif kind == "launch_step":
                self.table.launch(reply.launch_step)
            elif kind == "hook" and self.hooks is not None:
                self.hooks.hook(reply.hook)
            elif kind == "ack_hook" and self.hooks is not None:
                self.hooks.ack(reply.ack_hook)
            elif kind == "signal":
                self.table.signal(reply.signal)
            elif kind == "update":
                self.table.update(reply.update)
            elif kind == "suspend":
                self.table.suspend(reply.suspend)
            elif kind == "resize":
                self.table.resize(reply.resize)
            elif kind == "ack_done":
                self.table.ack(reply.ack_done)
            elif kind == "attach_step":
                self.table.attach(reply.attach_step)
            elif kind == "file_block" and self._answer is not None:
                self.files.receive(reply.file_block, self._answer)
            elif kind == "reboot" and self.reboot is not None:
                self.reboot(reply.reboot.node)
            else:
                log.warning("unexpected controller message %s", kind)
        except Exception:
            # One bad request (a full disk, say) must not drop the stream for all jobs.
            log.exception("job_id=%d handling controller message %s failed", job_id, kind)


def _undelivered(
    opening: list[pb.AgentMessage], queue: asyncio.Queue[pb.AgentMessage]
) -> list[pb.StepDone]:
    """The StepDones of a stream that ended which may not have reached the controller:
    its opening's when it was never welcomed, and those still queued. (JobDones need
    no such care: they go out again until acknowledged.)"""
    left = list(opening)
    while not queue.empty():
        left.append(queue.get_nowait())
    return [m.step_done for m in left if m.WhichOneof("body") == "step_done"]


async def _beat(queue: asyncio.Queue[pb.AgentMessage], interval: int) -> None:
    while True:
        await asyncio.sleep(interval)
        queue.put_nowait(pb.AgentMessage(heartbeat=pb.Heartbeat(time=int(time.time()))))
