"""Tasks started from C (nodeagent/taskspawn.py, csrc/spawn.c), in this process.

Each case starts one task with :class:`TaskStart` and checks what the task
finds (ids, environment, CPUs, signals, session) or what it says when it cannot
start: the lines and statuses the Python child (``StepRun._exec_task``) gives.
The step runner's own tests (test_steprunner*.py) run every step through it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from nodeagent import taskspawn
from nodeagent.spool import SiteHooks, StepSpec

ROOT = Path(__file__).resolve().parents[2]
ME = pwd.getpwuid(os.getuid())


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    """corral._spawn, built in place first when missing."""
    if taskspawn.built():
        return
    build = subprocess.run(
        [sys.executable, str(ROOT / "csrc" / "spawn_build.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        pytest.fail(f"cannot build corral._spawn:\n{build.stdout}\n{build.stderr}", pytrace=False)
    importlib.reload(taskspawn)


def spec(**fields: object) -> StepSpec:
    base = StepSpec(
        job_id=7,
        step_id=0,
        node="n1",
        uid=ME.pw_uid,
        gid=ME.pw_gid,
        user=ME.pw_name,
        node_id=0,
        tasks=(0,),
        argv=("true",),
        environment={},
        cwd="/tmp",
        io_host="127.0.0.1",
        io_port=1,
        io_key="00",
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


@dataclasses.dataclass
class Ran:
    status: int
    out: str
    err: str


def run(
    argv: list[str],
    env: dict[str, str] | None = None,
    start: taskspawn.TaskStart | None = None,
    stdin: int | None = None,
    **options: object,
) -> Ran:
    """Start one task from C (stdin ``stdin``, else /dev/null), its output read
    through pipes; how it ended."""
    start = start or taskspawn.TaskStart(spec(), None, [], "", False)
    null = os.dup(stdin) if stdin is not None else os.open(os.devnull, os.O_RDONLY)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    kwargs: dict[str, object] = {
        "session": False,
        "pgid": 0,
        "cpus": [],
        "pmi_fd": -1,
        "note": "",
        **options,
    }
    task_env = start.environment({"PATH": "/usr/bin:/bin", **(env or {})}, {})
    assert task_env is not None
    try:
        pid = start.spawn(stdio=(null, out_w, err_w), argv=argv, env=task_env, **kwargs)  # type: ignore[arg-type]
    finally:
        for fd in (null, out_w, err_w):
            os.close(fd)
    with os.fdopen(out_r) as out, os.fdopen(err_r) as err:
        got_out, got_err = out.read(), err.read()
    _, status = os.waitpid(pid, 0)
    return Ran(status, got_out, got_err)


def test_the_task_runs_with_its_environment_and_its_own_pid() -> None:
    ran = run(["sh", "-c", 'echo "$X $SLURM_TASK_PID $$"'], {"X": "1", "SLURM_TASK_PID": "9"})
    x, task_pid, pid = ran.out.split()
    assert (ran.status, x) == (0, "1")
    assert task_pid == pid  # the child's pid, not the one the environment brought


def test_a_group_or_a_session_of_its_own() -> None:
    show = "ps -o pgid=,sid= -p $$; echo $$"
    grouped = run(["sh", "-c", show]).out.split()
    assert grouped[0] == grouped[2] != grouped[1]  # leads a group, not a session
    main, side = os.openpty()
    try:
        ran = run(["sh", "-c", f"{show}; ps -o tty= -p $$; tty"], stdin=side, session=True)
    finally:
        os.close(main)
        os.close(side)
    pgid, sid, pid, tty, name = ran.out.split()
    assert pgid == sid == pid  # leads a session, its terminal the controlling one
    assert name.endswith(tty)


def test_signals_are_a_fresh_processes() -> None:
    ran = run(["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"])
    fields = dict(line.split(":\t") for line in ran.out.splitlines())
    assert int(fields["SigBlk"], 16) == 0
    ignored = int(fields["SigIgn"], 16)
    for sig in (13, 25):  # SIGPIPE, SIGXFSZ: ignored in Python, default in the task
        assert not ignored & (1 << (sig - 1))


def test_cpus_pinned_to_those_present() -> None:
    present = sorted(os.sched_getaffinity(0))
    ran = run(["grep", "Cpus_allowed_list", "/proc/self/status"], cpus=[present[0], 99999])
    assert ran.out.split()[-1] == str(present[0])


def test_the_note_comes_first_on_stderr() -> None:
    ran = run(["sh", "-c", "echo task >&2"], note="slurmstepd: error: a note\n")
    assert ran.err == "slurmstepd: error: a note\ntask\n"


def test_a_missing_command_exits_2_with_slurms_message() -> None:
    ran = run(["no-such-command-x"])
    assert os.WEXITSTATUS(ran.status) == 2
    assert ran.err == (
        "slurmstepd: error: execve(): no-such-command-x: No such file or directory\n"
    )


def test_path_is_searched_as_execvpe_does(tmp_path: Path) -> None:
    """A file that cannot be run earlier on PATH is passed over for one that can; when
    none can, its error (not the later ENOENT) is the one reported."""
    first = tmp_path / "first"
    first.mkdir()
    (first / "tool").write_text("#!/bin/sh\necho first\n")
    second = tmp_path / "second"
    second.mkdir()
    (second / "tool").write_text("#!/bin/sh\necho second\n")
    (second / "tool").chmod(0o755)
    ran = run(["tool"], {"PATH": f"{first}:{second}"})
    assert (ran.status, ran.out) == (0, "second\n")
    ran = run(["tool"], {"PATH": f"{first}:{tmp_path / 'none'}"})
    assert os.WEXITSTATUS(ran.status) == 13
    assert ran.err == "slurmstepd: error: execve(): tool: Permission denied\n"


def test_a_cgroup_it_cannot_join_stops_it_as_pythons_child_says(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Before its stdio is set up, as in the Python child: on the runner's stderr."""
    procs = "/nonexistent-cgroup/cgroup.procs"
    start = taskspawn.TaskStart(spec(), None, [procs], "cannot join the job's cgroups: ", False)
    capfd.readouterr()
    ran = run(["true"], start=start)
    assert os.WEXITSTATUS(ran.status) == 1
    assert capfd.readouterr().err == (
        "slurmstepd: error: cannot join the job's cgroups: "
        f"[Errno 2] No such file or directory: '{procs}'\n"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_root_starts_it_as_the_user() -> None:
    nobody = pwd.getpwnam("nobody")
    user_spec = spec(uid=nobody.pw_uid, gid=nobody.pw_gid, user="nobody")
    start = taskspawn.TaskStart(user_spec, [nobody.pw_gid], [], "", False)
    ran = run(["sh", "-c", "id -u; id -g; id -G"], start=start)
    assert ran.out.split() == [str(nobody.pw_uid), str(nobody.pw_gid), str(nobody.pw_gid)]


def test_the_python_child_where_c_cannot_do_the_same() -> None:
    assert taskspawn.applies(spec())
    assert not taskspawn.applies(spec(container="/images/x"))
    assert not taskspawn.applies(spec(cpu_verbose=True))
    assert not taskspawn.applies(spec(hooks=SiteHooks(task_prolog="/bin/true")))
    start = taskspawn.TaskStart(spec(), None, [], "", False)
    assert start.fits(["true"], [0])
    assert not start.fits([], [])
    assert not start.fits([""], [])
    assert not start.fits(["a\0b"], [])
    assert start.environment({"A=B": "1"}, {}) is None
    assert start.environment({"A": "\0"}, {}) is None


def test_execvpe_candidates() -> None:
    assert taskspawn.candidates("./x", {"PATH": "/bin"}) == [b"./x"]
    assert taskspawn.candidates("x", {"PATH": "/a::/b"}) == [b"/a/x", b"x", b"/b/x"]
    assert taskspawn.candidates("x", {}) == [
        os.fsencode(os.path.join(d, "x")) for d in os.defpath.split(":")
    ]


def test_the_pmi_end_stays_open_across_exec() -> None:
    ours, theirs = os.pipe()  # both close-on-exec, as the runner's ends are
    try:
        ran = run(["sh", "-c", f"test -e /proc/self/fd/{theirs} && echo open"], pmi_fd=theirs)
        other = run(["sh", "-c", f"test -e /proc/self/fd/{theirs} || echo closed"])
    finally:
        os.close(ours)
        os.close(theirs)
    assert (ran.out, other.out) == ("open\n", "closed\n")


def test_a_confined_task_numbers_its_gpus_from_0() -> None:
    start = taskspawn.TaskStart(spec(gpus=[4, 6]), None, [], "", True)
    env = start.environment({"CUDA_VISIBLE_DEVICES": "4,6"}, {"SLURM_PROCID": "0"})
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_PROCID": "0"}
    free = taskspawn.TaskStart(spec(gpus=[4, 6]), None, [], "", False)
    assert free.environment({"CUDA_VISIBLE_DEVICES": "4,6"}, {}) == {"CUDA_VISIBLE_DEVICES": "4,6"}
