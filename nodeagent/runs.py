"""The agent's one table of runs: launch, signal, suspend, update, watch, report, recover, forget.

A run is the batch script of a job (step ``batch``, as Slurm's ``N.batch``)
or one node's part of a step (``srun``), keyed by (job, step, instance)
(:data:`~nodeagent.runkinds.RunKey`). Every run is a directory in the
spool (:mod:`nodeagent.spool`: ``job<id>.<restarts>/`` or
``step<job>.<step>/``, the layout of the agents before this table, so an
upgraded agent adopts what they left) and one detached process working in
it; this table is a cache of those directories plus the notify pipes of
the processes this agent process started (:mod:`nodeagent.watch`). What
differs between the batch script and a step (whether the result is durable
and acknowledged, the messages it is reported with, what becomes of a run
left unstarted) is the run's kind (:mod:`nodeagent.runkinds`); the rest is
written once here: one launch bookkeeping, one result path
(:meth:`RunTable._check`, :meth:`RunTable._finish`), one signal path
(:meth:`RunTable.signal`) and one recovery path after an agent restart
(:meth:`RunTable.recover`).

What the table learns goes to the controller through ``send``, which the
link points at the current stream, or at nothing while disconnected: the
next stream's hello and JobDone backlog carry every batch report that
matters, and StepDones, which nothing acknowledges, wait for it in memory
(:meth:`RunTable.backlog`).

Signals follow Slurm's rules (:meth:`RunTable.signal`). A terminate writes
``cancel`` (the kill wait) in each run's directory and wakes its process
(TERM, then KILL after the kill wait); another signal for a step is appended
to its ``signals`` for the runner, which knows when its tasks have started
and whether their process group is still theirs; one for the batch script
goes straight to it.

Why this module is over 500 lines: it is the one table the issue asked for;
launch, signal, watch, report and recovery of both kinds of run must agree on
the same entries, and what differs per kind is already apart (``runkinds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from corral.ociconf import OciConf
from corral.wire import corral_pb2 as pb
from nodeagent import cgroups
from nodeagent.acctgather import Sampler, Target
from nodeagent.checkpoints import CHECKPOINT_ENV, CheckpointWatch, Watched
from nodeagent.containment import Containment
from nodeagent.devcgroup import DeviceGuard
from nodeagent.gpubinding import bind_gpus, task_bindings
from nodeagent.gpus.neuron import NeuronBinding
from nodeagent.mps import MpsServers
from nodeagent.process import Zygote, spawn_step_runner, spawn_supervisor, supervisor_environment
from nodeagent.resizes import RESIZE_ENV, script
from nodeagent.runkinds import (
    BATCH,
    BATCH_KIND,
    STEP_KIND,
    Run,
    RunKey,
    batch_key,
    done_message,
    kind_of,
    launch_failure,
    launch_identity,
    launch_spec,
    running_message,
    step_key,
    step_refusal,
    step_spec,
)
from nodeagent.runner import KILL_TASK_FAILED
from nodeagent.spool import (
    CANCEL_STEP,
    NOT_STARTED,
    JobDir,
    Phase,
    RunDir,
    SiteHooks,
    Spool,
    StepDir,
)
from nodeagent.watch import Watch

#: Why a run ends at its time limit: a batch run's outcome, the controller's Kill reason.
TIMEOUT = "timeout"

log = logging.getLogger(__name__)

Send = Callable[[pb.AgentMessage], None]
#: A run's cgroup directories, for jobacct_gather/cgroup (none: sampled from /proc).
CgroupOf = Callable[[Run], tuple[str, ...]]

#: How often run directories without a notify pipe are looked at.
POLL_INTERVAL = 0.1

#: How many reported steps are remembered, to answer a repeated LaunchStep without rerunning it.
#: A repeat is the same message (same identity); a step of a requeued job may reuse the ids.
REMEMBERED = 1024


def _key(run: Run) -> RunKey:
    return run.key


class RunTable:
    """Every run on the served nodes that the controller has not yet forgotten."""

    def __init__(
        self,
        *,
        spool: Spool,
        hostnames: Mapping[str, str],
        slurm_conf: str,
        kill_wait: int,
        python: str,
        devices: DeviceGuard | None = None,
        containment: Containment | None = None,
        mps: MpsServers | None = None,
        neuron: NeuronBinding | None = None,
        hooks: SiteHooks | None = None,
        oci: OciConf | None = None,
    ) -> None:
        self.spool = spool
        self.hostnames = dict(hostnames)  # served node name -> HOSTNAME for its jobs
        self.slurm_conf = slurm_conf
        self.kill_wait = kill_wait  # for terminate requests; the controller's Welcome updates it
        self.python = python
        self.devices = devices  # GPU isolation (None: none)
        self.containment = containment  # the runs' cgroups (None: process groups only)
        self.mps = mps  # MPS servers for jobs with GPU shares (None: no MPS here)
        self.neuron = neuron  # NeuronCores for jobs on Neuron nodes (None: none served)
        self.hooks = hooks or SiteHooks()  # slurm.conf's site programs, given to each run
        self.oci = oci  # oci.conf (None: no containers here)
        self.mig: dict[str, dict[int, str]] = {}  # per node, MIG instances' UUIDs by index
        self.supervisor_env = supervisor_environment()
        self.zygote = Zygote(spool.root(), python, self.supervisor_env)
        self._runs: dict[RunKey, Run] = {}
        self._watch: Watch[RunKey, Run] = Watch(self._check, _key, self._unreported)
        # Batch launches refused without a directory: reported until acknowledged.
        self._rejected: dict[RunKey, pb.AgentMessage] = {}
        # Steps reported (by identity), to answer a repeated launch the same way.
        self._reported: OrderedDict[RunKey, tuple[bytes, pb.AgentMessage]] = OrderedDict()
        self._backlog: list[pb.StepDone] = []  # StepDones made while no stream was up
        self._send: Send | None = None
        self._checkpoints = CheckpointWatch()  # what the current stream heard of
        self.cgroup_of: CgroupOf = _run_cgroups  # the cgroup containment's, when it runs
        self.sampler: Sampler | None = None  # JobAcctGatherType's, when it samples
        self._node_of_dir = {os.path.abspath(spool.node_dir(n)): n for n in self.hostnames}

    # ------------------------------------------------------------ the stream

    def connect(self, send: Send) -> None:
        self._send = send
        # A new stream hears of every touched checkpoint file again: what the last one
        # was told may have been lost with it, and the controller keeps only the latest.
        self._checkpoints = CheckpointWatch()

    def disconnect(self) -> None:
        self._send = None

    def running(self) -> list[pb.JobRunning]:
        """Batch runs alive on this host, for the hello (one still starting is listed
        with pid 0 and start time 0, so the controller does not take it for lost)."""
        return [
            running_message(run) for run in self._runs.values() if run.is_batch and run.done is None
        ]

    def steps(self) -> list[pb.StepRunning]:
        """Step runs on this host (alive, or ended and not yet reported), for the hello."""
        return [
            pb.StepRunning(job_id=job_id, step_id=int(step), node=str(node))
            for job_id, step, node in self._runs
            if step != BATCH
        ]

    def unacked(self) -> list[pb.JobDone]:
        """Every JobDone the controller has not acknowledged yet."""
        done = [run.done for run in self._runs.values() if run.done is not None]
        done += self._rejected.values()
        return [message.done for message in done]

    def backlog(self) -> list[pb.StepDone]:
        """The StepDones made while no stream was up (taken: each is sent once)."""
        backlog, self._backlog = self._backlog, []
        return backlog

    def restore(self, dones: list[pb.StepDone]) -> None:
        """Take back StepDones a stream may not have delivered (it broke, or was never
        welcomed): they go out again first on the next. The controller ignores a
        node's report for a step it has already recorded."""
        self._backlog[:0] = dones

    def runs(self) -> list[Run]:
        """Every run the table holds (scontrol listpids: ``nodeagent/listpids.py``)."""
        return list(self._runs.values())

    def busy(self) -> bool:
        """Whether any run is alive here (HealthCheckNodeState's ALLOC and MIXED)."""
        return any(run.done is None for run in self._runs.values())

    def drain(self, node: str, reason: str) -> bool:
        """Ask the controller to drain ``node`` (its health check failed, a run's processes
        outlived their kill); False while no stream is up, for the caller to ask again."""
        if self._send is None:
            return False
        self._send(pb.AgentMessage(drain=pb.NodeDrain(node=node, reason=reason)))
        return True

    def rebooted(self, node: str, boot_time: int) -> bool:
        """Tell the controller an emulated node's RebootProgram ended well
        (``nodeagent/reboot.py``); False while no stream is up, to ask again."""
        if self._send is None:
            return False
        self._send(pb.AgentMessage(rebooted=pb.NodeRebooted(node=node, boot_time=boot_time)))
        return True

    def _report(self, message: pb.AgentMessage) -> None:
        """Send a report; while no stream is up, a batch report is dropped (the next
        hello says it again) and a StepDone waits for the next stream."""
        if self._send is not None:
            self._send(message)
        elif message.WhichOneof("body") == "step_done":
            self._backlog.append(message.step_done)

    def targets(self) -> list[Target]:
        """The runs whose processes have started and not ended, for the sampler
        (:mod:`nodeagent.acctgather`)."""
        found = []
        for run in self._runs.values():
            if run.done is not None:
                continue
            if run.started is None:  # a step's runner says so in its directory alone
                run.started = run.dir.read_started()
            if run.started is None or run.started.pid <= 0:
                continue
            job_id, step, node = self._sampled_as(run)
            tasks = run.tasks if not run.is_batch else (0,)
            found.append(Target(job_id, step, node, run.started.pid, tasks, self.cgroup_of(run)))
        return found

    def _sampled_as(self, run: Run) -> tuple[int, str, str]:
        """The run's (job, step, node) in the sampler's and the controller's terms."""
        job_id, step, instance = run.key
        if run.is_batch:
            directory = os.path.dirname(os.path.abspath(run.dir.path))
            return job_id, str(step), self._node_of_dir.get(directory, "")
        return job_id, str(step), str(instance)

    def _with_peaks(self, run: Run, done: pb.AgentMessage) -> None:
        """A run's result with the sampled peaks where wait4's are lower: the sampler also
        saw the processes that escaped the runner's wait4 while they stayed in the run's
        group (or cgroup). sacct's MaxRSS and AveRSS read these."""
        peaks = self.sampler.peaks(self._sampled_as(run)) if self.sampler else None
        if peaks is None:
            return
        largest, total = peaks
        if done.WhichOneof("body") == "step_done":
            ended = done.step_done
            ended.max_rss_kb = max(ended.max_rss_kb, largest)
            ended.sum_rss_kb = max(ended.sum_rss_kb, total)
        elif done.WhichOneof("body") == "done":
            done.done.max_rss_kb = max(done.done.max_rss_kb, largest)

    def report_checkpoints(self) -> None:
        """Send the checkpoints the live runs reported by touching their file
        (:mod:`nodeagent.checkpoints`); while no stream is up, none: the next one
        hears of them all."""
        if self._send is None:
            return
        files = [self._watched(run) for run in self._runs.values() if run.done is None]
        found = self._checkpoints.look(files)
        if found:
            self._send(pb.AgentMessage(checkpoints=pb.Checkpoints(checkpoints=found)))

    def _last_checkpoint(self, run: Run) -> None:
        """Send the checkpoint of a run that has ended, if it touched its file since the
        last look: now, while the file is there, and before the run's end, after which
        the controller takes no checkpoint of a batch run's job."""
        found = self._checkpoints.last(self._watched(run))
        if found is not None and self._send is not None:
            self._send(pb.AgentMessage(checkpoints=pb.Checkpoints(checkpoints=[found])))

    def _watched(self, run: Run) -> Watched:
        return Watched(run.key, run.dir.checkpoint_file(), run.job_id, self._sampled_as(run)[2])

    def report_usage(self, usage: list[pb.StepUsage]) -> None:
        """Send a sample of the live runs (dropped while no stream is up: the next
        sample says it again)."""
        if usage:
            self._report(pb.AgentMessage(usage=pb.StepUsages(steps=usage)))

    # ------------------------------------------------------------ start-up

    def recover(self) -> None:
        """Adopt the run directories a previous agent process left: follow the runs
        still alive, report again the batch results not acknowledged, start the steps
        whose tasks never started, and drop the rest."""
        for node in self.hostnames:
            self.spool.prepare(node)
            for rundir in [*self.spool.jobs(node), *self.spool.steps(node)]:
                self._recover(node, rundir)
        for run in list(self._runs.values()):
            if run.done is not None and not self._batch_runs(run.job_id):
                # The job ended while no agent watched: its steps end too.
                self.terminate(run.job_id, "job ended", steps_only=True)
        if self.containment is not None:
            kept = {key[0] for key in self._runs}
            for node in self.hostnames:
                for path in cgroups.clear_stale(self.containment.layout, node, kept):
                    log.warning("cgroup %s of no run here: its processes killed", path)

    def _recover(self, node: str, rundir: RunDir) -> None:
        kind = kind_of(rundir)
        tasks: tuple[int, ...] = ()
        if isinstance(rundir, StepDir):
            spec = rundir.read_spec()
            if spec is None:  # its runner has nothing to run: nothing to report either
                rundir.settle_lost(0)
                rundir.delete()
                return
            tasks = spec.tasks
        if isinstance(rundir, JobDir):
            key = batch_key(rundir.job_id, rundir.restarts)
        else:
            assert isinstance(rundir, StepDir)
            key = step_key(rundir.job_id, rundir.step_id, node)
        run = Run(dir=rundir, kind=kind, key=key, tasks=tasks, pid=rundir.read_supervisor_pid())
        phase = rundir.phase()
        run.started = rundir.read_started()
        if phase in (Phase.LAUNCHING, Phase.RUNNING):
            self._runs[key] = run
            self._watch.adopt(run)
            self._adopt_mps(run)
            log.info("%s recovered as %s, pid %s", run.name, phase.value, run.pid)
            return
        if phase is Phase.LOST and run.started is None:
            if kind.restarts_unstarted and self._restart(run):
                return
            if not kind.restarts_unstarted:
                # The previous agent died mid-launch: nothing ran. Forget it; the
                # controller, not seeing it in the hello, sends the launch again.
                rundir.delete()
                log.info("%s was never started; awaiting its launch again", run.name)
                return
        if phase is Phase.DONE:
            run.done = kind.ended(run)
        else:
            run.done = kind.lost(run)
            log.warning("%s: its process died without a result", run.name)
        if kind.durable:
            self._runs[key] = run
            log.info("%s recovered as done, reported until acknowledged", run.name)
        else:
            log.info("%s ended unreported", run.name)
            rundir.delete()

    def _adopt_mps(self, run: Run) -> None:
        """Count an adopted batch run a holder of its MPS server."""
        if self.mps is None or not isinstance(run.dir, JobDir):
            return
        spec = run.dir.read_launch()
        if spec is not None:
            self.mps.adopt(spec.node, spec.job_id, spec.mps_gpu)

    def _restart(self, run: Run) -> bool:
        """Start the runner of a step whose tasks never started: the previous agent
        process stopped between writing the step and its runner taking it (or the
        runner died first). srun still waits for the step to connect, so it runs now
        rather than being lost. False if the runner cannot start."""
        assert isinstance(run.dir, StepDir)
        try:
            proc = spawn_step_runner(run.dir, self.python, self.supervisor_env, None)
        except OSError as exc:
            log.error("%s cannot restart: %s", run.name, exc)
            return False
        self._runs[run.key] = run
        self._watch.attach(run, proc)
        log.info("%s never started: runner started again, pid %s", run.name, proc.pid)
        return True

    # ------------------------------------------------------------ launches

    def refuse(self, msg: pb.LaunchJob | pb.LaunchStep, reason: str) -> None:
        """A launch whose credential did not verify: nothing runs. A run this agent
        has under its name is left alone (a refusal must not end one); otherwise the
        controller hears of a launch that ran nothing."""
        if isinstance(msg, pb.LaunchJob):
            key = batch_key(msg.job_id, msg.restarts)
        else:
            key = step_key(msg.job_id, msg.step_id, msg.node)
        if key in self._runs or key in self._rejected or key in self._reported:
            log.warning("%s launch refused (%s): the run here is left alone", key, reason)
            return
        log.warning("%s launch refused: %s", key, reason)
        if isinstance(msg, pb.LaunchJob):
            self._reject(key, reason)
        else:
            self._report(step_refusal(msg, reason))

    def launch(self, msg: pb.LaunchJob | pb.LaunchStep) -> None:
        """Start a run for a LaunchJob (the batch script) or a LaunchStep; a repeated
        launch is answered as the first was, without running anything again."""
        if isinstance(msg, pb.LaunchJob):
            self._launch_batch(msg)
        else:
            self._launch_step(msg)

    def _launch_batch(self, msg: pb.LaunchJob) -> None:
        key = batch_key(msg.job_id, msg.restarts)
        known = self._runs.get(key)
        if known is not None:
            log.info("%s duplicate launch, answering again", known.name)
            again = known.done or (known.kind.running(known) if known.started else None)
            if again is not None:
                self._report(again)
            return
        if key in self._rejected:
            self._report(self._rejected[key])
            return
        hostname = self.hostnames.get(msg.node)
        if hostname is None:
            log.warning("job_id=%d launch for node %s not served here", msg.job_id, msg.node)
            self._reject(key, f"node {msg.node} is not served by this agent")
            return
        jobdir = self.spool.job_dir(msg.node, msg.job_id, msg.restarts)
        try:
            jobdir.create()
        except OSError as exc:
            log.error("job_id=%d cannot create %s: %s", msg.job_id, jobdir.path, exc)
            self._reject(key, f"cannot create job directory: {exc.strerror}")
            return
        run = Run(dir=jobdir, kind=BATCH_KIND, key=key)
        self._runs[key] = run
        try:
            spec = launch_spec(
                msg, hostname, self.slurm_conf, self.devices, self.containment, self.oci
            )
            spec = dataclasses.replace(spec, hooks=self.hooks)
            self._bind(spec.environment, msg)
            spec.environment[CHECKPOINT_ENV] = jobdir.create_checkpoint(msg.uid, msg.gid)
            spec.environment[RESIZE_ENV] = jobdir.resize_file()
            jobdir.write_launch(spec)
            jobdir.write_script(msg.script, msg.uid, msg.gid)
            proc = spawn_supervisor(jobdir, self.python, self.supervisor_env, self.zygote)
        except OSError as exc:
            result = launch_failure(f"cannot start job supervisor: {exc}")
            with contextlib.suppress(OSError):
                jobdir.write_result(result)
            self._finish(run, pb.AgentMessage(done=done_message(key, result)))
            return
        self._watch.attach(run, proc)
        log.info("%s launched on %s, supervisor pid %s", run.name, msg.node, proc.pid)

    def _launch_step(self, msg: pb.LaunchStep) -> None:
        key = step_key(msg.job_id, msg.step_id, msg.node)
        running = self._runs.get(key)
        reported = self._reported.get(key)
        identity = launch_identity(msg)
        if running is not None:
            if running.identity == identity:
                log.info("%s: duplicate launch ignored", running.name)
            else:
                log.warning("%s: launched again while it runs, refused", running.name)
            return
        if reported is not None and reported[0] == identity:
            log.info("step %d.%d on %s: duplicate launch, reported again", *key)
            self._report(reported[1])
            return
        if msg.node not in self.hostnames:
            log.warning("step %d.%d for node %s not served here", *key)
            self._remember(
                key, identity, step_refusal(msg, f"node {msg.node} is not served by this agent")
            )
            return
        stepdir = self.spool.step_dir(msg.node, msg.job_id, msg.step_id)
        try:
            self._create(stepdir)
        except OSError as exc:
            log.error("step %d.%d cannot create %s: %s", msg.job_id, msg.step_id, stepdir.path, exc)
            message = f"cannot create step directory: {exc.strerror}"
            self._remember(key, identity, step_refusal(msg, message))
            return
        run = Run(dir=stepdir, kind=STEP_KIND, key=key, tasks=tuple(msg.tasks), identity=identity)
        self._runs[key] = run
        try:
            spec = dataclasses.replace(
                step_spec(msg, self.devices, self.containment, self.oci),
                hooks=self.hooks,
                task_env=task_bindings(
                    msg.node, [t.gpus for t in msg.task_gpus], self.neuron, self.mig
                ),
            )
            self._bind(spec.environment, msg)
            spec.environment[CHECKPOINT_ENV] = stepdir.create_checkpoint(msg.uid, msg.gid)
            spec.environment[RESIZE_ENV] = stepdir.resize_file()
            stepdir.write_spec(spec)
            proc = spawn_step_runner(stepdir, self.python, self.supervisor_env, self.zygote)
        except OSError as exc:
            log.error("%s cannot start its runner: %s", run.name, exc)
            message = f"cannot start step runner: {exc}"
            self._finish(run, step_refusal(msg, message))
            return
        self._watch.attach(run, proc)
        log.info("%s launched, runner pid %s", run.name, proc.pid)

    def _bind(self, environment: dict[str, str], msg: pb.LaunchJob | pb.LaunchStep) -> None:
        """Batch scripts and steps are bound to their granted GPUs alike."""
        bind_gpus(environment, msg.node, msg.job_id, msg.grant, self.mps, self.neuron, self.mig)

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

    def _reject(self, key: RunKey, message: str) -> None:
        done = pb.AgentMessage(done=done_message(key, launch_failure(message)))
        self._rejected[key] = done
        self._report(done)

    # ------------------------------------------------------------ requests

    def _of(self, job_id: int, step: int | str | None = None) -> list[Run]:
        """The job's runs here still running (only those of ``step`` when given)."""
        return [
            run
            for run in self._runs.values()
            if run.job_id == job_id and run.done is None and step in (None, run.key[1])
        ]

    def steps_on(self, job_id: int, node: str) -> int:
        """How many of the job's steps still run on ``node`` (its Epilog waits for them)."""
        return sum(1 for run in self._of(job_id) if not run.is_batch and run.key[2] == node)

    def _batch_runs(self, job_id: int) -> list[Run]:
        """The job's batch runs here still running, oldest first."""
        return sorted(self._of(job_id, BATCH), key=lambda run: run.key[2])

    def signal(self, msg: pb.SignalJob) -> None:
        """Deliver a signal, by Slurm's rules for who receives it.

        * signal 0 (terminate: cancel, requeue, node failure): every
          unfinished run of the job here, batch script and steps (TERM, then
          KILL after KillWait). SignalJob names no batch run: no run of the
          job should go on, older ones (stale after a requeue) included.
          With ``step_id``, that step alone.
        * ``batch_only``: the batch shell alone (of the current run).
        * ``full``: the batch script's process group and every step's tasks.
        * neither (``scancel --signal``): the tasks of the job's steps only,
          or of step ``step_id`` when it is set; not the batch script.
        """
        reason = msg.reason or "no reason"
        step_id = msg.step_id if msg.HasField("step_id") else None
        if msg.signal == 0:
            if step_id is None and not self._batch_runs(msg.job_id):
                log.info("job_id=%d terminate: no batch job here", msg.job_id)
            self.terminate(msg.job_id, reason, step_id)
            return
        if msg.batch_only or msg.full:
            self._signal_batch(msg)
        if not msg.batch_only:
            step = None if msg.full else step_id
            signum = msg.signal
            if step is not None and signum == signal.SIGKILL and msg.reason == "cancel":
                signum = CANCEL_STEP  # scancel JOB.STEP: the runner says it was cancelled
            sent = self._signal_steps(msg.job_id, signum, step)
            log.info(
                "job_id=%d signal %d to %d step(s)%s (%s)",
                msg.job_id,
                msg.signal,
                sent,
                "" if step is None else f" of step {step}",
                reason,
            )

    def terminate(
        self, job_id: int, reason: str, step_id: int | None = None, *, steps_only: bool = False
    ) -> None:
        """End the job's runs here (or step ``step_id``'s; or, ``steps_only``, its
        steps'): TERM, then KILL after the kill wait."""
        for run in self._of(job_id, step_id):
            if steps_only and run.is_batch:
                continue
            log.info("%s terminate (%s)", run.name, reason)
            self._cancel(run, reason == TIMEOUT)  # a batch run's outcome, an allocation's Kill

    def _cancel(self, run: Run, time_limit: bool = False) -> None:
        """Ask ``run``'s process to end it: TERM, then KILL after the kill wait
        (``time_limit``: its job's limit was reached)."""
        try:
            run.dir.request_cancel(self.kill_wait, time_limit)
        except OSError as exc:
            log.warning("%s cannot request its end: %s", run.name, exc)
            return
        self._watch.poke(run)

    def _signal_steps(self, job_id: int, signum: int, step_id: int | None) -> int:
        """Ask the runners of the job's steps here (or of ``step_id``'s) to send
        ``signum`` to their tasks (a step still starting, once they have started).
        Returns how many were asked."""
        asked = 0
        for run in self._of(job_id, step_id):
            if not run.is_batch and self._ask_signal(run, signum):
                asked += 1
        return asked

    def _ask_signal(self, run: Run, signum: int) -> bool:
        """Ask a step run's runner to send ``signum`` to its tasks; False if it failed."""
        assert isinstance(run.dir, StepDir)
        try:
            run.dir.request_signal(signum)
        except OSError as exc:
            log.warning("%s signal %d failed: %s", run.name, signum, exc)
            return False
        log.info("%s signal %d to its tasks", run.name, signum)
        self._watch.poke(run)
        return True

    def attach(self, msg: pb.AttachStep) -> None:
        """sattach: the runner of the step's part on ``msg.node`` told to connect to
        sattach's socket too (once the tasks have started, if they have not yet)."""
        for run in self._of(msg.job_id, msg.step_id):
            if run.is_batch or run.key[2] != msg.node:
                continue
            assert isinstance(run.dir, StepDir)
            try:
                run.dir.request_attach(msg.io_host, msg.io_port, msg.io_key.hex())
            except OSError as exc:
                log.warning("%s attach failed: %s", run.name, exc)
                continue
            log.info("%s: sattach at %s:%d", run.name, msg.io_host, msg.io_port)
            self._watch.poke(run)

    def _signal_batch(self, msg: pb.SignalJob) -> None:
        """The batch shell (``batch_only``) or the batch script's process group (``full``)
        of the job's current run."""
        runs = self._batch_runs(msg.job_id)
        if not runs:
            log.info("job_id=%d signal %d: no batch job here", msg.job_id, msg.signal)
            return
        self._signal_script(runs[-1], msg.signal, msg.batch_only, msg.reason or "no reason")

    def _signal_script(self, run: Run, signum: int, shell_only: bool, reason: str) -> None:
        """Send ``signum`` to a batch run's shell, or to its whole process group."""
        started = run.started or run.dir.read_started()
        if started is None:
            log.warning("%s signal %d dropped: not started yet", run.name, signum)
            return
        log.info(
            "%s signal %d to %s (%s)",
            run.name,
            signum,
            "batch shell" if shell_only else "batch process group",
            reason,
        )
        try:
            if shell_only:
                os.kill(started.pid, signum)
            else:
                os.killpg(started.pid, signum)
        except OSError as exc:
            log.warning("%s signal %d failed: %s", run.name, signum, exc)

    def resize(self, msg: pb.ResizeJob) -> None:
        """The job's allocation changed (:mod:`nodeagent.resizes`): its step runs on the
        served nodes it left end (TERM, then KILL after the kill wait); every other
        run of it here gets the new values in its resize file and, when the file
        changed and the message names one, the signal: the batch script's process
        group, a step's tasks. The batch run is never ended this way: its node is
        the job's first, which a resize keeps."""
        kept = set(msg.nodes)
        text = script(msg)
        for run in self._of(msg.job_id):
            node = self._sampled_as(run)[2]
            if not run.is_batch and node not in kept:
                log.info("%s terminate: job %d no longer holds %s", run.name, msg.job_id, node)
                self._cancel(run)
                continue
            try:
                changed = run.dir.write_resize(text)
            except OSError as exc:
                log.warning("%s cannot write its resize file: %s", run.name, exc)
                continue
            if not changed or not msg.signal:
                continue
            if run.is_batch:
                self._signal_script(run, msg.signal, False, "resized")
            elif isinstance(run.dir, StepDir):
                self._ask_signal(run, msg.signal)

    def update(self, msg: pb.UpdateJob) -> None:
        """A new time limit (``scontrol update``), for the job's current batch run."""
        runs = self._batch_runs(msg.job_id)
        if not runs:
            log.info("job_id=%d time limit update: no running job here", msg.job_id)
            return
        log.info("job_id=%d time limit now %d", msg.job_id, msg.time_limit)
        assert isinstance(runs[-1].dir, JobDir)
        runs[-1].dir.request_time_limit(msg.time_limit)
        self._watch.poke(runs[-1])

    def suspend(self, msg: pb.SuspendJob) -> None:
        """scontrol suspend or resume: every run of the job here (its batch script and
        its steps) stops its processes (SIGTSTP, then stopped after the message's
        grace) or lets them continue, its time limit moved on by the job's time
        suspended in all."""
        runs = self._of(msg.job_id)
        if not runs:
            log.info("job_id=%d suspend: no run of the job here", msg.job_id)
        for run in runs:
            try:
                run.dir.request_suspend(not msg.resume, msg.suspended_secs, msg.grace_secs)
            except OSError as exc:
                log.warning("%s cannot request its suspension: %s", run.name, exc)
                continue
            log.info("%s %s", run.name, "resume" if msg.resume else "suspend")
            self._watch.poke(run)

    def ack(self, msg: pb.AckDone) -> None:
        """The controller has recorded a JobDone: its run is forgotten here."""
        key = batch_key(msg.job_id, msg.restarts)
        if self._rejected.pop(key, None) is not None:
            return
        run = self._runs.get(key)
        if run is None:
            log.debug("job_id=%d ack for an unknown run %d", msg.job_id, msg.restarts)
            return
        if run.done is None:
            log.warning("job_id=%d ack for a job still running, ignored", msg.job_id)
            return
        run.dir.delete()
        del self._runs[key]
        log.debug("job_id=%d acknowledged, directory removed", msg.job_id)

    # ------------------------------------------------------------ watching

    def _unreported(self, run: Run) -> bool:
        return run.done is None and self._runs.get(run.key) is run

    def _check(self, run: Run) -> None:
        """Look at a run's directory and report whatever changed."""
        if not self._unreported(run):
            return
        phase = run.dir.phase()
        if run.started is None and phase is not Phase.LAUNCHING:
            run.started = run.dir.read_started()
            if run.started is not None:
                log.debug("%s running, pid %d", run.name, run.started.pid)
                running = run.kind.running(run)
                if running is not None:
                    self._report(running)
        if phase is Phase.DONE:
            done = run.kind.ended(run)
            if done is not None:
                self._finish(run, done)
        elif phase is Phase.LOST and run.notify_fd is None:
            done = run.kind.lost(run)
            log.warning("%s: its process died without a result", run.name)
            self._finish(run, done)

    def _finish(self, run: Run, done: pb.AgentMessage) -> None:
        """Report a run's end: a batch run's is kept until acknowledged, a step's is
        reported once and its directory deleted."""
        if run.is_batch:
            self.settle(run.job_id)  # steps that ended first are reported first
        self._watch.forget(run)
        self._last_checkpoint(run)
        self._with_peaks(run, done)
        _log_end(run, done)
        if run.kind.durable:
            if done.done.drain == KILL_TASK_FAILED and isinstance(run.dir, JobDir):
                spec = run.dir.read_launch()
                _log_unkillable(f"JOB {run.job_id}", spec.node if spec else "?")
            run.done = done
            self._report(done)
        else:
            result = run.dir.read_result() if isinstance(run.dir, StepDir) else None
            if result is not None and result.left_behind:  # slurmd's drain, as for a batch run
                _log_unkillable(f"STEP {run.job_id}.{run.key[1]}", str(run.key[2]))
                self.drain(str(run.key[2]), KILL_TASK_FAILED)
            self._runs.pop(run.key, None)
            run.dir.delete()
            self._remember(run.key, run.identity, done)
        if run.is_batch and not self._batch_runs(run.job_id):
            if self.mps is not None:
                self.mps.release(run.job_id)
            # Steps end with their job (as Slurm ends them when the batch script ends):
            # at its time limit, each says so (slurmstepd's "DUE TO TIME LIMIT").
            why = TIMEOUT if done.done.outcome == TIMEOUT else "job ended"
            self.terminate(run.job_id, why, steps_only=True)

    def _remember(self, key: RunKey, identity: bytes, done: pb.AgentMessage) -> None:
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
        for run in self._of(job_id):
            if not run.is_batch:
                self._check(run)

    def poll(self) -> None:
        """Check the runs no pipe tells us about."""
        self._watch.poll(self._runs)

    async def poll_forever(self, interval: float = POLL_INTERVAL) -> None:
        while True:
            await asyncio.sleep(interval)
            self.poll()

    def close(self) -> None:
        """Stop watching pipes and the zygote (agent shutdown); the runs carry on."""
        self.zygote.close()
        self._watch.close(self._runs.values())


def _run_cgroups(run: Run) -> tuple[str, ...]:
    """The run's cgroup directories, one per hierarchy (none: not contained), as its
    process recorded them (:func:`nodeagent.cgroups.run_paths`)."""
    return tuple(sorted(set(cgroups.run_paths(run.dir.path).values())))


def _log_unkillable(entity: str, node: str) -> None:
    """slurmstepd's line for a job or step whose processes outlived their SIGKILL by
    UnkillableStepTimeout (the node is drained "Kill task failed")."""
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    log.error(
        "*** %s STEPD TERMINATED ON %s AT %s DUE TO JOB NOT ENDING WITH SIGNALS ***",
        entity,
        node,
        when,
    )


def _log_end(run: Run, done: pb.AgentMessage) -> None:
    if done.WhichOneof("body") == "done":
        if done.done.outcome == "launch_failed":  # the supervisor's reason, in the agent's log
            log.error("%s launch failed: %s", run.name, done.done.message)
        log.info(
            "%s done: outcome=%s status=%d", run.name, done.done.outcome, done.done.exit_status
        )
        return
    statuses = list(done.step_done.statuses)
    if done.step_done.message and (not statuses or NOT_STARTED in statuses):
        log.warning("%s tasks not started: %s", run.name, done.step_done.message)
    log.info("%s done: statuses %s", run.name, statuses)
