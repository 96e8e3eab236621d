"""The per-step process on one node: runs an ``srun`` step's tasks here (slurmstepd's part).

``python -m nodeagent.steprunner STEPDIR [--lock-fd N] [--notify-fd N]``;
usually the zygote forks it instead (see :mod:`nodeagent.zygote`), in the
same state as a supervisor: a session of its own, SIGUSR1 and SIGCHLD
blocked, the step directory's lock held, the agent's notify pipe (end-of-file
when the runner exits). Everything it needs is the step directory's
``launch.json`` (:class:`~nodeagent.spool.StepSpec`); what it reports goes to
srun as it happens and to ``result`` at the end. Process model::

    agent ─ zygote ─fork─ runner (root; holds the lock) ══TCP══ srun
                            ├─ task: fork, become the user, exec argv
                            └─ task: ... (all tasks in one process group)

Each task is started from C where it can be (:mod:`nodeagent.taskspawn`: a
child sharing the runner's memory that only makes system calls, ~4x cheaper
than forking the interpreter), else by a fork whose Python child does the same
(:meth:`StepRun._exec_task`, the reference for what a task's start does).

The runner itself stays root, like the supervisor: so that the user cannot
kill it to escape the time limit, and so that it can write its result into
the root-owned spool. Each task switches to the user (:mod:`nodeagent.runas`)
in its child before exec; the files the user named are opened, and missing
directories made, with the user's effective ids.

In order:

1. A pending ``cancel`` means nothing runs (every status -1).
2. Open the tasks' files as the user, in ``cwd`` (or /tmp with a note on
   each task's stderr, as slurmstepd does).
3. Connect to srun (``io_host:io_port``, 10 s) and send HELLO. A runner that
   cannot connect runs nothing: every status -1 and a message.
4. Fork every task: the first one's pid is the process group of them all.
   Each gets ``environment`` plus SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
   SLURM_TASK_PID, SLURMD_NODENAME, SLURM_GTIDS and SLURM_CPUS_ON_NODE, and
   execs ``argv[0]`` looked up on its PATH (under ``--mpi=pmi2`` each also gets its end
   of a socketpair as ``PMI_FD``, served by :mod:`nodeagent.pmi` in the loop below,
   fences through srun as KVS and FENCE frames); if exec fails the task writes
   ``slurmstepd: error: execve(): ARGV0: REASON`` to its stderr and exits
   with the errno as status (2 for a missing command), as slurmstepd's tasks do.
5. The run loop every run shares (:class:`~nodeagent.runner.Runner`: selectors;
   signals arrive through ``signal.set_wakeup_fd``) forwards the tasks' output to srun as OUT/ERR
   frames as it is read, IN frames to the stdin of the tasks they name (every task
   by default, as Slurm's; ``nodeagent/taskinput.py``), SIGNAL frames to
   the process group; reaps each task with wait4 and sends its EXIT frame
   (after what it wrote before exiting); ends the tasks (CONT+TERM, KILL
   after the kill wait) at the time limit, on a ``cancel`` request or when
   srun's connection closes; and sends the tasks the signals the agent asks
   for (``signals``). The agent writes requests, then sends SIGUSR1; those
   made before the tasks started are acted on once they have.
6. When every task has ended: SIGKILL what is left in the process group,
   DONE, close; then the result (statuses in ``tasks`` order, the largest
   max RSS, the summed CPU times).

Under ``srun --pty`` (``pty``) global task 0 runs on a pseudo-terminal, as
slurmstepd runs it: made with the user's effective ids (so the device is the
user's), sized from SLURM_PTY_WIN_ROW and SLURM_PTY_WIN_COL before the task
starts and resized by srun's WINSIZE frames (the kernel then sends SIGWINCH
to the terminal's foreground job), its stdin, stdout and stderr, and the
controlling terminal of a session the task leads, so that a shell there has
job control. Its output comes back as OUT frames; every other task's I/O is
/dev/null (Slurm's rule). A session leader cannot join the step's process
group, so this node's other tasks share a second group (``side_pgid``), and
signals and the final kill go to both.

Why this module is over 500 lines: a step's runner is one process with one
loop; its tasks' I/O to srun (sealed frames, each task's stdin, each task's
output and exit) shares that loop's state. The process model it shares with the batch
script is ``nodeagent/runner.py``.
"""

from __future__ import annotations

import contextlib
import encodings.idna  # noqa: F401 (see below)
import logging
import os
import select
import selectors
import signal
import socket
import struct
import sys
import termios
import time
from fcntl import ioctl

from corral import filepattern, mpitypes, oomscore, stepcipher, stepinput, stepio
from nodeagent import attachers, cgroups, devcgroup, pmi, runas, taskspawn
from nodeagent.ending import use_of
from nodeagent.runas import InputError, LaunchError
from nodeagent.runner import WATCHED, Runner, Task, child_signals
from nodeagent.spool import CANCEL_STEP, NOT_STARTED, Started, StepDir, StepResult, StepSpec
from nodeagent.startargs import start
from nodeagent.taskinput import Inputs, TaskInput

# socket.getaddrinfo encodes host names with the idna codec, imported on first
# use: imported here, the zygote has it ready and each runner reaches srun ~2 ms sooner.
# Importing typing costs every step milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

log = logging.getLogger(__name__)

#: How long the runner tries to reach srun.
CONNECT_TIMEOUT = 10.0
#: How long the last frames may take to leave, and srun to hang up after DONE.
FLUSH_TIMEOUT = 10.0
LINGER = 1.0
READ_SIZE = 65536
#: Output queued for srun beyond which the tasks' pipes are left unread (back-pressure).
HIGH_WATER = 1 << 20
#: Input queued for one task beyond which srun's socket is left unread.
STDIN_HIGH_WATER = 1 << 22

_SOCKET = "srun"


def task_environment(spec: StepSpec) -> dict[str, str]:
    """What every local task gets: the step's environment plus this node's facts."""
    env = dict(spec.environment)
    env["SLURMD_NODENAME"] = spec.node
    env["SLURM_NODEID"] = str(spec.node_id)
    env["SLURM_GTIDS"] = ",".join(str(task_id) for task_id in spec.tasks)
    env["SLURM_CPUS_ON_NODE"] = str(spec.cpus)
    return env


#: How --cpu-bind=verbose's report names each binding type, as Slurm's task/affinity
#: does: the unit a type binds to after ``cpu-bind``, then the kind of mask.
_REPORT = {
    "threads": ("-threads", "MASK"),
    "cores": ("-cores", "MASK"),
    "sockets": ("-sockets", "MASK"),
    "ldoms": ("-ldoms", "MASK"),
    "mask_cpu": ("", "MASK"),
    "map_cpu": ("", "MAP "),
    "rank": ("", "RANK"),
}


def cpu_bind_line(spec: StepSpec, task: Task, bound: bool) -> str:
    """--cpu-bind=verbose's report of one task's affinity, in Slurm's task/affinity
    form: ``cpu-bind-cores=MASK - node, task  0  0 [pid]: mask 0x3 set`` (``NONE``
    and no ``set`` for an unbound task), the mask in hex without leading zeros."""
    value = 0
    for cpu in os.sched_getaffinity(0):
        value |= 1 << cpu
    units, kind = _REPORT.get(spec.cpu_kind, ("", "NONE")) if bound else ("", "NONE")
    action = "" if kind == "NONE" else " set"
    return (
        f"cpu-bind{units}={kind} - {spec.node}, task {task.task_id:2d} {task.index:2d} "
        f"[{os.getpid()}]: mask 0x{value:x}{action}\n"
    )


def expand(spec: StepSpec, pattern: str, task_id: int) -> str:
    """Expand a %-pattern for one task of this step on this node."""
    return filepattern.expand(
        pattern,
        job_id=spec.job_id,
        array_job_id=spec.array_job_id,
        array_task_id=spec.array_task_id,
        user=spec.user,
        job_name=spec.job_name,
        node=spec.node,
        node_index=spec.node_id,
        task_id=task_id,
        step=str(spec.step_id),
    )


class StepRun(Runner):
    """One node's part of one step, from the spec to the result: the step kind's parts
    of a run's process (srun's connection, the tasks' pipes and terminals, their
    signals, srun's end)."""

    def __init__(self, stepdir: StepDir, spec: StepSpec, notify_fd: int | None = None) -> None:
        super().__init__(stepdir, notify_fd, f"step {spec.job_id}.{spec.step_id}")
        self.stepdir = stepdir
        self.spec = spec
        self.tasks = [Task(index, task_id) for index, task_id in enumerate(spec.tasks)]
        self.sock: socket.socket | None = None
        self.session: stepcipher.Session | None = None  # sealed frames to and from srun
        self.outbuf = bytearray()
        self.paused = False
        self.corked = False  # in _reap: frames wait in outbuf, sent together after
        self.inputs = Inputs()  # the tasks' stdin pipes that IN frames feed
        self.child_fds: list[int] = []  # the tasks' ends, closed once they are forked
        self.devnull: int | None = None
        self.signals_read = 0  # how far ``signals`` has been acted on
        self.pty_task: Task | None = None  # srun --pty: the task on a terminal of its own
        self.side_pgid = 0  # then, the group of this node's other tasks
        self.pmi: pmi.NodePmi | None = None  # srun --mpi=pmi2: the tasks' PMI server
        self.pmi_ends: dict[int, int] = {}  # task index -> its end of its PMI socketpair
        self.pmi_socks: dict[pmi.TaskLink, socket.socket] = {}  # each task's PMI: our end
        self.kvs_in: dict[str, str] = {}  # a fence's union, as srun's KVS frames bring it
        self.attached: list[attachers.Attacher] = []  # sattach's connections
        self.attaches_read = 0  # how far ``attach`` has been acted on
        self.task_start: taskspawn.TaskStart | None = None  # tasks started from C
        self.aborted = False  # srun was told the step is being ended (ABORTED)

    # ------------------------------------------------------------ start

    def run(self) -> StepResult:
        self._catch_signals()
        spec = self.spec
        if self.stepdir.read_cancel() is not None:
            return self._not_started("cancelled before start")
        # A launch that must fail still connects to srun, to say why (as slurmstepd
        # does): srun then fails at once instead of waiting for a runner.
        refused = spec.refused
        groups = None
        cwd_error: OSError | None = None
        stdio: list[tuple[int, int, int]] = []
        failure = stepio.FAILED  # the frame that tells srun why nothing started
        if not refused:
            try:
                groups = runas.user_groups(spec.uid, spec.gid, spec.user)
                runas.apply_umask(spec.environment)
                with runas.as_user(spec.uid, spec.gid, groups):
                    cwd_error = runas.enter_work_dir(spec.cwd)
                    stdio = self._open_stdio()
            except LaunchError as exc:
                self._close_all()
                refused = str(exc)
                if isinstance(exc, InputError):
                    failure = stepio.IO_FAILED
        try:
            self._connect()
        except (OSError, ValueError) as exc:
            self._close_all()
            reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
            message = f"cannot connect to srun at {spec.io_host}:{spec.io_port}: {reason}"
            log.error("step %d.%d: %s", spec.job_id, spec.step_id, message)
            return self._not_started(refused or message)
        if not refused:
            refused = self._contain(spec.containment, spec.cgroup, spec.deny_devices)
            if refused:
                self._close_all()
        if refused:
            return self._refuse(refused, failure)
        early: list[tuple[int, int, bytes]] = []
        if spec.bcast:
            why, early = self._await_go()
            if why:
                self._close_all()
                if self.sock is not None:
                    self.sel.unregister(self.sock)
                    self.sock.close()
                    self.sock = None
                return self._not_started(why)
        note = ""
        if cwd_error is not None:
            note = (
                f"slurmstepd: error: couldn't chdir to `{spec.cwd}': {cwd_error.strerror}: "
                "going to /tmp instead\n"
            )
        self._start_tasks(stdio, groups, note)
        if self.pgid:
            tasks = tuple((t.pid, t.index, t.task_id) for t in self.tasks if t.pid)
            started = Started(pid=self.pgid, start_time=int(self.started_at), tasks=tasks)
            self.stepdir.write_started(started)
            if spec.time_limit >= 0:
                self.deadline = (spec.start_time or self.started_at) + spec.time_limit * 60
            self._check_requests()
            self._srun_frames(early)  # what srun sent after its GO, in the same read
            self._reap()
            self._loop()
        return self._finish()

    def _await_go(self) -> tuple[str, list[tuple[int, int, bytes]]]:
        """srun --bcast: no task starts before srun's GO says the executable's copy is
        on every node. Why not ("" once it came), and the frames srun sent after it;
        srun hanging up (its copy failed) or a cancel meanwhile start nothing."""
        assert self.sock is not None and self.session is not None
        while self.stepdir.read_cancel() is None:
            ready, _, _ = select.select([self.sock], [], [], 1.0)
            if not ready:
                continue
            try:
                frames = stepio.recv_frames(self.sock, self.session)
            except BlockingIOError:
                continue
            except (OSError, stepio.ProtocolError) as exc:
                return f"srun's connection failed before the start: {exc}", []
            if frames is None:
                return "srun hung up before the executable was copied", []
            for index, (kind, _, _) in enumerate(frames):
                if kind == stepio.GO:
                    return "", frames[index + 1 :]
        return "cancelled before start", []

    def _refuse(self, why: str, kind: int = stepio.FAILED) -> StepResult:
        """No task may start here: record that, then tell srun why in a ``kind``
        frame (FAILED: it exits non-zero; IO_FAILED: it says so for each task)."""
        spec = self.spec
        log.error("step %d.%d: task launch failed: %s", spec.job_id, spec.step_id, why)
        result = self._not_started(why)
        self._send(stepio.frame(kind, spec.node_id, why.encode()[: stepio.MAX_PAYLOAD]))
        self._hang_up()
        return result

    def _not_started(self, message: str) -> StepResult:
        now = int(time.time())
        result = StepResult(
            statuses=(NOT_STARTED,) * len(self.tasks),
            start_time=now,
            end_time=now,
            message=message,
        )
        self.stepdir.write_result(result)
        return result

    def _null(self) -> int:
        if self.devnull is None:
            self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            self.child_fds.append(self.devnull)
        return self.devnull

    def _pipe(self, task: Task, kind: int) -> int:
        """A pipe for ``task``'s stdout or stderr, read here; the task's end."""
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        task.pipes[read_end] = kind
        self.child_fds.append(write_end)
        return write_end

    def _terminal(self, task: Task) -> int:
        """srun -u: a pseudo-terminal for ``task``'s stdout, so that its C library
        flushes every line (as on a terminal) instead of filling a pipe's buffer;
        output processing is off, so its bytes arrive as written. The task's end."""
        main, side = os.openpty()
        mode = termios.tcgetattr(side)
        mode[1] &= ~termios.OPOST  # no "\n" -> "\r\n"
        mode[3] &= ~(termios.ECHO | termios.ICANON)
        termios.tcsetattr(side, termios.TCSANOW, mode)
        os.set_blocking(main, False)
        task.pipes[main] = stepio.OUT
        self.child_fds.append(side)
        return side

    def _pty(self, task: Task) -> tuple[int, int, int]:
        """srun --pty: a pseudo-terminal for ``task``'s stdin, stdout and stderr, at
        srun's terminal's size. It is made with the user's effective ids, so the
        device is theirs (slurmstepd switches ids around openpty for the same
        reason). Read here through one descriptor of its main side, written
        (srun's keystrokes) through another: the loop watches each for one event."""
        main, side = os.openpty()
        size = window(self.spec.environment)
        if size is not None:
            resize(side, *size)
        os.set_blocking(main, False)
        task.pipes[main] = stepio.OUT
        self.inputs.add(task.task_id, os.dup(main))
        self.child_fds.append(side)
        self.pty_task = task
        return side, side, side

    def _open_stdio(self) -> list[tuple[int, int, int]]:
        """Each task's stdin, stdout and stderr (run as the user, in the step's cwd).

        An output file named by several tasks (or by stdout and stderr) is
        opened once, so that it is truncated once, and shared, appending; an
        input file is opened per task. Which tasks read what srun (or sattach)
        sends is ``corral/stepinput.py``'s rule.
        """
        spec = self.spec
        outputs: dict[str, int] = {}

        def output(pattern: str, task_id: int) -> int:
            if pattern == "none":
                return self._null()
            path = os.path.abspath(expand(spec, pattern, task_id))
            if path not in outputs:
                # Appending (after one truncation) keeps tasks from writing over each other.
                outputs[path] = runas.open_output(path, append=True, truncate=not spec.append)
                self.child_fds.append(outputs[path])
            return outputs[path]

        if spec.pty:  # task 0's terminal; /dev/null for the others, as in Slurm
            return [self._pty(t) if t.task_id == 0 else (self._null(),) * 3 for t in self.tasks]
        stdio = []
        form, _ = stepinput.mode(spec.std_in, spec.ntasks)
        self.inputs.broadcast = form != stepinput.TASK
        for task in self.tasks:
            if stepinput.piped(spec.std_in, spec.ntasks, task.task_id):
                in_fd, fed = os.pipe()
                os.set_blocking(fed, False)
                self.inputs.add(task.task_id, fed)
                self.child_fds.append(in_fd)
            elif form != stepinput.NODE_FILE:
                in_fd = self._null()
            else:
                in_fd = runas.open_input(os.path.abspath(expand(spec, spec.std_in, task.task_id)))
                self.child_fds.append(in_fd)
            if spec.std_out:
                out_fd = output(spec.std_out, task.task_id)
            elif spec.unbuffered:
                out_fd = self._terminal(task)
            else:
                out_fd = self._pipe(task, stepio.OUT)
            if spec.std_err:
                err_fd = output(spec.std_err, task.task_id)
            elif spec.std_out:
                err_fd = out_fd  # srun -o without -e: stderr goes with stdout
            else:
                err_fd = self._pipe(task, stepio.ERR)
            stdio.append((in_fd, out_fd, err_fd))
        return stdio

    def _connect(self) -> None:
        spec = self.spec
        key = bytes.fromhex(spec.io_key)
        host = spec.io_host
        if host == socket.gethostname():  # srun runs on this host: no name to resolve
            host = "127.0.0.1"
        try:
            address = (host, spec.io_port)
            sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
        except socket.gaierror:  # srun's host name does not resolve here: it is this host
            address = ("127.0.0.1", spec.io_port)
            sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.session, opening = stepcipher.runner_session(key, spec.node_id, len(self.tasks))
            sock.sendall(opening)
        except BaseException:
            sock.close()
            raise
        sock.setblocking(False)
        self.sock = sock
        self.sel.register(sock, selectors.EVENT_READ, _SOCKET)

    def _start_tasks(self, stdio: list[tuple[int, int, int]], groups: Any, note: str) -> None:
        env = task_environment(self.spec)
        if mpitypes.wires(self.spec.mpi):
            self._serve_pmi()
        if taskspawn.applies(self.spec):
            self.task_start = self._task_start(groups)
        self.started_at = time.time()
        with self.signals_held():
            for task, fds in zip(self.tasks, stdio, strict=True):
                self._fork_task(task, fds, env, groups, note)
        for fd in dict.fromkeys(self.child_fds):
            os.close(fd)
        self.child_fds = []
        self.devnull = None
        for task in self.tasks:
            for fd in task.pipes:
                self.sel.register(fd, selectors.EVENT_READ, task)
        self.pmi_ends = {}  # closed with the other child ends
        for link, ours in list(self.pmi_socks.items()):
            if any(task.task_id == link.rank and task.pid for task in self.tasks):
                self._want(ours, selectors.EVENT_READ, link)
            else:  # never started: no fence waits for it
                self._pmi_close(link)

    # ------------------------------------------------------------ PMI (srun --mpi=pmi2)

    def _serve_pmi(self) -> None:
        """A socketpair per task (``PMI_FD`` is the task's end) and the node's PMI
        server over them (nodeagent/pmi.py), whose fences go through srun."""
        spec = self.spec
        job = pmi.PmiJob(
            # a step spanning heterogeneous job components: its leader's, in every part
            kvsname=f"{spec.environment.get('SLURM_JOB_ID') or spec.job_id}.{spec.step_id}",
            size=spec.ntasks,
            mapping=pmi.process_mapping(spec.node_tasks or [len(self.tasks)]),
        )
        self.pmi = pmi.NodePmi(job, self._fence_out, self._abort_out)
        for task in self.tasks:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            ours.setblocking(False)
            self.pmi_ends[task.index] = theirs.detach()
            self.child_fds.append(self.pmi_ends[task.index])
            self.pmi_socks[self.pmi.link(task.task_id)] = ours

    def _pmi_environment(self, task: Task) -> dict[str, str]:
        """In the task's child: its PMI variables, its end kept open across exec."""
        end = self.pmi_ends.get(task.index)
        if end is None or self.pmi is None:
            return {}
        os.set_inheritable(end, True)
        return pmi.task_environment(self.pmi.job, task.task_id, end)

    def _pmi_event(self, link: pmi.TaskLink, mask: int) -> None:
        ours = self.pmi_socks[link]
        if mask & selectors.EVENT_READ:
            try:
                data = ours.recv(READ_SIZE)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._pmi_close(link)
                return
            if data:
                try:
                    link.feed(data)
                except pmi.PmiError as exc:
                    log.warning("task %d: PMI: %s", link.rank, exc)
                    self._pmi_close(link)
                    return
        self._pmi_flush(link)

    def _pmi_flush(self, current: pmi.TaskLink | None = None) -> None:
        """Send what the tasks' PMI ends have queued (a fence's end, or a node attribute
        put, answers others than ``current``, the one whose event this is); watch each
        for writing while some is left."""
        for link, ours in self.pmi_socks.items():
            if link.closed or not (link.outbuf or link is current):
                continue
            if link.outbuf:
                try:
                    sent = ours.send(link.outbuf)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    self._pmi_close(link)
                    continue
                del link.outbuf[:sent]
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if link.outbuf else 0)
            self._want(ours, events, link)

    def _pmi_close(self, link: pmi.TaskLink) -> None:
        if link.closed:
            return
        ours = self.pmi_socks[link]
        self._want(ours, 0, link)
        ours.close()
        assert self.pmi is not None
        self.pmi.closed(link)  # a fence may be complete without it
        self._pmi_flush()

    def _fence_out(self, puts: dict[str, str]) -> None:
        """Every live task here is in the fence: this node's puts go to srun."""
        node_id = self.spec.node_id
        pairs = {key.encode("latin-1"): value.encode("latin-1") for key, value in puts.items()}
        for data in stepio.kvs_frames(node_id, pairs):
            self._send(data)
        self._send(stepio.frame(stepio.FENCE, node_id))

    def _fence_in(self, kind: int, payload: bytes) -> None:
        """srun's KVS frames (the union of every node's puts), then FENCE: it is over."""
        if self.pmi is None:
            raise stepio.ProtocolError("a fence without PMI")
        if kind == stepio.KVS:
            pairs = stepio.read_pairs(payload)
            self.kvs_in.update((k.decode("latin-1"), v.decode("latin-1")) for k, v in pairs.items())
            return
        union, self.kvs_in = self.kvs_in, {}
        self.pmi.fence_done(union)
        self._pmi_flush()

    def _abort_out(self, rank: int, code: int, message: str) -> None:
        """A task called PMI abort: srun ends the whole step (Slurm kills it)."""
        spec = self.spec
        log.warning("step %d.%d: task %d: PMI abort (%d) %s", spec.job_id, spec.step_id, rank,
                    code, message)  # fmt: skip
        self._send(stepio.abort_frame(rank, code, message))

    def _task_start(self, groups: list[int] | None) -> taskspawn.TaskStart:
        """What starting this step's tasks from C shares: the cgroups each joins (the
        run's, else the GPU fence's) as :meth:`enter_cgroups` joins them."""
        if self.contained is not None:
            joins = [os.path.join(path, "cgroup.procs") for _, path, _ in self.contained.made]
            why, confined = "cannot join the job's cgroups: ", bool(self.spec.cgroup)
        elif self.cgroup is not None:
            joins = [os.path.join(self.cgroup, "cgroup.procs")]
            why, confined = f"cannot fence GPUs: cannot join cgroup {self.cgroup}: ", True
        else:
            joins, why, confined = [], "", False
        return taskspawn.TaskStart(self.spec, groups, joins, why, confined)

    def _spawn(
        self, task: Task, fds: tuple[int, int, int], env: dict[str, str], note: str
    ) -> int | None:
        """Start ``task`` from C (nodeagent/taskspawn.py) as :meth:`_exec_task` would;
        its pid, or None where the Python child must start it."""
        start, spec = self.task_start, self.spec
        if start is None:
            return None
        argv = spec.task_argv[task.index] if spec.task_argv else list(spec.argv)
        cpus = spec.task_cpus[task.index] if spec.task_cpus else spec.cpu_ids
        if not start.fits(argv, cpus):
            return None
        extra = dict(spec.task_env[task.index]) if spec.task_env else {}
        pmi_fd = self.pmi_ends.get(task.index, -1)
        if self.pmi is not None and pmi_fd >= 0:  # its end made inheritable in the child
            extra.update(pmi.task_environment(self.pmi.job, task.task_id, pmi_fd))
        extra |= {
            "SLURM_PROCID": str(task.task_id),
            "SLURM_LOCALID": str(task.index),
        }
        task_env = start.environment(env, extra)
        if task_env is None:
            return None
        session = task is self.pty_task
        return start.spawn(
            session=session,
            pgid=0 if session else self._group(),
            cpus=cpus,
            stdio=fds,
            pmi_fd=pmi_fd,
            note=note,
            argv=argv,
            env=task_env,
        )

    def _fork_task(
        self, task: Task, fds: tuple[int, int, int], env: dict[str, str], groups: Any, note: str
    ) -> None:
        try:
            pid = self._spawn(task, fds, env, note)
            if pid is None:
                pid = self._fork(lambda: self._exec_task(task, fds, env, groups, note))
        except OSError as exc:
            self.message = f"cannot start task {task.task_id}: {exc.strerror}"
            log.error("step %d.%d: %s", self.spec.job_id, self.spec.step_id, self.message)
            task.status = NOT_STARTED
            self._close_task_pipes(task)
            return
        task.pid = pid
        self.by_pid[pid] = task
        if task is self.pty_task:  # it leads a session: its pid is its group
            self.pgid = pid
            return
        group = self._group() or pid
        if self.pty_task is None:
            self.pgid = group
        else:
            self.side_pgid = group
            self.pgid = self.pgid or group  # the terminal's task did not start
        # Both sides set the group, so that it is set whichever runs first.
        with contextlib.suppress(OSError):
            os.setpgid(pid, group)

    def _group(self) -> int:
        """The process group the next task joins (0: one of its own): the step's,
        or under --pty that of the tasks beside the terminal's."""
        return self.pgid if self.pty_task is None else self.side_pgid

    def _groups(self) -> list[int]:
        return [group for group in dict.fromkeys((self.pgid, self.side_pgid)) if group]

    def _exec_task(
        self, task: Task, fds: tuple[int, int, int], env: dict[str, str], groups: Any, note: str
    ) -> NoReturn:
        """In the forked child: become the task and exec it; never returns."""
        spec = self.spec
        argv = spec.task_argv[task.index] if spec.task_argv else list(spec.argv)
        program = argv[0] if argv else ""
        status = 1
        try:
            if task is self.pty_task:
                os.setsid()  # a session, so that the terminal can be its controlling one
            else:
                os.setpgid(0, self._group())  # 0 for the first task: a group of its own
            confined = self.enter_cgroups(bool(spec.cgroup))
            bound = spec.task_cpus[task.index] if spec.task_cpus else spec.cpu_ids
            runas.pin_cpus(bound)
            child_signals()  # unblocks: what came meanwhile now acts as it would
            oomscore.unprotect()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            if task is self.pty_task:
                ioctl(0, termios.TIOCSCTTY, 0)
            if spec.container:
                from nodeagent import oci  # loaded only for a step in a container

                oci.make_bundle_dir(self.stepdir.path, task.task_id, spec.uid, spec.gid)
            runas.become_user(spec.uid, spec.gid, spec.user, groups)
            if note:
                os.write(2, note.encode())
            if spec.cpu_verbose:
                os.write(2, cpu_bind_line(spec, task, bool(spec.task_cpus)).encode())
            env = {
                **env,
                **(spec.task_env[task.index] if spec.task_env else {}),  # its --gpu-bind
                **self._pmi_environment(task),
                "SLURM_PROCID": str(task.task_id),
                "SLURM_LOCALID": str(task.index),
                "SLURM_TASK_PID": str(os.getpid()),
            }
            if spec.hooks.task_prolog:
                from nodeagent import hooks  # loaded only where a site program is set

                env = hooks.task_prolog(spec.hooks, env, spec.node)
            if confined:
                devcgroup.local_binding(env, set(spec.gpus))
            if spec.container:
                oci.exec_container(
                    spec.container,
                    run_dir=self.stepdir.path,
                    args=argv,
                    env=env,
                    cwd=os.getcwd(),
                    ids=(spec.uid, spec.gid, spec.user),
                    job_id=spec.job_id,
                    node=spec.node,
                    step=str(spec.step_id),
                    task=task.task_id,
                )
            status = 2
            os.execvpe(program, argv or [program], env)
        except LaunchError as exc:  # its container's bundle cannot be used
            message = f"slurmstepd: error: {exc}\n"
        except OSError as exc:
            if status == 2:
                status = exc.errno or 2
                message = f"slurmstepd: error: execve(): {program}: {os.strerror(status)}\n"
            else:
                message = f"slurmstepd: error: task setup failed: {exc}\n"
        except BaseException as exc:
            message = f"slurmstepd: error: task setup failed: {type(exc).__name__}: {exc}\n"
        try:
            os.write(2, message.encode())
        finally:
            os._exit(status)

    # ------------------------------------------------------------ the loop

    def _event(self, key: selectors.SelectorKey, mask: int) -> None:
        what = key.data
        if what == _SOCKET:
            if mask & selectors.EVENT_WRITE:
                self._flush()
            if mask & selectors.EVENT_READ and self.sock is not None:
                self._from_srun()
        elif isinstance(what, TaskInput):
            self._feed(what)
        elif isinstance(what, Task) and key.fd in what.pipes:
            self._read_pipe(what, key.fd)
        elif isinstance(what, pmi.TaskLink):
            self._pmi_event(what, mask)
        elif isinstance(what, attachers.Attacher):
            self._from_attacher(what)

    def _time_up(self) -> None:
        self._end("time limit reached", self.spec.kill_wait, " DUE TO TIME LIMIT")

    def _requests(self) -> None:
        """Signals for the tasks (``signals``); sattach's sockets (``attach``)."""
        spec = self.spec
        wanted, self.attaches_read = self.stepdir.read_attaches(self.attaches_read)
        for host, port, key in wanted:
            self._attach(host, port, key)
        signums, self.signals_read = self.stepdir.read_signals(self.signals_read)
        for signum in signums:
            if signum == CANCEL_STEP:
                self._cancel_step()
            elif 0 < signum < signal.NSIG:
                log.info("step %d.%d: signal %d requested", spec.job_id, spec.step_id, signum)
                forced = signum == signal.SIGKILL and self._running()
                self._signal(signum)
                if forced:  # scancel -s KILL: srun's "Force Terminated StepId=..."
                    self._send(stepio.frame(stepio.FORCED, 0))

    def _cancel_step(self) -> None:
        """``scancel JOB.STEP``: as Slurm 22.05, srun hears that the step is aborted,
        slurmstepd's CANCELLED line shows, and the tasks are killed at once (KILL, no
        TERM first: srun says "Killed")."""
        spec = self.spec
        if not self._running():
            return
        log.info("step %d.%d: cancelled", spec.job_id, spec.step_id)
        self._aborted(spec.kill_wait)
        self._say(self._cancelled_line(""))
        self._signal(signal.SIGKILL)

    def _aborted(self, kill_wait: int) -> None:
        """Tell srun, once, that the step is being ended for it (its "Job step aborted:
        Waiting up to N seconds" line)."""
        if not self.aborted:
            self.aborted = True
            self._send(stepio.frame(stepio.ABORTED, kill_wait))

    def _cancelled_line(self, banner: str) -> str:
        spec = self.spec
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        return (
            f"slurmstepd: error: *** STEP {spec.job_id}.{spec.step_id} ON {spec.node} "
            f"CANCELLED AT {stamp}{banner} ***\n"
        )

    def _attach(self, host: str, port: int, key: str) -> None:
        """Connect to a sattach: from now on it hears what srun hears."""
        spec = self.spec
        try:
            attacher = attachers.connect(host, port, key, spec.node_id, len(self.tasks))
        except (OSError, ValueError) as exc:
            log.warning(
                "step %d.%d: sattach at %s:%d: %s", spec.job_id, spec.step_id, host, port, exc
            )
            return
        log.info("step %d.%d: sattach at %s:%d attached", spec.job_id, spec.step_id, host, port)
        self.attached.append(attacher)
        self.sel.register(attacher.sock, selectors.EVENT_READ, attacher)

    def _detach(self, attacher: attachers.Attacher) -> None:
        self._want(attacher.sock, 0, attacher)
        self.attached.remove(attacher)
        attacher.close()

    def _from_attacher(self, attacher: attachers.Attacher) -> None:
        """What a sattach sent: stdin for the tasks it names; its end of input closes
        their stdin, as 22.05's sattach's does (measured: srun's later input is lost)."""
        data, attached = attacher.stdin()
        for task, payload in data:
            self._stdin(task, payload)
        if not attached:
            self._detach(attacher)

    def _cancel(self, kill_wait: int) -> None:
        if self.stepdir.cancel_at_time_limit():  # its job's limit: the batch run's
            self._end("time limit reached", kill_wait, " DUE TO TIME LIMIT")
        else:
            self._end("cancelled", kill_wait, "")

    def _end(self, why: str, kill_wait: int, banner: str | None) -> None:
        """End the tasks: CONT and TERM now, KILL after ``kill_wait`` seconds.

        With a ``banner``, srun shows slurmstepd's line on its stderr (as the
        first task's, whatever the tasks' own stderr is).
        """
        spec = self.spec
        if not self._begin_end(why, kill_wait):
            return  # ending already: at most the KILL came forward
        log.info("step %d.%d: ending the tasks: %s", spec.job_id, spec.step_id, why)
        if banner is not None and self.tasks:
            # srun's "Job step aborted" line comes before slurmstepd's on a cancel and
            # after it at the time limit, as measured on Slurm 22.05.
            if not banner:
                self._aborted(kill_wait)
            self._say(self._cancelled_line(banner))
            self._aborted(kill_wait)

    def _say(self, line: str) -> None:
        """A line of slurmstepd's on the first task's stderr, as srun shows it; through
        a terminal's output processing (\n as \r\n) where that task has one, as
        slurmstepd's own stderr is the terminal then."""
        data = line.encode()
        if self.pty_task is self.tasks[0]:
            data = data.replace(b"\n", b"\r\n")
        self._send(stepio.frame(stepio.ERR, self.tasks[0].task_id, data))

    def _reap(self) -> None:
        """Every task that has ended, their EXIT frames (and last output) sent to srun
        together: one send for all the tasks of a wake, where one each cost a system
        call each (a step of 250 tasks on a node ends them in a few wakes)."""
        self.corked = True
        try:
            super()._reap()
        finally:
            self.corked = False
        if self.outbuf:
            self._flush()

    def _exited(self, task: Task) -> None:
        # What the task wrote before it exited goes out before its EXIT.
        for fd in list(task.pipes):
            self._drain(task, fd)
        self._send(stepio.exit_frame(task.task_id, task.status or 0))

    # ------------------------------------------------------------ the tasks' pipes

    def _read_pipe(self, task: Task, fd: int) -> bool:
        """Forward one read of ``fd``; False once nothing more is there for now."""
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._close_pipe(task, fd)
            return False
        self._send(stepio.frame(task.pipes[fd], task.task_id, data))
        return True

    def _drain(self, task: Task, fd: int) -> None:
        while fd in task.pipes and self._read_pipe(task, fd):
            pass

    def _close_pipe(self, task: Task, fd: int) -> None:
        self._want(fd, 0, task)
        del task.pipes[fd]
        os.close(fd)

    def _close_task_pipes(self, task: Task) -> None:
        for fd in list(task.pipes):
            self._close_pipe(task, fd)

    def _pause(self, paused: bool) -> None:
        """Stop or resume reading the tasks' pipes (while srun is slow to read)."""
        if paused == self.paused:
            return
        self.paused = paused
        for task in self.tasks:
            for fd in task.pipes:
                self._want(fd, 0 if paused else selectors.EVENT_READ, task)

    # ------------------------------------------------------------ srun's connection

    def _send(self, data: bytes) -> None:
        """Queue a frame for srun (dropped once srun is gone) and send what can go now;
        each sattach attached gets it too, or is dropped."""
        for attacher in list(self.attached):
            if not attacher.send(data):
                self._detach(attacher)
        sock = self.sock
        if sock is None or self.session is None:
            return
        data = self.session.seal(data)
        if not self.outbuf and not self.corked:
            try:
                sent = sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._srun_gone("connection lost")
                return
            if sent == len(data):
                return
            data = data[sent:]
        self.outbuf += data
        self._watch_socket()
        if len(self.outbuf) > HIGH_WATER:
            self._pause(True)

    def _flush(self) -> None:
        sock = self.sock
        if sock is None:
            return
        try:
            sent = sock.send(self.outbuf)
        except BlockingIOError:
            return
        except OSError:
            self._srun_gone("connection lost")
            return
        del self.outbuf[:sent]
        self._watch_socket()
        if len(self.outbuf) <= HIGH_WATER // 2:
            self._pause(False)

    def _watch_socket(self) -> None:
        """Read srun unless a task's stdin is backed up; write while frames are queued."""
        if self.sock is None:
            return
        events = selectors.EVENT_WRITE if self.outbuf else 0
        if self.inputs.backlog() <= STDIN_HIGH_WATER:
            events |= selectors.EVENT_READ
        self._want(self.sock, events, _SOCKET)

    def _want(self, fileobj: Any, events: int, data: object) -> None:
        """Watch ``fileobj`` for ``events`` (none: not at all)."""
        try:
            key = self.sel.get_key(fileobj)
        except KeyError:
            key = None
        if not events:
            if key is not None:
                self.sel.unregister(fileobj)
        elif key is None:
            self.sel.register(fileobj, events, data)
        elif key.events != events:
            self.sel.modify(fileobj, events, data)

    def _from_srun(self) -> None:
        assert self.sock is not None and self.session is not None
        try:
            frames = stepio.recv_frames(self.sock, self.session)
        except BlockingIOError:
            return
        except stepio.ProtocolError as exc:
            self._srun_gone(f"bad frame from srun: {exc}")
            return
        except OSError:
            frames = None
        if frames is None:
            self._srun_gone("srun closed the connection")
            return
        self._srun_frames(frames)

    def _srun_frames(self, frames: list[tuple[int, int, bytes]]) -> None:
        spec = self.spec
        for kind, number, payload in frames:
            if kind == stepio.IN:
                self._stdin(number, payload)
            elif kind == stepio.SIGNAL and number == stepio.TERM_KILL:
                self._end("a task exited badly", spec.kill_wait, None)
            elif kind == stepio.SIGNAL and 0 < number < signal.NSIG:
                log.info("step %d.%d: signal %d from srun", spec.job_id, spec.step_id, number)
                self._signal(number)
            elif kind == stepio.WINSIZE:
                try:
                    self._resize(*stepio.read_winsize(payload))
                except stepio.ProtocolError as exc:
                    self._srun_gone(f"bad frame from srun: {exc}")
                    return
            elif kind in (stepio.KVS, stepio.FENCE):
                try:
                    self._fence_in(kind, payload)
                except stepio.ProtocolError as exc:
                    self._srun_gone(f"bad frame from srun: {exc}")
                    return

    def _resize(self, rows: int, cols: int) -> None:
        """srun's terminal changed size: so does task 0's (the kernel sends SIGWINCH to
        its foreground job). Nothing where no task here has a terminal, or it is closed."""
        if self.pty_task is not None:
            for fd in self.pty_task.pipes:
                resize(fd, rows, cols)

    def _srun_gone(self, why: str) -> None:
        """srun is no more: drop its connection and end the tasks."""
        log.warning("step %d.%d: %s", self.spec.job_id, self.spec.step_id, why)
        if self.sock is not None:
            self._want(self.sock, 0, _SOCKET)
            self.sock.close()
            self.sock = None
        self.outbuf.clear()
        self._pause(False)
        self._close_stdin()
        if self._running():
            self._end(why, self.spec.kill_wait, None)

    # ------------------------------------------------------------ the tasks' stdin

    def _stdin(self, task: int, payload: bytes) -> None:
        """IN frame: bytes for ``task`` (or every task fed), or (empty) their end-of-file."""
        for one in self.inputs.queue(task, payload):
            self._feed(one)

    def _feed(self, one: TaskInput) -> None:
        if self.inputs.by_task.get(one.task_id) is not one:  # closed already
            return
        if not one.flush():
            self._close_input(one)
            return
        self._want(one.fd, selectors.EVENT_WRITE if one.queued else 0, one)
        self._watch_socket()

    def _close_input(self, one: TaskInput) -> None:
        self._want(one.fd, 0, one)
        self.inputs.remove(one)
        self._watch_socket()

    def _close_stdin(self) -> None:
        """Close every task's stdin pipe (srun is gone, or the tasks are)."""
        for one in self.inputs.all():
            self._close_input(one)

    # ------------------------------------------------------------ the end

    def _close_all(self) -> None:
        """Close every descriptor opened for the tasks (when they never start)."""
        for fd in dict.fromkeys(self.child_fds):
            os.close(fd)
        self.child_fds = []
        self.devnull = None
        for task in self.tasks:
            for fd in task.pipes:
                os.close(fd)
            task.pipes.clear()
        for one in self.inputs.all():
            self.inputs.remove(one)

    def _finish(self) -> StepResult:
        spec = self.spec
        self._end_group()
        if spec.container:
            from nodeagent import oci

            oci.delete_after_run(
                spec.container,
                run_dir=self.stepdir.path,
                ids=(spec.uid, spec.gid, spec.user),
                job_id=spec.job_id,
                node=spec.node,
                step=str(spec.step_id),
                tasks=[task.task_id for task in self.tasks],
                groups=None,
            )
        for link in list(self.pmi_socks):
            self._pmi_close(link)
        for task in self.tasks:
            for fd in list(task.pipes):
                self._drain(task, fd)
                if fd in task.pipes:
                    self._close_pipe(task, fd)
        self._close_stdin()
        if spec.hooks.task_epilog:
            from nodeagent import hooks  # loaded only where a site program is set

            ran = [(t.task_id, t.index, t.pid) for t in self.tasks if t.pid]
            hooks.step_task_epilogs(spec, task_environment(spec), ran)
        statuses = tuple(NOT_STARTED if t.status is None else t.status for t in self.tasks)
        use = use_of([task.usage for task in self.tasks if task.usage is not None])
        result = StepResult(
            statuses=statuses,
            start_time=int(self.started_at),
            end_time=int(time.time()),
            max_rss_kb=use.max_rss_kb,
            sum_rss_kb=use.sum_rss_kb,
            user_cpu_us=use.user_cpu_us,
            sys_cpu_us=use.sys_cpu_us,
            message=self.message,
            oom_kills=self.oom_kills(),
            left_behind=len(self.left_behind),
        )
        if result.oom_kills:  # slurmstepd's line, on the step's stderr
            line = cgroups.oom_message(result.oom_kills, f"{spec.job_id}.{spec.step_id}")
            self._say(line)
        log.info(
            "step %d.%d: done, statuses %s%s",
            spec.job_id,
            spec.step_id,
            list(statuses),
            f" ({self.ending.why})" if self.ending.why else "",
        )
        # The result reaches the agent (and the controller) before srun hears DONE:
        # srun's exit often ends the job, and the step's record must not lose that race.
        self.stepdir.write_result(result)
        self._notify(b"d")
        self._send(stepio.frame(stepio.DONE, spec.node_id))
        for attacher in list(self.attached):
            self._detach(attacher)
        self._hang_up()
        return result

    def _hang_up(self) -> None:
        """Send what is queued, then close once srun has hung up (or after LINGER).

        Closing with srun's bytes unread would reset the connection, and a
        reset can discard output srun has not read yet.
        """
        sock = self.sock
        if sock is None:
            return
        self.sock = None
        try:
            sock.settimeout(FLUSH_TIMEOUT)
            sock.sendall(self.outbuf)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(LINGER)
            while sock.recv(READ_SIZE):
                pass
        except OSError:
            pass
        finally:
            sock.close()


#: ``struct winsize``: rows, columns, and two pixel sizes left 0.
_WINSIZE = struct.Struct("HHHH")


def window(env: dict[str, str]) -> tuple[int, int] | None:
    """(rows, columns) srun's terminal had at launch: SLURM_PTY_WIN_ROW and
    SLURM_PTY_WIN_COL, as slurmstepd reads them; None when either is missing or bad."""
    try:
        rows, cols = int(env["SLURM_PTY_WIN_ROW"]), int(env["SLURM_PTY_WIN_COL"])
    except (KeyError, ValueError):
        return None
    return (rows, cols) if 0 <= rows <= 0xFFFF and 0 <= cols <= 0xFFFF else None


def resize(fd: int, rows: int, cols: int) -> None:
    """Set the size of the terminal ``fd`` is a side of."""
    with contextlib.suppress(OSError):  # closed meanwhile by its task's end
        ioctl(fd, termios.TIOCSWINSZ, _WINSIZE.pack(rows, cols, 0, 0))


def run_step(path: str, lock_fd: int | None, notify_fd: int | None) -> int:
    """Run the step in ``path`` to its end and record how it ended.

    The same in a process started for the step and in a child of the zygote.
    """
    stepdir = StepDir(os.path.abspath(path))
    if not stepdir.claim(lock_fd, notify_fd):
        log.error("step %d.%d: another runner holds %s", stepdir.job_id, stepdir.step_id, path)
        return 1
    spec = stepdir.read_spec()
    if spec is None:
        now = int(time.time())
        result = StepResult((), start_time=now, end_time=now, message="no step description")
        stepdir.write_result(result)
        return 0
    run = StepRun(stepdir, spec, notify_fd)
    try:
        run.run()  # writes its result itself
    except Exception:
        log.exception("step %d.%d: step runner failed", spec.job_id, spec.step_id)
        stepdir.settle_lost(len(spec.tasks))
        return 1
    finally:
        run.release()
    return 0


USAGE = "usage: python -m nodeagent.steprunner STEPDIR [--lock-fd N] [--notify-fd N]"


def main(argv: list[str] | None = None) -> int:
    path, lock_fd, notify_fd, zygote_fd = start(argv, USAGE, WATCHED, "step runner")
    if zygote_fd is not None:
        raise SystemExit(USAGE)
    return run_step(path, lock_fd, notify_fd)


if __name__ == "__main__":
    sys.exit(main())
