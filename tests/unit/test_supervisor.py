"""The per-job supervisor, run for real (spawned, or forked by the zygote) on temporary job dirs."""

from __future__ import annotations

import dataclasses
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeagent.process import LaunchInDoubt, Zygote, signal_supervisor, spawn_supervisor
from nodeagent.spool import LAUNCH_FAILED_STATUS, OUTPUT_FAILED_STATUS, JobDir, LaunchSpec, Result
from nodeagent.supervisor import WATCHED

WATCHED_MASK = sum(1 << (sig - 1) for sig in WATCHED)

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "CORRAL_TEST_LEAK": "agent-only"}
ME = pwd.getpwuid(os.getuid())


def make_spec(home: Path, **fields: object) -> LaunchSpec:
    base = LaunchSpec(
        job_id=42,
        restarts=0,
        node="n7",
        uid=ME.pw_uid,
        gid=ME.pw_gid,
        user=ME.pw_name,
        work_dir=str(home),
        job_name="demo",
        environment={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "42"},
        hostname="host7",
        slurm_conf="/etc/corral/slurm.conf",
        kill_wait=1,
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def prepare(spool: Path, spec: LaunchSpec, script: str) -> JobDir:
    jobdir = JobDir(str(spool / f"job{spec.job_id}.{spec.restarts}"))
    jobdir.create()
    jobdir.write_launch(spec)
    jobdir.write_script(script, spec.uid, spec.gid)
    return jobdir


def supervise(jobdir: JobDir, timeout: float = 10) -> Result:
    subprocess.run(
        [sys.executable, "-m", "nodeagent.supervisor", jobdir.path],
        env=ENV,
        check=True,
        timeout=timeout,
    )
    result = jobdir.read_result()
    assert result is not None
    return result


def run_job(tmp_path: Path, script: str, **fields: object) -> tuple[JobDir, Result]:
    spec = make_spec(tmp_path, **fields)
    jobdir = prepare(tmp_path, spec, "#!/bin/bash\n" + script)
    return jobdir, supervise(jobdir)


def test_exit_code_is_recorded_as_raw_status(tmp_path: Path) -> None:
    jobdir, result = run_job(tmp_path, "exit 3\n")
    assert result.exit_status == 3 << 8
    assert result.outcome == "exited"
    started = jobdir.read_started()
    assert started is not None and started.pid > 0


def test_signal_is_recorded_as_raw_status(tmp_path: Path) -> None:
    _, result = run_job(tmp_path, "kill -KILL $$\n")
    assert result.exit_status == signal.SIGKILL
    assert result.outcome == "exited"


def test_time_limit_sends_term_then_kill(tmp_path: Path) -> None:
    # A one-minute limit that started 58 s ago ends in 1-2 s: late enough for the
    # shell to have set its trap (59 s could leave only milliseconds).
    script = "trap 'echo got-term' TERM\nwhile true; do sleep 0.1; done\n"
    began = time.time()
    _, result = run_job(
        tmp_path, script, time_limit=1, start_time=int(time.time()) - 58, kill_wait=1
    )
    assert result.outcome == "timeout"
    assert result.exit_status == signal.SIGKILL
    assert time.time() - began < 6
    assert "got-term" in (tmp_path / "slurm-42.out").read_text()


def test_output_patterns_expand(tmp_path: Path) -> None:
    (tmp_path / "logs" / "demo").mkdir(parents=True)
    (tmp_path / "errs").mkdir()
    run_job(
        tmp_path,
        "echo out; echo err >&2\n",
        std_out="logs/%x/%j-%N.out",
        std_err=str(tmp_path / "errs" / "%u_%4j.err"),
    )
    assert (tmp_path / "logs" / "demo" / "42-n7.out").read_text() == "out\n"
    assert (tmp_path / "errs" / f"{ME.pw_name}_0042.err").read_text() == "err\n"


@pytest.mark.parametrize("which", ["std_out", "std_err"])
def test_an_output_file_in_a_missing_directory_fails_the_launch(tmp_path: Path, which: str) -> None:
    """Slurm 22.05 does not make the directory: the launch fails (ExitCode 0:53, the
    controller's JobLaunchFailure), the script never runs, no file is created."""
    jobdir, result = run_job(tmp_path, "touch ran\n", **{which: "missing/%j.out"})
    assert (result.outcome, result.exit_status) == ("launch_failed", 53)
    assert "cannot open output file missing/42.out: No such file or directory" in result.message
    assert jobdir.read_started() is None
    # Only the job's spool directory; with --error missing, stdout opened first (as Slurm).
    made = {p.name for p in tmp_path.iterdir()} - {os.path.basename(jobdir.path)}
    assert made == ({"slurm-42.out"} if which == "std_err" else set())


def test_stderr_joins_stdout_without_std_err(tmp_path: Path) -> None:
    run_job(tmp_path, "echo one; echo two >&2; echo three\n", std_out="both.out")
    assert (tmp_path / "both.out").read_text() == "one\ntwo\nthree\n"


@pytest.mark.parametrize(("append", "expected"), [(True, "old\nnew\n"), (False, "new\n")])
def test_append_or_truncate(tmp_path: Path, append: bool, expected: str) -> None:
    (tmp_path / "o.out").write_text("old\n")
    run_job(tmp_path, "echo new\n", std_out="o.out", append=append)
    assert (tmp_path / "o.out").read_text() == expected


def test_stdin_comes_from_std_in(tmp_path: Path) -> None:
    (tmp_path / "in-42.txt").write_text("fed\n")
    run_job(tmp_path, "cat\n", std_in="in-%j.txt", std_out="o.out")
    assert (tmp_path / "o.out").read_text() == "fed\n"


def test_environment_is_the_launch_environment_plus_node_facts(tmp_path: Path) -> None:
    run_job(tmp_path, 'env > env.txt; echo "$$" > pid.txt\n', argv=("a b", "c"))
    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines())
    pid = (tmp_path / "pid.txt").read_text().strip()
    assert env["SLURM_JOB_ID"] == "42"
    assert env["SLURMD_NODENAME"] == "n7"
    assert env["SLURM_TASK_PID"] == pid
    assert env["HOSTNAME"] == "host7"
    assert env["ENVIRONMENT"] == "BATCH"
    assert env["SLURM_CONF"] == "/etc/corral/slurm.conf"
    assert "CORRAL_TEST_LEAK" not in env


def test_script_arguments_are_passed(tmp_path: Path) -> None:
    run_job(tmp_path, 'printf "%s|" "$0" "$@" > args.txt\n', argv=("a b", "c"))
    shown = (tmp_path / "args.txt").read_text().split("|")
    assert shown[0].endswith("/job42.0/script")
    assert shown[1:3] == ["a b", "c"]


def test_missing_work_dir_falls_back_to_tmp(tmp_path: Path) -> None:
    out = tmp_path / "o.out"
    _, result = run_job(tmp_path, "pwd\n", work_dir=str(tmp_path / "gone"), std_out=str(out))
    assert result.outcome == "exited" and result.exit_status == 0
    text = out.read_text()
    assert "cannot enter working directory" in text
    assert text.endswith("/tmp\n")


def test_unopenable_output_is_a_launch_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    _, result = run_job(tmp_path, "echo never\n", std_out=str(blocker / "sub" / "o.out"))
    assert result.outcome == "launch_failed"
    assert result.exit_status == OUTPUT_FAILED_STATUS
    assert "cannot open output file" in result.message


def test_exec_failure_is_a_launch_failure(tmp_path: Path) -> None:
    spec = make_spec(tmp_path)
    jobdir = prepare(tmp_path, spec, "no interpreter line\n")
    result = supervise(jobdir)
    assert result.outcome == "launch_failed"
    assert result.exit_status == LAUNCH_FAILED_STATUS
    assert "cannot execute" in result.message
    assert jobdir.read_started() is None


def start_supervisor(jobdir: JobDir) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "nodeagent.supervisor", jobdir.path],
        env=ENV,
    )


def wait_for(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_cancel_marker_terminates_with_outcome_cancelled(tmp_path: Path) -> None:
    spec = make_spec(tmp_path)
    jobdir = prepare(tmp_path, spec, "#!/bin/bash\nsleep 30\n")
    proc = start_supervisor(jobdir)
    wait_for(lambda: jobdir.read_started() is not None)
    jobdir.request_cancel(1)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=5) == 0
    result = jobdir.read_result()
    assert result is not None
    assert result.outcome == "cancelled"
    assert result.exit_status == signal.SIGTERM


def test_new_time_limit_is_picked_up(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, time_limit=-1, start_time=int(time.time()) - 59)
    jobdir = prepare(tmp_path, spec, "#!/bin/bash\nsleep 30\n")
    proc = start_supervisor(jobdir)
    wait_for(lambda: jobdir.read_started() is not None)
    jobdir.request_time_limit(1)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=5) == 0
    result = jobdir.read_result()
    assert result is not None and result.outcome == "timeout"


def test_signal_option_for_the_batch_shell_is_delivered_before_the_limit(tmp_path: Path) -> None:
    """--signal=B:USR1@58; without B: the controller signals the steps instead."""
    script = "trap 'echo got-usr1; exit 0' USR1\nwhile true; do sleep 0.1; done\n"
    _, result = run_job(
        tmp_path,
        script,
        time_limit=2,
        start_time=int(time.time()) - 60,
        signal_num=signal.SIGUSR1,
        signal_time=58,
        signal_batch_only=True,
        std_out="o.out",
    )
    assert result.outcome == "exited" and result.exit_status == 0
    assert "got-usr1" in (tmp_path / "o.out").read_text()


def test_cancel_before_start_runs_nothing(tmp_path: Path) -> None:
    spec = make_spec(tmp_path)
    jobdir = prepare(tmp_path, spec, "#!/bin/bash\necho ran > ran.txt\n")
    jobdir.request_cancel(1)
    result = supervise(jobdir)
    assert result.outcome == "cancelled"
    assert not (tmp_path / "ran.txt").exists()


AGENT = """
import sys, time
from nodeagent.process import spawn_supervisor
from nodeagent.spool import JobDir
proc = spawn_supervisor(JobDir(sys.argv[1]))
print(proc.pid, flush=True)
time.sleep(60)
"""


def test_job_survives_the_death_of_its_agent(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, std_out="o.out")
    jobdir = prepare(tmp_path, spec, "#!/bin/bash\nsleep 0.5\necho finished\nexit 5\n")
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, jobdir.path], env=ENV, stdout=subprocess.PIPE
    )
    assert agent.stdout is not None
    supervisor_pid = int(agent.stdout.readline())
    wait_for(lambda: jobdir.read_started() is not None)
    assert jobdir.supervisor_alive()
    agent.kill()
    agent.wait()
    wait_for(lambda: jobdir.read_result() is not None)
    assert ended(jobdir) == (5 << 8, "exited", "")
    assert (tmp_path / "o.out").read_text() == "finished\n"
    assert jobdir.read_supervisor_pid() == supervisor_pid
    wait_for(lambda: not jobdir.supervisor_alive())


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="corral-supervisor-"))
    path.chmod(0o777)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_root_runs_the_job_as_its_user(public_dir: Path) -> None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    spool = public_dir / "spool"
    spool.mkdir(mode=0o755)
    spool.chmod(0o755)
    (public_dir / "out").mkdir()
    (public_dir / "out").chmod(0o777)
    spec = make_spec(
        public_dir,
        uid=nobody.pw_uid,
        gid=nobody.pw_gid,
        user="nobody",
        std_out="out/%u.out",
    )
    jobdir = prepare(spool, spec, "#!/bin/bash\nid -u; id -g\n")
    result = supervise(jobdir)
    assert result.outcome == "exited", result.message
    out = public_dir / "out" / "nobody.out"
    assert out.read_text().split() == [str(nobody.pw_uid), str(nobody.pw_gid)]
    assert out.stat().st_uid == nobody.pw_uid
    assert os.stat(jobdir.file("script")).st_uid == nobody.pw_uid


# ---------------------------------------------------------------- the zygote


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def zombie_children(*parents: int) -> list[int]:
    """Zombies whose parent is one of ``parents``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) in parents:
            found.append(int(entry))
    return found


def ended(jobdir: JobDir) -> tuple[int, str, str] | None:
    """How a job ended (status, outcome, message), once a script that ran reports its
    resource use too."""
    result = jobdir.read_result()
    if result is None:
        return None
    assert result.max_rss_kb > 0  # wait4's rusage of the script
    return result.exit_status, result.outcome, result.message


def started_zygote(spool: Path, **options: float) -> Zygote:
    zygote = Zygote(str(spool), env=ENV, **options)
    wait_for(zygote.available)
    return zygote


def process_state(pid: int, jobdir: JobDir, waits_for: int = 0) -> dict[str, object]:
    """What a supervisor starts with: session, signal state and descriptors.

    Once its loop catches the signals it waits for it unblocks them, so SigBlk
    lacks ``waits_for`` then and has them a moment before: they count as blocked
    either way."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.rstrip("\n").split(":\t", 1) for line in status)
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}").replace(jobdir.path, "JOBDIR")
        targets.append(target.split("[")[0] if target.startswith(("pipe:", "socket:")) else target)
    return {
        "session leader": os.getsid(pid) == pid,
        "blocked": int(fields["SigBlk"], 16) | waits_for,
        "ignored": int(fields["SigIgn"], 16),
        "caught": int(fields["SigCgt"], 16),
        "descriptors": sorted(targets),
    }


def test_zygote_child_starts_like_a_spawned_supervisor(tmp_path: Path) -> None:
    zygote = started_zygote(tmp_path)
    states = []
    try:
        zygote_state = process_state(zygote.pid or 0, JobDir(str(tmp_path / "job0.0")))
        for job_id, via in ((1, zygote), (2, None)):
            jobdir = prepare(tmp_path, make_spec(tmp_path, job_id=job_id), "#!/bin/sh\nsleep 30\n")
            proc = spawn_supervisor(jobdir, env=ENV, zygote=via)
            pid = proc.pid or 0
            assert parent_of(pid) == (zygote.pid if via else os.getpid())
            wait_for(lambda jobdir=jobdir: jobdir.read_started() is not None)
            # The supervisor has its watched signals blocked until it catches them; counted
            # as blocked either way, its mask reads the same before and after.
            states.append(process_state(pid, jobdir, waits_for=WATCHED_MASK))
            jobdir.request_cancel(1)
            signal_supervisor(pid)
            wait_for(lambda jobdir=jobdir: jobdir.read_result() is not None)
            os.close(proc.notify_fd)
            if via is None:
                os.waitpid(pid, 0)
    finally:
        zygote.close()
    forked, spawned = states
    # A spawned supervisor also inherits whatever its agent left inheritable. Besides
    # what it was given (the lock, the notify pipe, stdio), only the run loop's own:
    # its epoll and the pipe its signals wake it through (nodeagent.runner).
    assert forked.pop("descriptors") == [
        "/dev/null",
        "JOBDIR/lock",
        "JOBDIR/supervisor.log",
        "JOBDIR/supervisor.log",
        "anon_inode:[eventpoll]",
        "pipe:",
        "pipe:",
        "pipe:",
    ]
    spawned.pop("descriptors")
    assert forked == spawned
    # Each child starts with the zygote's mask and undoes its SIGCHLD disposition.
    assert zygote_state["blocked"] == WATCHED_MASK
    assert zygote_state["ignored"] & (1 << (signal.SIGCHLD - 1))
    assert forked["ignored"] == zygote_state["ignored"] & ~(1 << (signal.SIGCHLD - 1))


ZYGOTE_AGENT = """
import sys, time
from nodeagent.process import Zygote, spawn_supervisor
from nodeagent.spool import JobDir
zygote = Zygote(sys.argv[1])
while not zygote.available():
    time.sleep(0.01)
proc = spawn_supervisor(JobDir(sys.argv[2]), zygote=zygote)
print(proc.pid, zygote.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("first", ["zygote", "agent"])
def test_zygote_child_survives_its_agent_and_zygote(tmp_path: Path, first: str) -> None:
    spec = make_spec(tmp_path, std_out="o.out")
    jobdir = prepare(tmp_path, spec, "#!/bin/bash\nsleep 1\necho finished\nexit 5\n")
    agent = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE_AGENT, str(tmp_path), jobdir.path],
        env=ENV,
        stdout=subprocess.PIPE,
    )
    assert agent.stdout is not None
    supervisor_pid, zygote_pid = map(int, agent.stdout.readline().split())
    assert parent_of(supervisor_pid) == zygote_pid
    wait_for(lambda: jobdir.read_started() is not None)
    if first == "zygote":
        os.kill(zygote_pid, signal.SIGKILL)
        agent.kill()
    else:
        agent.kill()
        # The zygote notices that its agent is gone and exits by itself.
        wait_for(lambda: not os.path.exists(f"/proc/{zygote_pid}/fd/0"))
    agent.wait()
    wait_for(lambda: jobdir.read_result() is not None)
    assert ended(jobdir) == (5 << 8, "exited", "")
    assert (tmp_path / "o.out").read_text() == "finished\n"
    assert jobdir.read_supervisor_pid() == supervisor_pid
    wait_for(lambda: not jobdir.supervisor_alive())


def test_spawn_falls_back_while_the_zygote_is_gone(tmp_path: Path) -> None:
    zygote = started_zygote(tmp_path, restart_delay=0.2)
    try:
        dead = zygote.pid or 0
        os.kill(dead, signal.SIGKILL)
        wait_for(lambda: zombie_children(os.getpid()) == [dead])
        first = prepare(tmp_path, make_spec(tmp_path, job_id=1), "#!/bin/sh\nexit 3\n")
        proc = spawn_supervisor(first, env=ENV, zygote=zygote)
        assert parent_of(proc.pid or 0) == os.getpid()  # spawned, not forked
        assert zygote.pid is None and zombie_children(os.getpid()) == []
        wait_for(lambda: first.read_result() is not None)
        assert ended(first) == (3 << 8, "exited", "")
        os.waitpid(proc.pid or 0, 0)
        os.close(proc.notify_fd)

        wait_for(zygote.available)  # replaced once the restart delay has passed
        second = prepare(tmp_path, make_spec(tmp_path, job_id=2), "#!/bin/sh\nexit 4\n")
        proc = spawn_supervisor(second, env=ENV, zygote=zygote)
        assert parent_of(proc.pid or 0) == zygote.pid != dead
        wait_for(lambda: second.read_result() is not None)
        assert ended(second) == (4 << 8, "exited", "")
        os.close(proc.notify_fd)
    finally:
        zygote.close()


def test_a_hung_zygote_costs_a_timeout_not_the_job(tmp_path: Path) -> None:
    zygote = started_zygote(tmp_path, reply_timeout=0.3, restart_delay=60)
    try:
        hung = zygote.pid or 0
        os.kill(hung, signal.SIGSTOP)
        spec = make_spec(tmp_path, std_out="o.out")
        jobdir = prepare(tmp_path, spec, "#!/bin/sh\necho ran\n")
        proc = spawn_supervisor(jobdir, env=ENV, zygote=zygote)
        # Killed and reaped, it can no longer start anything: the agent spawned instead.
        assert zygote.pid is None and not os.path.exists(f"/proc/{hung}")
        assert parent_of(proc.pid or 0) == os.getpid()
        wait_for(lambda: jobdir.read_result() is not None)
        os.waitpid(proc.pid or 0, 0)
        os.close(proc.notify_fd)
        assert (tmp_path / "o.out").read_text() == "ran\n"
        assert not zygote.available()  # not before the restart delay
    finally:
        zygote.close()


class ForkedThenDied(Zygote):
    """A zygote that starts the supervisor, then dies before saying so."""

    def available(self) -> bool:
        return True

    def launch(self, path: str, lock_fd: int, notify_fd: int) -> int | None:
        os.set_inheritable(lock_fd, True)
        os.set_inheritable(notify_fd, True)
        argv = [sys.executable, "-m", "nodeagent.supervisor", path]
        argv += ["--lock-fd", str(lock_fd), "--notify-fd", str(notify_fd)]
        self.pid = subprocess.Popen(argv, env=ENV, close_fds=False).pid
        raise LaunchInDoubt(path)


def test_a_launch_in_doubt_is_not_run_twice(tmp_path: Path) -> None:
    spec = make_spec(tmp_path)
    jobdir = prepare(tmp_path, spec, f"#!/bin/sh\necho run >> {tmp_path}/runs\n")
    zygote = ForkedThenDied(str(tmp_path), env=ENV)
    proc = spawn_supervisor(jobdir, env=ENV, zygote=zygote)
    try:
        assert proc.pid in (None, zygote.pid)  # adopted, not spawned again
        os.set_blocking(proc.notify_fd, True)
        assert os.read(proc.notify_fd, 100) == b"started\n"  # its pipe, watched as usual
        wait_for(lambda: jobdir.read_result() is not None)
        assert (tmp_path / "runs").read_text() == "run\n"
    finally:
        os.waitpid(zygote.pid or 0, 0)
        os.close(proc.notify_fd)


def test_zygote_leaves_no_zombies_after_50_launches(tmp_path: Path) -> None:
    zygote = started_zygote(tmp_path)
    try:
        procs = []
        for job_id in range(50):
            jobdir = prepare(tmp_path, make_spec(tmp_path, job_id=job_id), "#!/bin/sh\ntrue\n")
            procs.append((jobdir, spawn_supervisor(jobdir, env=ENV, zygote=zygote)))
        for jobdir, proc in procs:
            wait_for(lambda jobdir=jobdir: jobdir.read_result() is not None)
            os.set_blocking(proc.notify_fd, True)
            while os.read(proc.notify_fd, 100):  # end-of-file: the supervisor has exited
                pass
            os.close(proc.notify_fd)
        assert all(ended(jobdir) == (0, "exited", "") for jobdir, _ in procs)
        assert zombie_children(zygote.pid or 0, os.getpid()) == []
        assert zygote.available()
    finally:
        zygote.close()
