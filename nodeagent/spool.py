"""Job directories on disk: the only state the agent and supervisors share.

Layout: ``SlurmdSpoolDir/<node>/job<id>.<restarts>/`` (when SlurmdSpoolDir
contains ``%n`` the expanded path already names the node and is used as is;
``%h`` is this host's name). A job directory is owned by the agent's user
(root in production) with mode 0711, so the job user can execute its script
but cannot plant files the supervisor would later write through.

Files in a job directory (who writes them):

=================  ==========  ==================================================
``launch.json``    agent       the launch description (:class:`LaunchSpec`)
``script``         agent       the batch script, mode 0700, owned by the job user
``lock``           agent       held with flock(2) by the supervisor for its whole
                               life: a free lock means no supervisor runs
``supervisor.pid`` supervisor  its pid, so a restarted agent can signal it
``supervisor.log`` supervisor  its own stderr
``started``        supervisor  the script's pid and start time (:class:`Started`)
``time_limit``     agent       a new limit in minutes (``scontrol update``)
``cancel``         agent       terminate request; content: KillWait seconds
``suspend``        agent       scontrol suspend/resume: ``stop`` or ``cont``, the
                               job's seconds suspended in all (its limit moves by them)
                               and the seconds from SIGTSTP to the stop
``cgroups``        supervisor  the run's cgroups by role (:func:`nodeagent.cgroups.run_paths`)
``result``         supervisor  how the job ended (:class:`Result`), written last
``checkpoint/``    agent       the job user's own directory (mode 0700), holding
                               ``saved``, the file CORRAL_CHECKPOINT_FILE names: a
                               touch reports a checkpoint (:mod:`nodeagent.checkpoints`),
                               and, once the job's allocation changed, ``resize``,
                               the file CORRAL_RESIZE_FILE names (:mod:`nodeagent.resizes`),
                               written by the agent by rename
=================  ==========  ==================================================

Job steps (``srun``) have directories of their own next to the jobs',
``step<job id>.<step id>/``, since a step's node need not be its job's batch
host. Their files have the same names and writers, the step runner
(:mod:`nodeagent.steprunner`) playing the supervisor: ``launch.json`` (a
:class:`StepSpec`), ``lock``, ``supervisor.pid``, ``supervisor.log``,
``started`` (the tasks' process group), ``cancel``, ``suspend``, ``signals`` (signal
numbers for the tasks, one a line, appended by the agent), ``result`` (a
:class:`StepResult`) and ``checkpoint/``. The agent deletes a step directory as soon as it has
reported the result: step results do not survive an agent restart.

Beside the node directories, ``hookresults/`` holds what the Prolog and Epilog
run for jobs whose batch script runs elsewhere did, until the controller
acknowledges it; the agent alone reads and writes it (:mod:`nodeagent.nodehooks`).

The launch description is JSON rather than LaunchJob protobuf bytes because
the supervisor starts once per job and importing protobuf would triple its
start-up time; the file never leaves the host, so it is not a wire format.

This module imports only the standard library, and not even all of that
(no typing or argparse, and shutil only when the agent deletes a run), for the
same reason.

Why this module is over 500 lines: it is the whole on-disk contract between the
agent and the processes it starts (every file of a run directory, who writes it,
and how it is read back after a crash); split, the two sides could disagree.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import signal
import time
from dataclasses import dataclass, field
from enum import Enum

from corral.dirsync import replace_durably

# Importing typing costs the supervisor milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LAUNCH = "launch.json"
SCRIPT = "script"
LOCK = "lock"
SUPERVISOR_PID = "supervisor.pid"
SUPERVISOR_LOG = "supervisor.log"
STARTED = "started"
TIME_LIMIT = "time_limit"
CANCEL = "cancel"
SUSPEND = "suspend"
RESULT = "result"
SIGNALS = "signals"
ATTACH = "attach"  # sattach's sockets: "HOST PORT KEY" a line
#: In ``signals``, not a signal: ``scancel JOB.STEP`` (a cancel, no ``-s``). The runner
#: says slurmstepd's CANCELLED line and srun's "Job step aborted" before the KILL,
#: where ``scancel -s KILL JOB.STEP`` is srun's "Force Terminated" after it.
CANCEL_STEP = -1
#: In ``cancel``, after KillWait: the job's time limit is why (slurmstepd's line says so).
TIME_LIMIT_REACHED = "time_limit"
#: The run's directory of the job user's own, and the file in it a job touches when it
#: has saved its state (its path is the job's CORRAL_CHECKPOINT_FILE).
CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_FILE = "saved"
#: In the same directory: the job's allocation as it last changed (CORRAL_RESIZE_FILE).
RESIZE_FILE = "resize"
#: The most of a resize file read back to compare (a job's is a few hundred bytes).
_RESIZE_MAX = 64 << 10

#: Raw wait status of a launch failure: exit code 1, as Slurm records it.
LAUNCH_FAILED_STATUS = 1 << 8
#: Raw wait status of a batch job whose output or error file could not be opened (its
#: directory missing, say): Slurm 22.05 records ExitCode=0:53 for it.
OUTPUT_FAILED_STATUS = 53

_JOB_DIR = re.compile(r"^job(\d+)\.(\d+)$")
_STEP_DIR = re.compile(r"^step(\d+)\.(\d+)$")
#: A step task's status in a StepResult when it never started.
NOT_STARTED = -1


@dataclass(frozen=True)
class SiteHooks:
    """The node's site programs a run needs (slurm.conf's Prolog, Epilog, TaskProlog,
    TaskEpilog; ``timeout`` PrologEpilogTimeout, 0 for none; ``lock`` the file whose
    lock makes Prolog and Epilog run one at a time on this host, for
    ``PrologFlags=Serial``, else ""). Copied from corral.config's HookConfig by the
    agent: the supervisor does not load the configuration model."""

    prolog: str = ""
    epilog: str = ""
    task_prolog: str = ""
    task_epilog: str = ""
    timeout: int = 0
    lock: str = ""


@dataclass(frozen=True)
class LaunchSpec:
    """What the supervisor needs to run one batch job (LaunchJob + node facts).

    ``hostname`` and ``slurm_conf`` are what only the node knows: the value
    of HOSTNAME and SLURM_CONF in the job's environment. ``cgroup`` and
    ``deny_devices`` ((kind, major, minor) lists) are the device isolation of
    :mod:`nodeagent.devcgroup`: empty when there is none. ``gpus`` are the GPUs
    the launch's grant gives (whole or shared), by which a confined script's
    binding variables are renumbered; ``mps_gpu`` the GPU whose MPS server it
    holds, which a restarted agent counts it a holder of. Both come from the
    grant, so that no one reads them back from the environment.
    """

    job_id: int
    restarts: int
    node: str
    uid: int
    gid: int
    user: str
    argv: tuple[str, ...] = ()
    work_dir: str = "/tmp"
    std_out: str = ""
    std_err: str = ""
    std_in: str = ""
    append: bool = False
    environment: dict[str, str] = field(default_factory=dict)
    time_limit: int = -1
    start_time: int = 0
    kill_wait: int = 30
    array_job_id: int = 0
    array_task_id: int | None = None
    job_name: str = ""
    signal_num: int = 0
    signal_time: int = 0
    signal_batch_only: bool = False
    hostname: str = ""
    slurm_conf: str = ""
    cgroup: str = ""
    deny_devices: list[list[int]] = field(default_factory=list)
    cpu_ids: list[int] = field(default_factory=list)  # the CPUs to pin it to; []: none
    gpus: list[int] = field(default_factory=list)
    mps_gpu: int | None = None
    # Why the script must not run here (its GPU fence cannot be set up on this
    # host): the supervisor only fails the launch and tells the user.
    refused: str = ""
    # The run's cgroups and limits (nodeagent.cgroups.describe); {}: not contained.
    containment: dict[str, Any] = field(default_factory=dict)
    hooks: SiteHooks = field(default_factory=SiteHooks)  # slurm.conf's, this node's
    # The OCI container it runs in (nodeagent.oci.describe); {}: none.
    container: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LaunchSpec:
        data: dict[str, Any] = json.loads(text)
        data["argv"] = tuple(data.get("argv", ()))
        data["hooks"] = SiteHooks(**data.get("hooks", {}))
        return cls(**data)


@dataclass(frozen=True)
class Started:
    """The batch script is running: its pid (= process group) and start time."""

    pid: int
    start_time: int
    # Each task's (pid, SLURM_LOCALID, SLURM_PROCID): scontrol listpids names them.
    tasks: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class Result:
    """How a job ended; ``exit_status`` is the raw wait status (exit<<8 | signal)."""

    exit_status: int
    outcome: str
    end_time: int
    message: str = ""
    # What the batch script used (wait4's rusage: it and the children it waited for).
    max_rss_kb: int = 0
    user_cpu_us: int = 0
    sys_cpu_us: int = 0
    drain: str = ""  # the node's drain reason when a Prolog or Epilog failed here


@dataclass(frozen=True)
class StepSpec:
    """What a step runner needs to run one node's part of a job step (LaunchStep).

    ``tasks`` are the global task ids run here (SLURM_PROCID), ``node_id``
    this node's index in the step; ``io_key`` is srun's key in hex;
    ``cgroup``, ``deny_devices`` and ``gpus`` as in :class:`LaunchSpec`.
    """

    job_id: int
    step_id: int
    node: str
    uid: int
    gid: int
    user: str
    node_id: int = 0
    tasks: tuple[int, ...] = ()
    argv: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    cwd: str = "/tmp"
    io_host: str = ""
    io_port: int = 0
    io_key: str = ""
    std_out: str = ""
    std_err: str = ""
    std_in: str = ""
    append: bool = False
    cpus: int = 0
    time_limit: int = -1
    start_time: int = 0
    kill_wait: int = 30
    job_name: str = ""
    array_job_id: int = 0
    array_task_id: int | None = None
    ntasks: int = 0
    cgroup: str = ""
    deny_devices: list[list[int]] = field(default_factory=list)
    cpu_ids: list[int] = field(default_factory=list)  # the CPUs to pin its tasks to; []: none
    gpus: list[int] = field(default_factory=list)
    # Per local task, its own GPU binding variables (--gpu-bind); []: none.
    task_env: list[dict[str, str]] = field(default_factory=list)
    # Per local task, its command line (srun --multi-prog); []: ``argv`` for each.
    task_argv: list[list[str]] = field(default_factory=list)
    # Per local task, its own CPUs (srun --cpu-bind); []: ``cpu_ids`` for each.
    task_cpus: list[list[int]] = field(default_factory=list)
    cpu_verbose: bool = False  # --cpu-bind=verbose: each task reports its mask on stderr
    cpu_kind: str = ""  # the binding type task_cpus came from (cores, map_cpu, ...)
    unbuffered: bool = False  # srun -u: each task's stdout on a pseudo-terminal
    pty: bool = False  # srun --pty: task 0 on a terminal of its own, the others' I/O /dev/null
    mpi: str = ""  # srun --mpi: "pmi2" serves PMI to the tasks (nodeagent/pmi.py)
    node_tasks: list[int] = field(default_factory=list)  # tasks on each of the step's nodes
    # Why the tasks must not run here (their GPU fence cannot be set up on this
    # host): the runner only tells srun, so that srun fails at once.
    refused: str = ""
    # The run's cgroups and limits (nodeagent.cgroups.describe); {}: not contained.
    containment: dict[str, Any] = field(default_factory=dict)
    hooks: SiteHooks = field(default_factory=SiteHooks)  # slurm.conf's, this node's
    # The OCI container its tasks run in (nodeagent.oci.describe); {}: none.
    container: dict[str, Any] = field(default_factory=dict)
    bcast: bool = False  # srun --bcast: the tasks start once srun says GO (the copy is there)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StepSpec:
        data: dict[str, Any] = json.loads(text)
        data["argv"] = tuple(data.get("argv", ()))
        data["tasks"] = tuple(data.get("tasks", ()))
        data["hooks"] = SiteHooks(**data.get("hooks", {}))
        return cls(**data)


@dataclass(frozen=True)
class StepResult:
    """How one node's part of a step ended: a wait status per task, in ``tasks`` order.

    A status of -1 (:data:`NOT_STARTED`) is a task that never ran. The use
    figures are the largest task's max RSS, the sum of every task's (for
    AveRSS) and the tasks' summed CPU times.
    """

    statuses: tuple[int, ...]
    start_time: int
    end_time: int
    max_rss_kb: int = 0
    user_cpu_us: int = 0
    sys_cpu_us: int = 0
    message: str = ""
    sum_rss_kb: int = 0
    oom_kills: int = 0  # its processes the OOM killer killed
    left_behind: int = 0  # processes of its cgroup the final SIGKILL could not end

    @classmethod
    def from_json(cls, text: str) -> StepResult:
        data: dict[str, Any] = json.loads(text)
        data["statuses"] = tuple(data.get("statuses", ()))
        return cls(**data)


class Phase(Enum):
    """What a scan finds in a job directory."""

    LAUNCHING = "launching"  # supervisor alive, script not started yet
    RUNNING = "running"  # supervisor alive, script started
    DONE = "done"  # result written, waiting for the controller's AckDone
    LOST = "lost"  # no supervisor and no result


#: The tasks' OCI bundles in a run's directory (nodeagent/oci.py writes them).
OCI_DIR = "oci"


def _write_atomic(path: str, text: str, *, sync: bool = False, mode: int = 0o644) -> None:
    """Replace ``path`` so readers see either the old or the new content; ``sync``: and
    so that a crash keeps the new content under its name (data, then the directory)."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, text.encode())
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if sync:
        replace_durably(tmp, path)
    else:
        os.rename(tmp, path)


def _read_text(path: str) -> str | None:
    try:
        with open(path) as src:
            return src.read()
    except FileNotFoundError:
        return None


class RunDir:
    """A directory one detached process works in: a job's or a step's.

    Every method is a small, self-contained file access. The process (the
    supervisor or step runner) holds ``lock`` for its whole life and writes
    ``supervisor.pid``, ``started`` and finally ``result``; the agent creates
    the directory, writes the launch description and asks for a terminate
    through ``cancel``.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    # -- agent side ---------------------------------------------------------

    def create(self) -> None:
        """Make the directory (mode 0711: the job user may traverse, not list)."""
        os.mkdir(self.path, 0o711)
        os.chmod(self.path, 0o711)

    def request_cancel(self, kill_wait: int, time_limit: bool = False) -> None:
        """Ask for the run's end (``time_limit``: its job's limit was reached)."""
        word = f" {TIME_LIMIT_REACHED}" if time_limit else ""
        _write_atomic(self.file(CANCEL), f"{kill_wait}{word}\n")

    def request_suspend(self, suspended: bool, suspended_secs: int, grace: int) -> None:
        """Ask the run to stop its processes (``suspended``: SIGTSTP now, stopped
        ``grace`` seconds later) or let them continue, the job having been suspended
        ``suspended_secs`` in all."""
        word = "stop" if suspended else "cont"
        _write_atomic(self.file(SUSPEND), f"{word} {suspended_secs} {grace}\n")

    def create_checkpoint(self, uid: int, gid: int) -> str:
        """Make the run's checkpoint directory, the job user's own (mode 0700), and in it
        the file the job touches, the user's too, dated 1970: never touched, so that a
        restarted agent, which remembers nothing, takes no untouched file for a
        checkpoint. The directory is given to the user last, once the file is in it.
        Returns the file's path."""
        directory = self.file(CHECKPOINT_DIR)
        os.mkdir(directory, 0o700)
        path = os.path.join(directory, CHECKPOINT_FILE)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.utime(fd, ns=(0, 0))
            if os.geteuid() == 0:
                os.fchown(fd, uid, gid)
        finally:
            os.close(fd)
        if os.geteuid() == 0:
            os.chown(directory, uid, gid, follow_symlinks=False)
        return path

    def checkpoint_file(self) -> str:
        """The path of the file the run's job touches when it has saved its state."""
        return os.path.join(self.path, CHECKPOINT_DIR, CHECKPOINT_FILE)

    def resize_file(self) -> str:
        """The path of the file that says the run's job's allocation as it last changed."""
        return os.path.join(self.path, CHECKPOINT_DIR, RESIZE_FILE)

    def write_resize(self, text: str) -> bool:
        """Put ``text`` in the run's resize file, unless it says that already; True when
        written. The directory is the job user's: the file is made under a name of
        the agent's own with O_EXCL and O_NOFOLLOW (no link the user planted is
        followed) and renamed over the old one, which replaces whatever the user put
        there under that name rather than writing through it; the reader sees the
        old file or the new one, never half of one."""
        data = text.encode()
        folder = os.open(self.file(CHECKPOINT_DIR), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if _regular_contents(RESIZE_FILE, folder) == data:
                return False
            temporary = f".{RESIZE_FILE}.{os.getpid()}.{time.monotonic_ns()}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            fd = os.open(temporary, flags, 0o644, dir_fd=folder)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.rename(temporary, RESIZE_FILE, src_dir_fd=folder, dst_dir_fd=folder)
            return True
        finally:
            os.close(folder)

    def delete(self) -> None:
        """Remove the directory: the job user's checkpoint directory and the tasks' OCI
        bundles (nodeagent/oci.py), whatever is in them (shutil.rmtree does not follow
        the symbolic links a user may have planted there), then the run's own files,
        which are flat."""
        import shutil  # here: the supervisor, which imports this module, never deletes

        shutil.rmtree(self.file(CHECKPOINT_DIR), ignore_errors=True)
        shutil.rmtree(self.file(OCI_DIR), ignore_errors=True)
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.file(name))
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(self.path)

    # -- supervisor / step runner side --------------------------------------

    def hold_lock(self, lock_fd: int | None = None) -> int:
        """Hold the lock for life (the agent may hand it over already locked).

        Raises BlockingIOError when another process holds it.
        """
        fd = lock_fd if lock_fd is not None else os.open(self.file(LOCK), os.O_RDWR | os.O_CREAT)
        os.set_inheritable(fd, False)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd

    def claim(self, lock_fd: int | None, notify_fd: int | None) -> bool:
        """Become this directory's process: the notify pipe kept from the tasks, the
        lock held, the pid written; False when another process holds the lock."""
        if notify_fd is not None:
            os.set_inheritable(notify_fd, False)
        try:
            self.hold_lock(lock_fd)
        except BlockingIOError:
            return False
        self.write_supervisor_pid(os.getpid())
        return True

    def write_supervisor_pid(self, pid: int) -> None:
        _write_atomic(self.file(SUPERVISOR_PID), f"{pid}\n")

    def write_started(self, started: Started) -> None:
        _write_atomic(self.file(STARTED), json.dumps(dataclasses.asdict(started)))

    def _write_result(self, fields: dict[str, Any]) -> None:
        """Durably record the outcome; the rename makes it appear all at once."""
        _write_atomic(self.file(RESULT), json.dumps(fields), sync=True)

    # -- readers ------------------------------------------------------------

    def read_supervisor_pid(self) -> int | None:
        text = _read_text(self.file(SUPERVISOR_PID))
        return int(text) if text else None

    def read_started(self) -> Started | None:
        text = _read_text(self.file(STARTED))
        if text is None:
            return None
        fields = json.loads(text)
        fields["tasks"] = tuple(tuple(task) for task in fields.get("tasks", ()))
        return Started(**fields)

    def read_suspend(self) -> tuple[bool, int, int] | None:
        """(whether the run is to be suspended, the job's seconds suspended in all, the
        seconds from SIGTSTP to the stop) as last asked, or None when it never was."""
        words = (_read_text(self.file(SUSPEND)) or "").split()
        if not words:
            return None
        numbers = [int(word) for word in words[1:3]] + [0, 0]
        return words[0] == "stop", numbers[0], numbers[1]

    def read_cancel(self) -> int | None:
        """KillWait of a pending terminate request, or None when there is none."""
        text = _read_text(self.file(CANCEL))
        return int(text.split()[0]) if text else None

    def cancel_at_time_limit(self) -> bool:
        """Whether the pending terminate request is for the job's time limit."""
        return TIME_LIMIT_REACHED in (_read_text(self.file(CANCEL)) or "").split()[1:]

    def supervisor_alive(self) -> bool:
        """True while a supervisor (or step runner) holds this directory's lock.

        A lock, unlike a pid, cannot outlive its holder or be inherited by an
        unrelated process that reused the pid.
        """
        try:
            fd = os.open(self.file(LOCK), os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def phase(self) -> Phase:
        if os.path.exists(self.file(RESULT)):
            return Phase.DONE
        if self.supervisor_alive():
            started = os.path.exists(self.file(STARTED))
            return Phase.RUNNING if started else Phase.LAUNCHING
        # The supervisor may have written its result between the two checks.
        return Phase.DONE if os.path.exists(self.file(RESULT)) else Phase.LOST

    def _kill_orphans(self) -> Started | None:
        """SIGKILL what is left of the started process group; what ``started`` says."""
        started = self.read_started()
        if started is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(started.pid, signal.SIGKILL)
        return started


class JobDir(RunDir):
    """One job directory (``job<id>.<restarts>``)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        name = os.path.basename(path)
        match = _JOB_DIR.match(name)
        if match is None:
            raise ValueError(f"not a job directory name: {name}")
        self.job_id = int(match.group(1))
        self.restarts = int(match.group(2))

    def write_launch(self, spec: LaunchSpec) -> None:
        _write_atomic(self.file(LAUNCH), spec.to_json(), mode=0o600)

    def write_script(self, text: str, uid: int, gid: int) -> None:
        """Write the script executable by its owner only, owned by the job user."""
        path = self.file(SCRIPT)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
        try:
            os.write(fd, text.encode())
            if os.geteuid() == 0:
                os.fchown(fd, uid, gid)
        finally:
            os.close(fd)

    def request_time_limit(self, minutes: int) -> None:
        _write_atomic(self.file(TIME_LIMIT), f"{minutes}\n")

    def write_result(self, result: Result) -> None:
        """Durably record the outcome; the rename makes it appear all at once."""
        self._write_result(dataclasses.asdict(result))

    def read_launch(self) -> LaunchSpec | None:
        text = _read_text(self.file(LAUNCH))
        return None if text is None else LaunchSpec.from_json(text)

    def read_result(self) -> Result | None:
        text = _read_text(self.file(RESULT))
        return None if text is None else Result(**json.loads(text))

    def read_time_limit(self) -> int | None:
        text = _read_text(self.file(TIME_LIMIT))
        return int(text) if text else None

    def settle_lost(self) -> Result:
        """Record the end of a job whose supervisor died without a result.

        If the script never started, the launch failed: ``launch_failed``
        lets the controller requeue or fail the job as for any launch error.
        If it did start, nothing on the node can tell how it ended; whatever
        is left of its process group is killed and the job is reported as
        killed by SIGKILL (outcome ``exited``, raw status 9), so the
        controller records it FAILED with a node-failure message rather than
        as a launch that never happened.
        """
        started = self._kill_orphans()
        now = int(time.time())
        if started is None:
            result = Result(
                exit_status=LAUNCH_FAILED_STATUS,
                outcome="launch_failed",
                end_time=now,
                message="node failure: job supervisor died before the job started",
            )
        else:
            result = Result(
                exit_status=signal.SIGKILL,
                outcome="exited",
                end_time=now,
                message="node failure: job supervisor died, job killed",
            )
        self.write_result(result)
        return result


class StepDir(RunDir):
    """One step directory (``step<job id>.<step id>``) on one node."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        name = os.path.basename(path)
        match = _STEP_DIR.match(name)
        if match is None:
            raise ValueError(f"not a step directory name: {name}")
        self.job_id = int(match.group(1))
        self.step_id = int(match.group(2))

    def write_spec(self, spec: StepSpec) -> None:
        _write_atomic(self.file(LAUNCH), spec.to_json(), mode=0o600)

    def read_spec(self) -> StepSpec | None:
        text = _read_text(self.file(LAUNCH))
        return None if text is None else StepSpec.from_json(text)

    def write_result(self, result: StepResult) -> None:
        """Record the outcome (not fsync'ed: a step's result is reported at once and,
        unlike a job's, does not outlive the agent; srun waits on this write)."""
        _write_atomic(self.file(RESULT), json.dumps(dataclasses.asdict(result)))

    def read_result(self) -> StepResult | None:
        text = _read_text(self.file(RESULT))
        return None if text is None else StepResult.from_json(text)

    def request_signal(self, signum: int) -> None:
        """Ask for ``signum`` to be sent to the tasks (one small append: never torn)."""
        fd = os.open(self.file(SIGNALS), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{signum}\n".encode())
        finally:
            os.close(fd)

    def request_attach(self, host: str, port: int, key_hex: str) -> None:
        """Ask the runner to connect to sattach's socket too (one small append)."""
        fd = os.open(self.file(ATTACH), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{host} {port} {key_hex}\n".encode())
        finally:
            os.close(fd)

    def read_attaches(self, offset: int) -> tuple[list[tuple[str, int, str]], int]:
        """The sattach sockets requested past ``offset`` in ``attach``, and the offset
        after them."""
        complete = self._appended(ATTACH, offset)
        found = []
        for line in complete.decode(errors="replace").splitlines():
            host, port, key = line.split()
            found.append((host, int(port), key))
        return found, offset + len(complete)

    def read_signals(self, offset: int) -> tuple[list[int], int]:
        """The signals requested past ``offset`` in ``signals``, and the offset after them."""
        complete = self._appended(SIGNALS, offset)
        return [int(line) for line in complete.split()], offset + len(complete)

    def _appended(self, name: str, offset: int) -> bytes:
        """The whole lines appended to file ``name`` past ``offset`` (none if it is not there)."""
        try:
            with open(self.file(name), "rb") as src:
                src.seek(offset)
                data = src.read()
        except FileNotFoundError:
            return b""
        return data[: data.rfind(b"\n") + 1]

    def settle_lost(self, ntasks: int) -> StepResult:
        """Record the end of a step whose runner died without a result.

        Tasks that had started are reported killed (status SIGKILL) once what
        is left of their process group is; otherwise none started (-1).
        """
        started = self._kill_orphans()
        now = int(time.time())
        if started is None:
            status, message = NOT_STARTED, "node failure: step runner died before the tasks started"
        else:
            status, message = signal.SIGKILL, "node failure: step runner died, tasks killed"
        result = StepResult(
            statuses=(status,) * ntasks,
            start_time=started.start_time if started else 0,
            end_time=now,
            message=message,
        )
        self.write_result(result)
        return result


def is_step_dir(path: str) -> bool:
    """Whether ``path`` names a step directory (rather than a job directory)."""
    return _STEP_DIR.match(os.path.basename(path)) is not None


class Spool:
    """The spool directories of the nodes this agent serves."""

    def __init__(self, pattern: str, hostname: str) -> None:
        self.pattern = pattern
        self.hostname = hostname

    def root(self) -> str:
        """The directory every node's job directories lie under (what the zygote serves)."""
        path = self.pattern.replace("%h", self.hostname)
        if "%n" in path:
            return os.path.dirname(path.split("%n", 1)[0])
        return path

    def node_dir(self, node: str) -> str:
        path = self.pattern.replace("%h", self.hostname)
        if "%n" in path:
            return path.replace("%n", node)
        return os.path.join(path, node)

    def prepare(self, node: str) -> None:
        """Create the node's spool directory (and parents) if missing."""
        path = self.node_dir(node)
        os.makedirs(path, 0o755, exist_ok=True)

    def job_dir(self, node: str, job_id: int, restarts: int) -> JobDir:
        return JobDir(os.path.join(self.node_dir(node), f"job{job_id}.{restarts}"))

    def step_dir(self, node: str, job_id: int, step_id: int) -> StepDir:
        return StepDir(os.path.join(self.node_dir(node), f"step{job_id}.{step_id}"))

    def steps(self, node: str) -> list[StepDir]:
        """Every step directory of ``node``."""
        try:
            names = os.listdir(self.node_dir(node))
        except FileNotFoundError:
            return []
        found = [
            StepDir(os.path.join(self.node_dir(node), name))
            for name in names
            if _STEP_DIR.match(name)
        ]
        return sorted(found, key=lambda sd: (sd.job_id, sd.step_id))

    def jobs(self, node: str) -> list[JobDir]:
        """Every job directory of ``node``, oldest job first."""
        try:
            names = os.listdir(self.node_dir(node))
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
            return []
        found = [
            JobDir(os.path.join(self.node_dir(node), name))
            for name in names
            if _JOB_DIR.match(name)
        ]
        return sorted(found, key=lambda jd: (jd.job_id, jd.restarts))


def _regular_contents(name: str, folder: int) -> bytes | None:
    """The contents of regular file ``name`` in directory ``folder`` (up to a bound),
    or None: absent, or not a regular file (a link, a FIFO the user made there)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    try:
        import stat  # here: only the agent reads a resize file back

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _RESIZE_MAX)
    finally:
        os.close(fd)
