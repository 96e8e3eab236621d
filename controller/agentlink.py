"""The controller's side of the AgentLink stream: one session per node agent.

An agent opens ``Attach`` and says hello with the nodes it serves and the jobs
still alive on them. The controller then:
  * relaunches every job it believes runs there that the agent does not list
    (the launch may have been lost in a crash; agents ignore a launch of a
    job/run they already know, so this is safe),
  * takes JobDone reports, makes them durable, then acknowledges them (the
    agent keeps each result on disk until then),
  * sends launches, signals and time-limit updates as the scheduler and users
    ask for them.
Liveness: each message from an agent refreshes its nodes; ``check_nodes``
turns nodes silent past SlurmdTimeout DOWN and handles their jobs.

Trust: a stream counts for nothing until its hello carries a credential made
for it by root or SlurmUser (only daemons hold the key, and a user's credential
names the user). A session then speaks only for the nodes it attached: a
report about a job placed elsewhere is logged and dropped. A node held by a
live session cannot be taken over by a second one; a session silent for
``DEAD_AFTER`` seconds is taken for dead, and a restarting agent's old stream
normally ends at once anyway. Every message to an agent carries the
controller's credential, made with the seal key for that agent and message.

Why this module is over 500 lines: it is the controller's side of one protocol;
hello and reconciliation, reports, commands and node health share the sessions
and must agree on them. What a transition tells an agent is decided elsewhere
(``controller/effects.py``); the launch message's fields in ``launchmsg.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any

import grpc

from controller import (
    cpubind,
    gpubind,
    hetjobs,
    jobstate,
    jobupdate,
    powersave,
    reboots,
    stepcpus,
)
from controller.broadcast import FileBroadcasts, step_copy
from controller.ctldhooks import ControllerHooks
from controller.diag import AgentStats
from controller.effects import (
    Continue,
    Effect,
    Ended,
    Granted,
    Kill,
    Launch,
    Mail,
    NewLimit,
    NodeEpilog,
    NodeProlog,
    RebootNode,
    Resized,
    Signal,
    Stop,
)
from controller.hetsteps import HetPart
from controller.holdings import holds_nodes
from controller.jobenv import batch_environment, gpu_environment, run_length, without_grants
from controller.jobstate import InvalidTransition
from controller.journal import JournalWriteError
from controller.launchmsg import gpu_grant, launch_job
from controller.mail import Mailer
from controller.model import Job, Step
from controller.nodehooks import NodeHooks, prolog_failed
from controller.powersave import PowerSaver
from controller.steps import DEFAULT, cpu_bind_environment, step_environment
from controller.stepusage import UsageBoard
from controller.store import JobStore, Registration
from corral import auth, credentials, distribution, hostlist
from corral import cpubind as cpubind_syntax
from corral.credentials import Verifier
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL = 2  # seconds
RESULT_GRACE = 5.0  # seconds to wait for a result after a hello
#: Seconds of silence after which a session is taken for dead: a second agent may
#: then attach for its nodes (a live one heartbeats every HEARTBEAT_INTERVAL).
DEAD_AFTER = 3 * HEARTBEAT_INTERVAL + 1


class Refused(Exception):
    """A stream that is not let in (its reason is logged and sent back)."""


class _Session:
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.name = ""  # the hello's first node: the agent's name in its credentials
        self.nodes: list[str] = []
        self.heard = time.monotonic()
        self.queue: asyncio.Queue[pb.ControllerMessage] = asyncio.Queue()

    def send(self, message: pb.ControllerMessage) -> None:
        self.queue.put_nowait(message)

    def alive(self, now_mono: float) -> bool:
        return now_mono - self.heard <= DEAD_AFTER


class AgentLink(pb_grpc.AgentLinkServicer):
    def __init__(
        self, store: JobStore, key: bytes, verifier: Verifier, on_change: Callable[[], None]
    ) -> None:
        self.store = store
        self.key = key  # the seal key: what the controller sends agents
        self.verifier = verifier  # agents' hellos, as the Controller service's calls
        self.ttl = verifier.ttl
        self.agents = auth.daemon_uids(store.conf.slurm_user)
        self.on_change = on_change  # wakes the scheduler
        self.sessions: dict[str, _Session] = {}  # node name -> session
        self.config_path = store.conf.path
        self._flushes: set[asyncio.Future[None]] = set()
        self.usage = UsageBoard()  # the agents' latest samples of live steps (sstat)
        self.hooks = ControllerHooks(store, self.launch, on_change)  # PrologSlurmctld and its twin
        self.nodehooks = NodeHooks(store, self._send_to)  # Prolog and Epilog off the batch node
        self.mailer = Mailer()  # --mail-type's mail, by MailProg
        self.files = FileBroadcasts()  # sbcast's blocks the agents have not answered yet
        self.power = PowerSaver(store)  # SuspendProgram and ResumeProgram
        self.stats = AgentStats()  # heartbeat handling times (the metrics endpoint)

    def load(self) -> tuple[int, int]:
        """(agents connected, messages queued for them): sdiag's agent figures."""
        sessions = {id(s): s for s in self.sessions.values()}
        return len(sessions), sum(s.queue.qsize() for s in sessions.values())

    # ------------------------------------------------------------ stream

    async def Attach(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: Any
    ) -> AsyncIterator[pb.ControllerMessage]:
        session = _Session(context.peer())
        reader = asyncio.create_task(self._read(request_iterator, session))
        refused = None
        getter: asyncio.Task[pb.ControllerMessage] | None = None
        try:
            while True:
                getter = asyncio.create_task(session.queue.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield self._sealed(getter.result(), session)
                    continue
                getter.cancel()
                failure = reader.exception()
                if isinstance(failure, Refused):
                    refused = str(failure)
                    log.warning("agent %s refused: %s", session.peer, refused)
                elif failure is not None:
                    log.warning("agent %s: %s", session.peer, failure)
                break
        finally:  # also when the agent goes away while both tasks wait: none is left pending
            reader.cancel()
            if getter is not None:
                getter.cancel()
            self._detach(session)
        if refused is not None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, refused)

    def _sealed(self, message: pb.ControllerMessage, session: _Session) -> pb.ControllerMessage:
        """``message`` with the controller's credential for this agent, made as it leaves."""
        kind = message.WhichOneof("body") or ""
        sealed: pb.ControllerMessage = credentials.stamp(
            message,
            self.key,
            uid=os.getuid(),
            gid=os.getgid(),
            method=credentials.agent_message_method(kind),
            receiver=auth.agent_receiver(self.store.conf.cluster_name, session.name),
            ttl=self.ttl,
        )
        return sealed

    async def _read(self, messages: AsyncIterator[pb.AgentMessage], session: _Session) -> None:
        async for message in messages:
            kind = message.WhichOneof("body")
            if not session.name:
                if kind != "hello":
                    raise Refused(f"{kind or 'an empty message'} before hello")
                self._admit(message.hello, session)
            elif kind == "hello":
                raise Refused("a second hello on one stream")
            began = time.perf_counter()
            now_mono = time.monotonic()
            session.heard = now_mono
            self._heard(session, now_mono)
            if kind == "heartbeat":
                self.stats.heard(time.perf_counter() - began)
            elif kind == "hello":
                await self._hello(message.hello, session)
            elif kind == "done":
                await self._done(message.done, session)
            elif kind == "step_done":
                self._step_done(message.step_done, session)
            elif kind == "running":
                self._running(message.running, session)
            elif kind == "usage":
                dropped = self.usage.take(message.usage.steps, session.nodes)
                if dropped:
                    log.warning("agent %s sent %d samples of other nodes", session.peer, dropped)
            elif kind == "drain":
                self._drain(message.drain, session)
            elif kind == "hook_done":
                await self._hook_done(message.hook_done, session)
            elif kind == "checkpoints":
                self._checkpoints(message.checkpoints, session)
            elif kind == "file_block_done":
                self.files.answered(message.file_block_done, session)
            elif kind == "rebooted":
                self._rebooted(message.rebooted, session)

    def _heard(self, session: _Session, now_mono: float) -> None:
        """The session's nodes were heard. Only a node taken for silent (or DOWN for it)
        needs the store's ``node_seen``; for the others ``session.heard`` is their last
        word (``check_nodes`` reads it), so an agent serving thousands of nodes costs a
        look at each, not a new record of each, per message."""
        nodes = self.store.nodes
        for name in session.nodes:
            node = nodes.get(name)
            if node is not None and (not node.responding or node.state == "DOWN"):
                self.store.node_seen(name, now_mono)

    def _admit(self, hello: pb.AgentHello, session: _Session) -> None:
        """Let a stream in, or raise Refused: its hello must carry a credential made for
        it by root or SlurmUser, name at least one node, and take no node from a live
        session."""
        try:
            cred = self.verifier.check(hello, credentials.ATTACH)
        except auth.AuthError as exc:
            raise Refused(str(exc)) from None
        if cred.uid not in self.agents:
            raise Refused(f"uid {cred.uid} is not root or SlurmUser: not an agent")
        if not hello.nodes or not all(reg.name for reg in hello.nodes):
            raise Refused("hello names no node, or a node without a name")
        now_mono = time.monotonic()
        for reg in hello.nodes:
            old = self.sessions.get(reg.name)
            if old is not None and old.alive(now_mono):
                raise Refused(f"node {reg.name} already has a live agent ({old.peer})")
        session.name = hello.nodes[0].name

    def _detach(self, session: _Session) -> None:
        for name in session.nodes:
            if self.sessions.get(name) is session:
                del self.sessions[name]
                self.store.node_lost(name, heard=session.heard)
                self.usage.forget([name])
        if session.nodes:
            log.info("agent %s for %s disconnected", session.peer, ",".join(session.nodes))

    async def _hello(self, hello: pb.AgentHello, session: _Session) -> None:
        now = int(time.time())
        ready: list[Job] = []  # jobs whose last node powering up this agent brought
        known = {n.name for n in self.store.conf.nodes}
        offered: set[str] = set()
        for reg in hello.nodes:
            if reg.name not in known:
                log.warning("agent %s offers unknown node %s; ignored", session.peer, reg.name)
                continue
            if reg.name in offered:
                log.warning("agent %s offers node %s twice; ignored", session.peer, reg.name)
                continue
            old = self.sessions.get(reg.name)
            if old is not None and old is not session:
                log.warning(
                    "agent %s silent for %d s: %s taken over", old.peer, DEAD_AFTER, reg.name
                )
                old.nodes.remove(reg.name)
            self.sessions[reg.name] = session
            session.nodes.append(reg.name)
            offered.add(reg.name)
            self.store.node_registered(
                Registration(
                    name=reg.name,
                    cpus=reg.cpus,
                    real_memory=reg.real_memory,
                    hostname=reg.hostname,
                    arch=reg.arch,
                    os=reg.os,
                    version=hello.version,
                    boot_time=reg.boot_time,
                    agent_start_time=hello.agent_start_time,
                    gres_found=reg.gres_found if reg.gres_probed else None,
                    mps=reg.mps,
                    gpu_cpus=tuple((g.index, tuple(g.cpus)) for g in reg.gpu_cpus),
                    gpu_links=tuple((g.a, g.b, g.count) for g in reg.gpu_links),
                ),
                time.monotonic(),
                now,
            )
            reboots.registered(self.store, reg.name, reg.boot_time, now)
            ready.extend(powersave.node_up(self.store, reg.name, now))
        await self.store.durable.kept()  # the welcome waits for a journal that refuses
        session.send(
            pb.ControllerMessage(
                welcome=pb.Welcome(
                    cluster=self.store.conf.cluster_name,
                    heartbeat_interval=HEARTBEAT_INTERVAL,
                    kill_wait=self.store.conf.kill_wait,
                )
            )
        )
        self._reconcile(hello, session)  # launches those whose batch node this is
        for job in ready:
            if job.nodes[0] not in session.nodes:
                self.launch(job)
        self.nodehooks.resend(session.nodes)
        log.info("agent %s registered %s", session.peer, ",".join(session.nodes))
        self.on_change()

    def _reconcile(self, hello: pb.AgentHello, session: _Session) -> None:
        """Make what runs on the agent's nodes agree with the journal."""
        alive = {(r.job_id, r.restarts) for r in hello.running}
        known = {(s.job_id, s.step_id, s.node) for s in hello.steps}
        for run in hello.running:
            job = self.store.jobs.get(run.job_id)
            if job is None or not holds_nodes(job) or job.restarts != run.restarts:
                log.info(
                    "job_id=%d stale run %d on %s: killing", run.job_id, run.restarts, session.peer
                )
                session.send(
                    pb.ControllerMessage(
                        signal=pb.SignalJob(job_id=run.job_id, signal=0, reason="stale")
                    )
                )
        self._resend_resizes(hello, session)
        for job in list(self.store.jobs.values()):
            if not holds_nodes(job) or job.nodes[0] not in session.nodes:
                continue
            if (job.job_id, job.restarts) in alive:
                self._resuspend(job, session)
                if hello.reports_steps:
                    self._lost_steps(job, known, session)
                continue
            if jobstate.COMPLETING in job.flags:
                # Its result, if the agent kept one, follows the hello; if not, it is gone.
                asyncio.get_running_loop().call_later(
                    RESULT_GRACE, self._give_up_on, job.job_id, job.restarts
                )
            else:
                log.info("job_id=%d not reported by its agent; relaunching", job.job_id)
                self.launch(job)

    def _resend_resizes(self, hello: pb.AgentHello, session: _Session) -> None:
        """A reconnecting agent hears again the nodes of each resized job it has runs
        of: a resize lost with the old stream then still ends the steps left on the
        nodes the job gave back, and brings the runs' resize files up to date (a run
        whose file already says so is not signalled again)."""
        stepped = {s.job_id for s in hello.steps if s.node in session.nodes}
        for job in self.store.jobs.values():
            if not job.resize_time or not holds_nodes(job):
                continue
            if job.job_id in stepped or any(n in session.nodes for n in job.nodes):
                self.resize(job, [session])

    def _lost_steps(self, job: Job, known: set[tuple[int, int, str]], session: _Session) -> None:
        """Fail the parts of ``job``'s running steps on the session's nodes that the
        agent does not know: their launch was lost with the agent's last process (killed
        between the controller's send and its read), so no task of theirs will ever
        report, and srun would wait for them for ever. Slurm's srun says the launch
        failed; here the node's tasks end as never started (-1)."""
        for step in job.steps:
            if step.state != "RUNNING":
                continue
            for node, tasks in zip(step.nodes, step.tasks, strict=True):
                key = (job.job_id, step.step_id, node)
                if node in session.nodes and node not in step.done and key not in known:
                    log.warning(
                        "job_id=%d step %d: its launch on %s was lost with the agent",
                        job.job_id,
                        step.step_id,
                        node,
                    )
                    self.store.step_node_done(job.job_id, step.step_id, node, [-1] * tasks)

    def _resuspend(self, job: Job, session: _Session) -> None:
        """A reconnecting agent hears whether a job that was ever suspended is
        suspended now: the controller's view wins, so a resume (or a suspension)
        lost with the old stream is not lost for good."""
        if job.suspend_time and jobstate.COMPLETING not in job.flags:
            suspended = job.state is jobstate.JobState.SUSPENDED
            session.send(pb.ControllerMessage(suspend=self._suspend_job(job, not suspended)))

    def _give_up_on(self, job_id: int, restarts: int) -> None:
        job = self.store.jobs.get(job_id)
        if job is None or job.restarts != restarts or jobstate.COMPLETING not in job.flags:
            return
        log.warning("job_id=%d never reported its end; marking it done", job_id)
        self.store.post(job_id, jobstate.Finish(int(time.time()), 0x9, "cancelled"))
        self._flushes.add(task := asyncio.ensure_future(self.store.durable.kept()))
        task.add_done_callback(self._flushes.discard)
        self.on_change()

    def _placed_elsewhere(self, job_id: int, restarts: int, what: str, session: _Session) -> bool:
        """True (and logged) when this run of the job is not on the session's nodes: a
        session speaks for its own nodes' jobs alone."""
        job = self.store.jobs.get(job_id)
        if job is None or job.restarts != restarts:
            return False  # nothing to act on: a stale run is acknowledged, as before
        if job.nodes and job.nodes[0] in session.nodes:  # ended jobs keep their nodes
            return False
        log.warning(
            "agent %s (%s) sent %s for job_id=%d placed on %s: dropped",
            session.peer,
            ",".join(session.nodes),
            what,
            job_id,
            ",".join(job.nodes) or "no node",
        )
        return True

    def _running(self, running: pb.JobRunning, session: _Session) -> None:
        if not self._placed_elsewhere(running.job_id, running.restarts, "JobRunning", session):
            log.debug("job_id=%d running pid=%d", running.job_id, running.pid)

    async def _done(self, done: pb.JobDone, session: _Session) -> None:
        if self._placed_elsewhere(done.job_id, done.restarts, "JobDone", session):
            return
        job = self.store.jobs.get(done.job_id)
        if job is not None and job.restarts == done.restarts:
            self._hook_failed(job, done)
            try:
                self.store.post(
                    job.job_id,
                    jobstate.Finish(
                        now=_reported_end(done.end_time, job.start_time),
                        exit_status=done.exit_status,
                        outcome=done.outcome,
                        usage=(done.max_rss_kb, done.user_cpu_us, done.sys_cpu_us),
                        message=done.message,
                    ),
                )
            except InvalidTransition:
                log.debug("job_id=%d late result ignored", done.job_id)
            else:
                log.info(
                    "job_id=%d ended outcome=%s status=%d",
                    done.job_id,
                    done.outcome,
                    done.exit_status,
                )
                if done.message:
                    log.warning("job_id=%d %s", done.job_id, done.message)
        ack = pb.ControllerMessage(ack_done=pb.AckDone(job_id=done.job_id, restarts=done.restarts))
        await self._ack_once_kept(ack, session)

    async def _hook_done(self, done: pb.HookDone, session: _Session) -> None:
        """A job's Prolog or Epilog ended on one of its other nodes
        (``controller/nodehooks.py``)."""
        ack = self.nodehooks.done(done, session.nodes)
        if ack is not None:
            await self._ack_once_kept(ack, session)

    async def _ack_once_kept(self, ack: pb.ControllerMessage, session: _Session) -> None:
        """Send ``ack`` once what the report caused is in the journal."""
        try:
            await self.store.flush()
        except JournalWriteError:
            # The result is kept in memory and in the batch put back; the agent keeps
            # its copy until the ack, sent once the retry has written it. The
            # stream goes on reading meanwhile (heartbeats, other results).
            self._flushes.add(task := asyncio.ensure_future(self._ack_when_kept(ack, session)))
            task.add_done_callback(self._flushes.discard)
        else:
            session.send(ack)
        self.on_change()

    def _hook_failed(self, job: Job, done: pb.JobDone) -> None:
        """A Prolog or Epilog failed on the job's node: drain it with the agent's reason;
        after a Prolog, requeue the job, held unless SchedulerParameters says
        ``nohold_on_prolog_fail`` (its Finish then puts it back to PENDING)."""
        if done.drain and job.nodes:
            self.store.drain_failed(job.nodes[0], done.drain, int(time.time()))
        if done.outcome == "prolog_failed" and job.nodes:
            prolog_failed(self.store, job, job.nodes[0])

    def _drain(self, drain: pb.NodeDrain, session: _Session) -> None:
        """A served node's HealthCheckProgram failed: drain it with the program's reason."""
        if drain.node not in session.nodes:
            log.warning(
                "agent %s (%s) asked to drain %s: dropped",
                session.peer,
                ",".join(session.nodes),
                drain.node or "no node",
            )
            return
        reason = drain.reason[:256] or "HealthCheckProgram failed"
        if self.store.drain_failed(drain.node, reason, int(time.time())):
            self._flushes.add(task := asyncio.ensure_future(self.store.durable.kept()))
            task.add_done_callback(self._flushes.discard)
            self.on_change()

    def _rebooted(self, rebooted: pb.NodeRebooted, session: _Session) -> None:
        """An emulated node's RebootProgram ended well (``controller/reboots.py``)."""
        if rebooted.node not in session.nodes:
            log.warning("agent %s said %s rebooted: dropped", session.peer, rebooted.node)
            return
        if reboots.registered(self.store, rebooted.node, rebooted.boot_time, int(time.time())):
            self._flushes.add(task := asyncio.ensure_future(self.store.durable.kept()))
            task.add_done_callback(self._flushes.discard)
            self.on_change()

    def _checkpoints(self, report: pb.Checkpoints, session: _Session) -> None:
        """Runs on the session's nodes touched their checkpoint file
        (``nodeagent/checkpoints.py``): each is recorded as ``scontrol update job N
        Checkpointed=`` records it (``jobupdate.checkpointed``: a running job's, held
        between its start and now), and never moves a job's checkpoint back, as its
        runs on several nodes report apart and in any order. A report for a node the
        session did not attach, or about a job that does not run there, is logged and
        dropped."""
        now = int(time.time())
        changed = False
        for mark in report.checkpoints:
            job = self.store.jobs.get(mark.job_id)
            if mark.node not in session.nodes or job is None or mark.node not in job.nodes:
                log.warning(
                    "agent %s (%s) sent a checkpoint of job_id=%d on node %s: dropped",
                    session.peer,
                    ",".join(session.nodes),
                    mark.job_id,
                    mark.node or "none",
                )
                continue
            try:
                when = jobupdate.checkpointed(job, min(mark.time, now))
            except SlurmError:
                log.debug("job_id=%d checkpoint of a job not running: ignored", job.job_id)
                continue
            if when > job.checkpointed:
                self.store.update(replace(job, checkpointed=when))
                log.info("job_id=%d checkpoint at %d reported on %s", job.job_id, when, mark.node)
                changed = True
        if changed:
            self._flushes.add(task := asyncio.ensure_future(self.store.durable.kept()))
            task.add_done_callback(self._flushes.discard)

    async def _ack_when_kept(self, ack: pb.ControllerMessage, session: _Session) -> None:
        await self.store.durable.kept()
        session.send(ack)

    # ------------------------------------------------------------ commands

    def dispatch(self, effects: Sequence[Effect]) -> None:
        """Send what the store's committed changes cause (``controller/effects.py``):
        the one sender of launches, kills, signals and new limits."""
        for effect in effects:
            match effect:
                case Launch(job):
                    self.hooks.launch(job)
                case Granted(job):
                    self.hooks.granted(job)
                case NodeProlog(job, nodes):
                    self.nodehooks.prolog(job, nodes)
                case NodeEpilog(job, status, nodes):
                    self.nodehooks.epilog(job, status, nodes)
                case Ended(job, status):
                    self.hooks.ended(job, status)
                case Kill(job, reason, delay) if delay:
                    asyncio.get_running_loop().call_later(delay, self._kill_same_run, job, reason)
                case Kill(job, reason):
                    self._kill(job, reason)
                case Signal(job, sig, batch_only, full, step_id, reason):
                    self.signal(
                        job, sig, batch_only=batch_only, full=full, step_id=step_id, reason=reason
                    )
                case NewLimit(job):
                    self.update_limit(job)
                case Stop(job):
                    self.suspend(job, resume=False)
                case Continue(job):
                    self.suspend(job, resume=True)
                case Resized(old, job):
                    self.resize(job, self._sessions_of(job) + self._sessions_of(old))
                case Mail(notices):
                    self.mailer.send(notices, self.store.conf)
                case RebootNode(node):
                    self._send_to(node, pb.ControllerMessage(reboot=pb.RebootNode(node=node)))

    def _kill(self, job: Job, reason: str) -> None:
        self.signal(job, 0, reason=reason)

    def _kill_same_run(self, job: Job, reason: str) -> None:
        """A delayed kill, unless the run it meant has ended and the job started again:
        SignalJob names the job, not the run, so it would end the new one."""
        current = self.store.jobs.get(job.job_id)
        if current is not None and current.restarts != job.restarts:
            log.info("job_id=%d: %s kill dropped, its run has ended", job.job_id, reason)
            return
        self._kill(job, reason)

    def _send_to(self, node: str, message: pb.ControllerMessage) -> bool:
        session = self.sessions.get(node)
        if session is not None:
            session.send(message)
        return session is not None

    def _session_for(self, job: Job) -> _Session | None:
        return self.sessions.get(job.nodes[0]) if job.nodes else None

    def launch(self, job: Job) -> None:
        if powersave.configuring(job, self.store.nodes):
            log.info("job_id=%d launch deferred: its nodes are powering up", job.job_id)
            return  # sent when the last of them registers (_hello)
        session = self._session_for(job)
        if session is None:
            log.warning("job_id=%d launch deferred: node %s has no agent", job.job_id, job.nodes[0])
            return
        payload = self.store.payload(job)
        if payload is None:
            log.error("job_id=%d has no script in the journal", job.job_id)
            return
        env = batch_environment(job, payload, self.store.conf.cluster_name)
        if job.het_job_id:
            members = hetjobs.components(self.store.jobs, job)
            env.update(hetjobs.environment(members, self.store.conf.cluster_name))
        shares = self.store.shares(job, 0)
        env.update(shares.environment())
        env["SLURM_CONF"] = self.config_path
        launch = launch_job(
            job, payload, env, self.store.time_limit_at_launch(job), self.store.conf, shares
        )
        session.send(pb.ControllerMessage(launch=launch))

    def launch_step(
        self, job: Job, step: Step, req: pb.StepCreateRequest, het: HetPart | None = None
    ) -> None:
        """Send each node of ``step`` its part; srun hears from the runners directly.
        ``het``: where this part of a step spanning heterogeneous job components falls
        in the whole step (``controller/hetsteps.py``), whose ids its runners use."""
        env = step_environment(job, step, without_grants(req.environment), req.distribution)
        env["SLURM_CONF"] = self.config_path
        node_offset, task_offset = (het.node_offset, het.task_offset) if het else (0, 0)
        if het is not None:
            env.update(het.environment)
        for name, value in (
            ("SLURM_CONTAINER", req.container),
            ("SLURM_CONTAINER_ID", req.container_id),
        ):
            if value:  # srun(1): only set with --container (--container-id: Slurm 24.11)
                env[name] = value
        for node_id, (node, task_ids) in enumerate(zip(step.nodes, step.ids, strict=True)):
            tasks, count = [task + task_offset for task in task_ids], len(task_ids)
            session = self.sessions.get(node)
            if session is None:
                log.warning(
                    "job_id=%d step %d: node %s has no agent", job.job_id, step.step_id, node
                )
                self.store.step_node_done(job.job_id, step.step_id, node, [-1] * count)
                continue
            index = job.nodes.index(node)
            shares = self.store.shares(job, index)
            node_env = {**env, **shares.environment()}
            ids: tuple[int, ...] = ()
            bound: tuple[tuple[int, ...], ...] = ()
            own = job.cpu_ids[index] if job.cpu_ids else ()
            if own and step.gpus and not req.exact:  # the job's CPUs near its GPUs
                near = self.store.gpu_near(node)
                own = stepcpus.pinned(own, step.gpus[node_id], near, step.cpus[node_id])
            kind, pinned = self._task_cpus(req, node, own, count)
            node_env.update(cpu_bind_environment(req.cpu_bind, pinned))
            if job.gpus and job.gpus[index]:  # the step's GPUs on this node, else all
                # of the job's there (a node dealt none of a total sets none, as Slurm)
                ids = step.gpus[node_id] if step.gpus else job.gpus[index]
                node_env.update(gpu_environment(ids))
                node_env["SLURM_JOB_GPUS"] = ",".join(map(str, job.gpus[index]))
                node_env["SLURM_STEP_GPUS"] = ",".join(map(str, ids))
                bound = self._task_gpus(req, node, own, ids, count, pinned)
            launch = pb.LaunchStep(
                job_id=job.job_id,
                step_id=step.step_id,
                node=node,
                node_id=node_id + node_offset,
                tasks=tasks,
                uid=job.uid,
                gid=job.gid,
                user=job.user,
                argv=req.argv,
                environment=node_env,
                cwd=req.cwd or job.work_dir,
                io_host=req.io_host,
                io_port=req.io_port,
                io_key=req.io_key,
                std_out=req.std_out,
                std_err=req.std_err,
                std_in=req.std_in,
                append=req.append,
                cpus=step.cpus[node_id],
                time_limit=step.time_limit,
                start_time=step.start_time,
                kill_wait=self.store.conf.kill_wait,
                job_name=job.name,
                array_job_id=job.array_job_id,
                ntasks=het.ntasks if het else step.ntasks,
                cpu_ids=own,
                unpinned=req.cpu_bind_none,
                unbuffered=req.unbuffered,
                pty=req.pty,
                grant=gpu_grant(ids, shares),
                mem_mib=job.alloc_mem[index] if job.alloc_mem else 0,
                step_mem_mib=step.mem[node_id] if step.mem else 0,
                task_gpus=[pb.TaskGpus(gpus=gpus) for gpus in bound],
                container=req.container,
                container_id=req.container_id,
                mpi=req.mpi,
                node_tasks=het.node_tasks if het else step.tasks,
                multi_prog=req.multi_prog,
                task_cpus=[pb.TaskCpus(cpus=cpus) for cpus in pinned],
                cpu_bind_verbose=cpubind_syntax.parse(req.cpu_bind).verbose,
                cpu_bind_type=kind,
                bcast_path=step_copy(req, job.job_id, step.step_id, node),
                bcast_libs=req.bcast_libs,
            )
            if job.array_task_id is not None:
                launch.array_task_id = job.array_task_id
            self.nodehooks.before_step(job, node)
            session.send(pb.ControllerMessage(launch_step=launch))

    def _task_gpus(
        self,
        req: pb.StepCreateRequest,
        node: str,
        own: tuple[int, ...],
        gpus: tuple[int, ...],
        tasks: int,
        bound: tuple[tuple[int, ...], ...] = (),
    ) -> tuple[tuple[int, ...], ...]:
        """Each local task's GPUs on ``node`` under the step's --gpu-bind (or srun's
        implicit binding); (): every task sees them all (``controller.gpubind``).
        ``closest`` looks at each task's own CPUs where ``bound`` gives them, else at
        the step's (``own``; none known: the node's)."""
        bind = gpubind.implicit(req.gpu_bind, req.gpus_per_task, req.ntasks_per_gpu)
        if not bind:
            return ()
        pinned = () if req.cpu_bind_none else own
        cpus = pinned or tuple(range(self.store.conf.node(node).cpus))
        near = self.store.gpu_near(node)
        return gpubind.task_gpus(bind, gpus, tasks, near, cpus, bound)

    def _task_cpus(
        self, req: pb.StepCreateRequest, node: str, own: tuple[int, ...], tasks: int
    ) -> tuple[str, tuple[tuple[int, ...], ...]]:
        """The binding's type and each local task's CPUs on ``node`` under --cpu-bind
        (by default cores under --ntasks-per-core or TaskPlugin=task/affinity, sockets
        under --ntasks-per-socket), within the step's CPUs there (``own``; none known:
        the node's); (): each has the step's CPUs (``controller.cpubind``)."""
        conf = self.store.conf
        bind = cpubind_syntax.parse(req.cpu_bind)
        if not bind.kind:  # srun(1): these bind by default, as task/affinity does
            if req.ntasks_per_core or (conf.task_affinity and not req.ntasks_per_socket):
                bind = replace(bind, kind="cores")
            elif req.ntasks_per_socket:
                bind = replace(bind, kind="sockets")
        node_conf = conf.node(node)
        cpus = own or tuple(range(node_conf.cpus))
        shape = cpubind.Shape(node_conf.cores_per_socket, node_conf.threads_per_core)
        try:
            dist = distribution.parse(req.distribution) if req.distribution else DEFAULT
        except ValueError:
            dist = DEFAULT  # refused when the step was laid out
        cpt = max(req.cpus_per_task, 1)
        return bind.kind, cpubind.task_cpus(bind, cpus, tasks, cpt, shape, dist)

    def _step_done(self, done: pb.StepDone, session: _Session) -> None:
        job = self.store.jobs.get(done.job_id)
        # A step ends on a node its job holds, or held when the step began (a resize
        # that left the node ended the step's part there).
        ran_there = job is not None and any(
            s.step_id == done.step_id and done.node in s.nodes for s in job.steps
        )
        if done.node not in session.nodes or job is None or not ran_there:
            log.warning(
                "agent %s (%s) sent StepDone of %d.%d for node %s: dropped",
                session.peer,
                ",".join(session.nodes),
                done.job_id,
                done.step_id,
                done.node or "none",
            )
            return
        usage = (done.max_rss_kb, done.user_cpu_us, done.sys_cpu_us)
        if done.message:
            log.warning(
                "job_id=%d step %d on %s: %s", done.job_id, done.step_id, done.node, done.message
            )
        self.store.step_node_done(
            done.job_id,
            done.step_id,
            done.node,
            list(done.statuses),
            usage,
            _reported_end(done.end_time, job.start_time),
            done.sum_rss_kb,
            done.oom_kills,
        )

    def suspend(self, job: Job, *, resume: bool) -> None:
        """Tell the agents of the job's nodes to stop its processes, or to let them
        continue with its time limit moved by the time it was suspended."""
        message = pb.ControllerMessage(suspend=self._suspend_job(job, resume))
        for session in self._sessions_of(job):
            session.send(message)

    def _suspend_job(self, job: Job, resume: bool) -> pb.SuspendJob:
        """The agents' suspend or resume of ``job``. Every suspension, whoever asked for
        it, gives the tasks PreemptParameters=suspend_grace_time between SIGTSTP and
        the stop: slurmstepd's one suspend does so for them all."""
        return pb.SuspendJob(
            job_id=job.job_id,
            resume=resume,
            suspended_secs=job.suspended_secs,
            grace_secs=self.store.conf.preemption.suspend_grace,
        )

    def resize(self, job: Job, sessions: list[_Session]) -> None:
        """Tell each of ``sessions`` (once) the job's nodes now: they end its runs on
        the nodes it left and tell the others (``ResizeJob``)."""
        message = pb.ControllerMessage(
            resize=pb.ResizeJob(
                job_id=job.job_id,
                nodes=job.nodes,
                nodelist=hostlist.compress(job.nodes),
                cpus_per_node=run_length(list(job.cpus)),
                signal=job.elastic_signal,
                resize_time=job.resize_time,
            )
        )
        for session in dict.fromkeys(sessions):
            session.send(message)

    def _sessions_of(self, job: Job) -> list[_Session]:
        """The sessions of the job's nodes, each once, the batch host's first."""
        sessions: list[_Session] = []
        for node in job.nodes:
            session = self.sessions.get(node)
            if session is not None and session not in sessions:
                sessions.append(session)
        return sessions

    def signal(
        self,
        job: Job,
        signal: int,
        *,
        batch_only: bool = False,
        full: bool = False,
        reason: str = "",
        step_id: int | None = None,
    ) -> bool:
        """Send a SignalJob to the agents of the job's nodes (the batch host's first:
        it runs the script; the others run step tasks)."""
        sessions = self._sessions_of(job)
        if not sessions:
            return False
        message = pb.SignalJob(
            job_id=job.job_id, signal=signal, batch_only=batch_only, full=full, reason=reason
        )
        if step_id is not None:
            message.step_id = step_id
        for session in sessions:
            session.send(pb.ControllerMessage(signal=message))
        return True

    def update_limit(self, job: Job) -> None:
        session = self._session_for(job)
        if session is not None:
            session.send(
                pb.ControllerMessage(
                    update=pb.UpdateJob(
                        job_id=job.job_id, time_limit=self.store.time_limit_at_launch(job)
                    )
                )
            )

    # ------------------------------------------------------------ health

    def check_nodes(self, now: int) -> bool:
        """DOWN nodes silent past SlurmdTimeout; return True if anything changed."""
        timeout = self.store.conf.slurmd_timeout
        mono = time.monotonic()
        changed = False
        for name, node in list(self.store.nodes.items()):
            if node.state != "UP" or powersave.asleep(node):
                continue  # a node in power saving has no agent to hear
            session = self.sessions.get(name)
            silent = mono - (node.last_seen if session is None else session.heard)
            if node.responding and silent > 2 * HEARTBEAT_INTERVAL + 1:
                self.store.node_lost(name)  # shown with Slurm's `*` from now on
            if not timeout or silent <= timeout:
                continue
            log.warning("node %s not responding for %d s: DOWN", name, timeout)
            self.store.node_lost(name)
            self.store.set_node_down(name, "Not responding", "slurm", 0, now)
            for job, requeue in self.store.fail_jobs_on(name, now):
                log.info(
                    "job_id=%d node %s failed: %s",
                    job.job_id,
                    name,
                    "requeued" if requeue else "NODE_FAIL",
                )
            changed = True
        return changed


def _reported_end(reported: int, start: int) -> int:
    """An agent's end time, held between the run's start and now: an agent reports the
    time its spool kept (the end may be well before the report arrives), but an end
    before the start or in the future is no end a run had. A rogue's end at time 0 made
    the job older than MinJobAge at once, and it was purged as soon as it ended."""
    now = int(time.time())
    return min(max(reported or now, start), now)
