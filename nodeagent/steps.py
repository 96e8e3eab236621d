"""The agent's table of job steps: one step runner per LaunchStep, its StepDone, signals.

A LaunchStep (one node's part of an ``srun`` step) is verified like a
LaunchJob, written as a step directory (:class:`~nodeagent.spool.StepDir`)
and handed to a step runner (:mod:`nodeagent.steprunner`), forked by the
zygote or else spawned, detached from the agent like a supervisor: the
runner and its tasks go on if the agent dies. When the runner exits (its
notify pipe reaches end-of-file) its result becomes a StepDone and the step
directory is deleted.

Step results do not survive an agent restart, and the controller does not
acknowledge them: a StepDone produced while no stream is up waits for the
next stream in memory only, and a restarted agent deletes the step
directories whose runner is gone, results and all. A runner still alive at
restart is adopted (polled), so that signals and cancels still reach it and
its end is still reported.

Signals (the rules are Slurm's, applied by :meth:`JobTable.signal
<nodeagent.jobs.JobTable.signal>`) go through the runner, which knows when
its tasks have started and whether their process group is still theirs: a
terminate writes ``cancel`` (the kill wait), any other signal appends its
number to ``signals``, and SIGUSR1 wakes the runner to act on them (TERM,
then KILL after the kill wait; or the signal, to the tasks' process group).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from corral.wire import corral_pb2 as pb
from nodeagent.devcgroup import DeviceGuard
from nodeagent.gpubinding import bind_gpus, granted
from nodeagent.gpus.neuron import NeuronBinding
from nodeagent.mps import MpsServers
from nodeagent.process import Zygote, spawn_step_runner
from nodeagent.runas import LaunchError
from nodeagent.spool import NOT_STARTED, Phase, Spool, StepDir, StepResult, StepSpec
from nodeagent.watch import Run, Watch

log = logging.getLogger(__name__)

#: job_id, step_id, node
StepKey = tuple[int, int, str]
Send = Callable[[pb.AgentMessage], None]

#: How many reported steps are remembered, to answer a repeated LaunchStep without rerunning it.
#: A repeat is the same message (same identity); a step of a requeued job may reuse the ids.
REMEMBERED = 1024


@dataclass(kw_only=True)
class Step(Run):
    """One node's part of one step, from launch to report (its process: the step runner)."""

    dir: StepDir
    node: str
    tasks: tuple[int, ...]
    identity: bytes = b""  # which launch this is (srun's key makes each one unique)

    @property
    def key(self) -> StepKey:
        return (self.dir.job_id, self.dir.step_id, self.node)

    @property
    def name(self) -> str:
        return f"{self.dir.job_id}.{self.dir.step_id} on {self.node}"


def _key(step: Step) -> StepKey:
    return step.key


def step_spec(msg: pb.LaunchStep, devices: DeviceGuard | None = None) -> StepSpec:
    """The runner's view of a LaunchStep (with ``devices``, the GPU device files its
    tasks may not open: those of the node's GPUs its grant neither gives it nor
    shares with its job; ``refused`` when they cannot be fenced here)."""
    cgroup: str = ""
    deny: list[list[int]] = []
    refused = ""
    gpus = granted(msg.grant)
    if devices is not None:
        try:
            cgroup, deny = devices.confine(msg.node, msg.job_id, f"step_{msg.step_id}", gpus)
        except LaunchError as exc:
            refused = str(exc)
    return StepSpec(
        job_id=msg.job_id,
        step_id=msg.step_id,
        node=msg.node,
        uid=msg.uid,
        gid=msg.gid,
        user=msg.user,
        node_id=msg.node_id,
        tasks=tuple(msg.tasks),
        argv=tuple(msg.argv),
        environment=dict(msg.environment),
        cwd=msg.cwd,
        io_host=msg.io_host,
        io_port=msg.io_port,
        io_key=msg.io_key.hex(),
        std_out=msg.std_out,
        std_err=msg.std_err,
        std_in=msg.std_in,
        append=msg.append,
        cpus=msg.cpus,
        time_limit=msg.time_limit,
        start_time=msg.start_time,
        kill_wait=msg.kill_wait,
        job_name=msg.job_name,
        array_job_id=msg.array_job_id,
        array_task_id=msg.array_task_id if msg.HasField("array_task_id") else None,
        ntasks=msg.ntasks,
        cgroup=cgroup,
        deny_devices=deny,
        refused=refused,
        cpu_ids=list(msg.cpu_ids),
        gpus=sorted(gpus),
        unbuffered=msg.unbuffered,
    )


def step_done(key: StepKey, tasks: tuple[int, ...], result: StepResult) -> pb.StepDone:
    statuses = list(result.statuses[: len(tasks)])
    statuses += [NOT_STARTED] * (len(tasks) - len(statuses))
    return pb.StepDone(
        job_id=key[0],
        step_id=key[1],
        node=key[2],
        tasks=tasks,
        statuses=statuses,
        start_time=result.start_time,
        end_time=result.end_time,
        max_rss_kb=result.max_rss_kb,
        user_cpu_us=result.user_cpu_us,
        sys_cpu_us=result.sys_cpu_us,
        message=result.message,
        sum_rss_kb=result.sum_rss_kb,
    )


def launch_identity(msg: pb.LaunchStep) -> bytes:
    """Which launch ``msg`` is: a repeat of it is the same message."""
    return hashlib.sha256(msg.SerializeToString(deterministic=True)).digest()


def refusal(msg: pb.LaunchStep, message: str) -> pb.StepDone:
    """The StepDone of a launch that ran nothing."""
    now = int(time.time())
    result = StepResult(statuses=(), start_time=now, end_time=now, message=message)
    return step_done((msg.job_id, msg.step_id, msg.node), tuple(msg.tasks), result)


class StepTable:
    """The steps running on the served nodes, by (job, step, node)."""

    def __init__(
        self,
        *,
        spool: Spool,
        hostnames: Mapping[str, str],
        python: str,
        env: dict[str, str],
        zygote: Zygote | None,
        devices: DeviceGuard | None = None,
        mps: MpsServers | None = None,
        neuron: NeuronBinding | None = None,
        mig: Mapping[str, Mapping[int, str]] | None = None,
    ) -> None:
        self.spool = spool
        self.nodes = set(hostnames)
        self.python = python
        self.env = env
        self.zygote = zygote
        self.devices = devices
        self.mps = mps  # MPS servers for jobs with GPU shares (the job table's)
        self.neuron = neuron  # NeuronCores on Neuron nodes (the job table's)
        self.mig = mig if mig is not None else {}  # MIG UUIDs by node and index (the job table's)
        self._steps: dict[StepKey, Step] = {}
        self._watch: Watch[StepKey, Step] = Watch(self._check, _key, self._unreported)
        self._reported: OrderedDict[StepKey, tuple[bytes, pb.StepDone]] = OrderedDict()
        self._backlog: list[pb.StepDone] = []
        self._send: Send | None = None

    # ------------------------------------------------------------ the stream

    def connect(self, send: Send) -> None:
        self._send = send

    def disconnect(self) -> None:
        self._send = None

    def backlog(self) -> list[pb.StepDone]:
        """The StepDones made while no stream was up (taken: each is sent once)."""
        backlog, self._backlog = self._backlog, []
        return backlog

    def restore(self, dones: list[pb.StepDone]) -> None:
        """Take back StepDones a stream may not have delivered (it broke, or was never
        welcomed): they go out again first on the next. The controller ignores a
        node's report for a step it has already recorded."""
        self._backlog[:0] = dones

    def _report(self, done: pb.StepDone) -> None:
        if self._send is None:
            self._backlog.append(done)
        else:
            self._send(pb.AgentMessage(step_done=done))

    # ------------------------------------------------------------ start-up

    def recover(self) -> None:
        """Adopt the runners a previous agent process left running, start those it
        left before they started, and drop the rest."""
        for node in sorted(self.nodes):
            for stepdir in self.spool.steps(node):
                spec = stepdir.read_spec()
                ended = stepdir.read_result() is not None
                if spec is not None and not ended and stepdir.supervisor_alive():
                    step = Step(
                        dir=stepdir, node=node, tasks=spec.tasks, pid=stepdir.read_supervisor_pid()
                    )
                    self._steps[step.key] = step
                    self._watch.adopt(step)
                    log.info("step %s recovered, runner pid %s", step.name, step.pid)
                    continue
                if spec is not None and not ended and self._restart(node, stepdir, spec):
                    continue
                if not ended:
                    # Kills whatever its tasks left, if they started.
                    stepdir.settle_lost(len(spec.tasks) if spec else 0)
                log.info("step %d.%d on %s ended unreported", stepdir.job_id, stepdir.step_id, node)
                stepdir.delete()

    def _restart(self, node: str, stepdir: StepDir, spec: StepSpec) -> bool:
        """Start the runner of a step whose tasks never started: the previous agent
        process stopped between writing the step and its runner taking it (or the
        runner died first). srun still waits for the step to connect, so it runs now
        rather than being lost. False if its tasks started or the runner cannot start."""
        if stepdir.read_started() is not None:
            return False
        try:
            proc = spawn_step_runner(stepdir, self.python, self.env, None)
        except OSError as exc:
            log.error(
                "step %d.%d on %s cannot restart: %s", stepdir.job_id, stepdir.step_id, node, exc
            )
            return False
        step = Step(dir=stepdir, node=node, tasks=spec.tasks)
        self._steps[step.key] = step
        self._watch.attach(step, proc)
        log.info("step %s never started: runner started again, pid %s", step.name, proc.pid)
        return True

    # ------------------------------------------------------------ controller requests

    def refuse(self, msg: pb.LaunchStep, reason: str) -> None:
        """A launch whose credential did not verify: nothing runs, and it is reported
        only when no real step has its name (a refusal must not end one)."""
        key = (msg.job_id, msg.step_id, msg.node)
        log.warning("step %d.%d launch refused: %s", msg.job_id, msg.step_id, reason)
        if key not in self._steps and key not in self._reported:
            self._report(refusal(msg, reason))

    def launch(self, msg: pb.LaunchStep) -> None:
        key = (msg.job_id, msg.step_id, msg.node)
        running = self._steps.get(key)
        reported = self._reported.get(key)
        identity = launch_identity(msg)
        if running is not None:
            if running.identity == identity:
                log.info("step %d.%d on %s: duplicate launch ignored", *key)
            else:
                log.warning("step %d.%d on %s: launched again while it runs, refused", *key)
            return
        if reported is not None and reported[0] == identity:
            log.info("step %d.%d on %s: duplicate launch, reported again", *key)
            self._report(reported[1])
            return
        if msg.node not in self.nodes:
            log.warning("step %d.%d for node %s not served here", *key)
            done = refusal(msg, f"node {msg.node} is not served by this agent")
            self._remember(key, identity, done)
            return
        stepdir = self.spool.step_dir(msg.node, msg.job_id, msg.step_id)
        try:
            self._create(stepdir)
        except OSError as exc:
            log.error("step %d.%d cannot create %s: %s", msg.job_id, msg.step_id, stepdir.path, exc)
            done = refusal(msg, f"cannot create step directory: {exc.strerror}")
            self._remember(key, identity, done)
            return
        step = Step(dir=stepdir, node=msg.node, tasks=tuple(msg.tasks), identity=identity)
        self._steps[key] = step
        try:
            spec = step_spec(msg, self.devices)
            bind_gpus(
                spec.environment,
                msg.node,
                msg.job_id,
                msg.grant,
                self.mps,
                self.neuron,
                self.mig,
            )
            stepdir.write_spec(spec)
            proc = spawn_step_runner(stepdir, self.python, self.env, self.zygote)
        except OSError as exc:
            log.error("step %s cannot start its runner: %s", step.name, exc)
            now = int(time.time())
            message = f"cannot start step runner: {exc}"
            self._finish(step, StepResult((), start_time=now, end_time=now, message=message))
            return
        self._watch.attach(step, proc)
        log.info("step %s launched, runner pid %s", step.name, proc.pid)

    @staticmethod
    def _create(stepdir: StepDir) -> None:
        try:
            stepdir.create()
        except FileExistsError:
            # Left by a runner that is gone (a live one would be in the table).
            if stepdir.supervisor_alive():
                raise
            stepdir.delete()
            stepdir.create()

    def _of(self, job_id: int, step_id: int | None = None) -> list[Step]:
        return [
            step
            for (job, stp, _), step in self._steps.items()
            if job == job_id and (step_id is None or stp == step_id)
        ]

    def signal(self, job_id: int, signum: int, step_id: int | None = None) -> int:
        """Send ``signum`` to the tasks of the job's steps here (or of ``step_id``'s).

        The runner delivers it (to a step still starting, once its tasks
        have started). Returns how many steps were asked.
        """
        asked = 0
        for step in self._of(job_id, step_id):
            try:
                step.dir.request_signal(signum)
            except OSError as exc:
                log.warning("step %s signal %d failed: %s", step.name, signum, exc)
                continue
            log.info("step %s signal %d to its tasks", step.name, signum)
            self._watch.poke(step)
            asked += 1
        return asked

    def terminate(
        self, job_id: int, kill_wait: int, reason: str = "", step_id: int | None = None
    ) -> None:
        """End the tasks of every step of the job here (or of ``step_id``'s):
        TERM, then KILL after ``kill_wait``."""
        for step in self._of(job_id, step_id):
            log.info("step %s terminate (%s)", step.name, reason or "no reason")
            try:
                step.dir.request_cancel(kill_wait)
            except OSError as exc:
                log.warning("step %s cannot request its end: %s", step.name, exc)
                continue
            self._watch.poke(step)

    # ------------------------------------------------------------ watching

    def _unreported(self, step: Step) -> bool:
        return step.key in self._steps

    def _check(self, step: Step) -> None:
        if step.key not in self._steps:  # already reported
            return
        phase = step.dir.phase()
        if phase is Phase.DONE:
            result = step.dir.read_result()
            if result is not None:
                self._finish(step, result)
        elif phase is Phase.LOST and step.notify_fd is None:
            result = step.dir.settle_lost(len(step.tasks))
            log.warning("step %s runner died: %s", step.name, result.message)
            self._finish(step, result)

    def _finish(self, step: Step, result: StepResult) -> None:
        self._steps.pop(step.key, None)
        self._watch.forget(step)
        step.dir.delete()
        if result.message and (not result.statuses or NOT_STARTED in result.statuses):
            log.warning("step %s tasks not started: %s", step.name, result.message)
        log.info("step %s done: statuses %s", step.name, list(result.statuses))
        self._remember(step.key, step.identity, step_done(step.key, step.tasks, result))

    def _remember(self, key: StepKey, identity: bytes, done: pb.StepDone) -> None:
        self._reported[key] = (identity, done)
        self._reported.move_to_end(key)
        while len(self._reported) > REMEMBERED:
            self._reported.popitem(last=False)
        self._report(done)

    def settle(self, job_id: int) -> None:
        """Report the job's steps that have ended, now: before the job's own end is
        reported, so the controller records them as they ended rather than as ended
        with the job (a step watched by polling, after an agent restart, would
        otherwise be seen after its job)."""
        for step in self._of(job_id):
            self._check(step)

    def poll(self) -> None:
        """Check the runners no pipe tells us about."""
        self._watch.poll(self._steps)

    def close(self) -> None:
        """Stop watching pipes (agent shutdown); the runners carry on."""
        self._watch.close(self._steps.values())
