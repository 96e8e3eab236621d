"""Starting a step's task from C (csrc/spawn.c) instead of forking the step runner.

``os.fork`` of the runner and the interpreter's work in the child cost ~2.7 ms
of CPU per task here, three quarters of a 250-task node's start (a 1,000-task
``--multi-prog`` step took 1.2x Slurm's time). :func:`spawn` passes everything
the child does to ``spawn_task``, which starts it on a small stack sharing the
runner's memory (clone with CLONE_VM and CLONE_VFORK, as posix_spawn does) and
does there, with system calls only, what ``StepRun._exec_task`` does in Python:
process group or session, cgroups, CPUs, signals, oom_score_adj, stdio, the
controlling terminal, the user's ids, the note, SLURM_TASK_PID, exec along PATH,
and the same ``slurmstepd: error:`` line and status when one of them fails.

What is prepared here, in the runner, is what does not depend on the child's
pid: the environment (SLURM_PROCID, SLURM_LOCALID, the task's own variables,
PMI's, the GPU numbering of a confined task), the paths to try for argv[0] (as
``os.execvpe`` tries them), the CPUs present, the cgroup files to join.

The Python child stays where the C one cannot do the same (:func:`applies`):
a task in a container (oci.py builds its bundle and execs the runtime), a
TaskProlog (a program run per task whose output changes the environment),
``--cpu-bind=verbose`` (its report line), and a command or environment that
``os.execvpe`` refuses before any exec (empty, NUL bytes, a name with ``=``),
whose ValueError message is the Python child's. Where corral._spawn is not built
(a checkout that has not run csrc/spawn_build.py) every task takes that path.
"""

from __future__ import annotations

import os

from nodeagent import devcgroup

# Importing typing costs every step milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nodeagent.spool import StepSpec

try:
    from corral._spawn import ffi, lib
except ImportError:  # not built: the Python child starts every task
    ffi = lib = None

#: cpu_set_t's size in glibc: a CPU beyond it is pinned by the Python child.
CPU_SETSIZE = 1024


def built() -> bool:
    """Whether corral._spawn is there to use."""
    return lib is not None


def applies(spec: StepSpec) -> bool:
    """Whether this step's tasks can start from C (see the module)."""
    return built() and not spec.container and not spec.hooks.task_prolog and not spec.cpu_verbose


def candidates(program: str, env: dict[str, str]) -> list[bytes]:
    """The paths ``os.execvpe(program, ..., env)`` tries, in its order: ``program``
    itself when it names a directory, else each of env's PATH (os.defpath without
    one) joined with it."""
    if os.path.dirname(program):
        return [os.fsencode(program)]
    dirs = env.get("PATH", os.defpath).split(os.pathsep)
    return [os.fsencode(os.path.join(d, program)) for d in dirs]


def _valid(words: list[str]) -> bool:
    return all("\0" not in word for word in words)


def _strings(words: list[bytes], keep: list[Any], spare: int = 1) -> Any:
    """A NULL-ended ``char *[]`` of ``words`` (``spare`` NULL slots at its end); the
    cdata it points into goes to ``keep``, which must outlive its use."""
    cells = [ffi.new("char[]", word) for word in words]
    keep.extend(cells)
    array = ffi.new("char *[]", cells + [ffi.NULL] * spare)
    keep.append(array)
    return array


class TaskStart:
    """What every task of one step's C start shares: ids, cgroups, the CPUs present."""

    def __init__(
        self,
        spec: StepSpec,
        groups: list[int] | None,
        joins: list[str],
        join_error: str,
        confined: bool,
    ) -> None:
        self.spec = spec
        self.present = os.sched_getaffinity(0)
        self.confined = confined
        self.keep: list[Any] = []  # the cdata the pointers below point into
        self.joins = _strings([os.fsencode(path) for path in joins], self.keep)
        self.join_error = ffi.new("char[]", join_error.encode())
        self.groups = groups
        self.group_ids = ffi.new("uint32_t[]", groups or [])
        user_error = f"cannot become user {spec.user} (uid {spec.uid}, gid {spec.gid}): "
        self.user_error = ffi.new("char[]", user_error.encode())

    def environment(self, base: dict[str, str], extra: dict[str, str]) -> dict[str, str] | None:
        """One task's environment, SLURM_TASK_PID left for the child; None when
        os.execve would refuse it (the Python child then says why)."""
        env = {**base, **extra}
        env.pop("SLURM_TASK_PID", None)
        if self.confined:
            devcgroup.local_binding(env, set(self.spec.gpus))
        for key, value in env.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                return None
        return env

    def spawn(
        self,
        *,
        session: bool,
        pgid: int,
        cpus: list[int],
        stdio: tuple[int, int, int],
        pmi_fd: int,
        note: str,
        argv: list[str],
        env: dict[str, str],
    ) -> int:
        """Start one task (see the module); its pid. OSError when no child could be
        made; a failure in the child is its stderr line and exit status."""
        wanted = [cpu for cpu in cpus if cpu in self.present]
        keep: list[Any] = []  # this call's cdata, alive until it returns
        task = ffi.new("struct spawn_task *")
        task.session = int(session)
        task.pgid = pgid
        task.joins = self.joins
        task.join_error = self.join_error
        cpu_array = ffi.new("int32_t[]", wanted)
        task.cpus = cpu_array
        task.ncpus = len(wanted)
        task.stdio = list(stdio)
        task.pmi_fd = pmi_fd
        task.switch_user = int(self.groups is not None)
        task.uid = self.spec.uid
        task.gid = self.spec.gid
        task.groups = self.group_ids
        task.ngroups = len(self.groups or [])
        task.user_error = self.user_error
        note_cell = ffi.new("char[]", note.encode()) if note else ffi.NULL
        task.note = note_cell
        program = ffi.new("char[]", os.fsencode(argv[0]))
        task.program = program
        task.candidates = _strings(candidates(argv[0], env), keep)
        task.argv = _strings([os.fsencode(word) for word in argv], keep)
        words = [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()]
        task.envp = _strings(words, keep, spare=2)
        task.nenv = len(words)
        pid: int = lib.spawn_task(task)
        if pid < 0:
            raise OSError(-pid, os.strerror(-pid))
        return pid

    def fits(self, argv: list[str], cpus: list[int]) -> bool:
        """Whether this task's command and CPUs can go to C (see the module)."""
        return bool(argv) and bool(argv[0]) and _valid(argv) and max(cpus, default=0) < CPU_SETSIZE
