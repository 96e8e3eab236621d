"""The step runner, run for real (forked by a zygote, or spawned) against a fake srun.

The fake srun is a TCP listener in the test speaking corral/stepio.py: it
accepts the runner's connection, checks its HELLO, sends IN and SIGNAL
frames and collects OUT, ERR, EXIT and DONE.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corral import stepcipher, stepio
from nodeagent.process import Zygote, signal_supervisor, spawn_step_runner
from nodeagent.spool import CANCEL_STEP, NOT_STARTED, Started, StepDir, StepResult, StepSpec
from nodeagent.steprunner import window

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ME = pwd.getpwuid(os.getuid())
WAIT = 5.0
REPORT = "echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2"


class Srun:
    """Plays srun's side of one node's I/O connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(WAIT)
        self.key = os.urandom(stepio.KEY_BYTES)
        self.conn: socket.socket | None = None
        self.reader = stepcipher.SrunEnd(self.key)
        self.hello: tuple[int, int] | None = None
        self.out: dict[int, bytes] = {}
        self.err: dict[int, bytes] = {}
        self.exits: dict[int, int] = {}
        self.done = False
        self.closed = False
        # ABORTED and FORCED frames: kind, number, and the stderr seen before each
        self.said: list[tuple[int, int, bytes]] = []

    @property
    def port(self) -> int:
        port: int = self.server.getsockname()[1]
        return port

    def accept(self) -> None:
        self.conn, _ = self.server.accept()
        self.conn.settimeout(WAIT)
        self.pump(lambda: self.hello is not None)

    def send(self, kind: int, number: int, payload: bytes = b"") -> None:
        assert self.conn is not None
        self.conn.sendall(self.reader.seal(stepio.frame(kind, number, payload)))

    def pump(self, until: Callable[[], bool], timeout: float = WAIT) -> None:
        """Take frames until ``until()`` holds (or the runner hangs up)."""
        assert self.conn is not None
        deadline = time.monotonic() + timeout
        while not until():
            if self.closed:
                raise AssertionError("the runner hung up first")
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.conn], [], [], left)[0]:
                raise AssertionError("srun waited in vain")
            frames = stepio.recv_frames(self.conn, self.reader)
            if frames is None:
                self.closed = True
                continue
            for kind, number, payload in frames:
                self._take(kind, number, payload)

    def _take(self, kind: int, number: int, payload: bytes) -> None:
        if kind == stepio.HELLO:
            self.hello = stepio.read_hello(payload)
        elif kind in (stepio.OUT, stepio.ERR):
            assert number not in self.exits, f"output of task {number} after its EXIT"
            got = self.out if kind == stepio.OUT else self.err
            got[number] = got.get(number, b"") + payload
        elif kind == stepio.EXIT:
            assert number not in self.exits
            self.exits[number] = stepio.read_status(payload)
        elif kind == stepio.DONE:
            self.done = True
        elif kind in (stepio.ABORTED, stepio.FORCED):
            self.said.append((kind, number, b"".join(self.err.values())))
        else:
            raise AssertionError(f"unexpected frame kind {kind}")

    def finish(self) -> None:
        """Everything up to DONE, then the runner's hang-up, then ours (as srun does)."""
        self.pump(lambda: self.done)
        self.pump(lambda: self.closed)
        assert self.conn is not None
        self.conn.close()
        self.conn = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.server.close()


class Runner:
    """A step runner started for a test, and how to wait for its result."""

    def __init__(self, stepdir: StepDir, pid: int | None, notify_fd: int, spawned: bool) -> None:
        self.stepdir = stepdir
        self.pid = pid
        self.notify_fd = notify_fd
        self.spawned = spawned

    def result(self, timeout: float = WAIT) -> StepResult:
        """The result, once the runner has exited (end-of-file on its notify pipe)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "the runner did not exit"
            if select.select([self.notify_fd], [], [], left)[0]:
                try:
                    if not os.read(self.notify_fd, 100):
                        break
                except BlockingIOError:
                    pass
        os.close(self.notify_fd)
        if self.spawned and self.pid:
            os.waitpid(self.pid, 0)
        result = self.stepdir.read_result()
        assert result is not None
        return result


@pytest.fixture(scope="module")
def spool() -> Iterator[Path]:
    """A spool another user can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="corral-steps-"))
    path.chmod(0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


@pytest.fixture(scope="module")
def zygote(spool: Path) -> Iterator[Zygote]:
    zygote = Zygote(str(spool), env=ENV)
    deadline = time.monotonic() + 10
    while not zygote.available():
        assert time.monotonic() < deadline, "zygote not ready"
        time.sleep(0.01)
    yield zygote
    zygote.close()


@pytest.fixture
def srun() -> Iterator[Srun]:
    fake = Srun()
    yield fake
    fake.close()


_ids = iter(range(1, 1_000_000))


def make_spec(srun: Srun, cwd: Path, **fields: object) -> StepSpec:
    port = fields.pop("io_port", None)
    base = StepSpec(
        job_id=42,
        step_id=next(_ids),
        node="n3",
        uid=ME.pw_uid,
        gid=ME.pw_gid,
        user=ME.pw_name,
        node_id=1,
        tasks=(2, 3),
        argv=("sh", "-c", REPORT),
        environment={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "42"},
        cwd=str(cwd),
        io_host="127.0.0.1",
        io_port=srun.port if port is None else port,
        io_key=srun.key.hex(),
        cpus=4,
        kill_wait=1,
        job_name="demo",
        ntasks=4,
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def start(spool: Path, zygote: Zygote | None, srun: Srun, cwd: Path, **fields: object) -> Runner:
    spec = make_spec(srun, cwd, **fields)
    stepdir = StepDir(str(spool / f"step{spec.job_id}.{spec.step_id}"))
    stepdir.create()
    stepdir.write_spec(spec)
    proc = spawn_step_runner(stepdir, env=ENV, zygote=zygote)
    return Runner(stepdir, proc.pid, proc.notify_fd, spawned=zygote is None)


def test_tasks_report_to_srun_with_their_ids(spool: Path, zygote: Zygote, srun: Srun) -> None:
    runner = start(spool, zygote, srun, spool)
    srun.accept()
    assert srun.hello == (1, 2)
    srun.finish()
    assert srun.out == {2: b"out 2\n", 3: b"out 3\n"}
    assert srun.err == {2: b"err 2\n", 3: b"err 3\n"}
    assert srun.exits == {2: 0, 3: 0}
    result = runner.result()
    assert result.statuses == (0, 0)
    assert result.message == ""
    assert result.max_rss_kb > 0
    assert result.end_time >= result.start_time > 0


def test_spawned_runner_without_zygote(spool: Path, srun: Srun) -> None:
    runner = start(spool, None, srun, spool, argv=("sh", "-c", "exit 3"), tasks=(0,))
    srun.accept()
    srun.finish()
    assert srun.exits == {0: 3 << 8}
    assert runner.result().statuses == (3 << 8,)


def test_task_environment(spool: Path, zygote: Zygote, srun: Srun) -> None:
    show = (
        'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_GTIDS $SLURM_CPUS_ON_NODE '
        '$SLURMD_NODENAME $SLURM_JOB_ID $((SLURM_TASK_PID == $$))"'
    )
    runner = start(spool, zygote, srun, spool, argv=("sh", "-c", show), tasks=(5, 9))
    srun.accept()
    srun.finish()
    assert srun.out == {5: b"5 0 1 5,9 4 n3 42 1\n", 9: b"9 1 1 5,9 4 n3 42 1\n"}
    assert runner.result().statuses == (0, 0)


def test_stdin_from_srun_goes_to_every_task(spool: Path, zygote: Zygote, srun: Srun) -> None:
    runner = start(spool, zygote, srun, spool, argv=("cat",), tasks=(0, 1))
    srun.accept()
    srun.send(stepio.IN, stepio.ALL_TASKS, b"hello ")
    srun.pump(lambda: srun.out.get(0) == srun.out.get(1) == b"hello ")  # as it arrives
    srun.send(stepio.IN, stepio.ALL_TASKS, b"world\n")
    srun.send(stepio.IN, stepio.ALL_TASKS, b"")  # end of file, for each task
    srun.finish()
    assert srun.out == {0: b"hello world\n", 1: b"hello world\n"}
    assert srun.exits == {0: 0, 1: 0}
    assert runner.result().statuses == (0, 0)


def test_input_for_one_task_reaches_it_alone(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """srun -i 1: task 1's stdin is srun's, the others read /dev/null; input for every
    task (a sattach without --input-filter) reaches none, as on 22.05."""
    runner = start(spool, zygote, srun, spool, argv=("cat",), tasks=(0, 1), std_in="1")
    srun.accept()
    srun.pump(lambda: 0 in srun.exits)  # task 0 reads /dev/null: done at once
    srun.send(stepio.IN, stepio.ALL_TASKS, b"lost\n")
    srun.send(stepio.IN, 1, b"mine\n")
    srun.send(stepio.IN, 0, b"not here\n")
    srun.send(stepio.IN, 1, b"")
    srun.finish()
    assert srun.out == {1: b"mine\n"}
    assert runner.result().statuses == (0, 0)


def test_one_task_at_its_own_pace(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """A task that closed its stdin does not keep the others from theirs."""
    script = 'if [ "$SLURM_PROCID" = 0 ]; then exec 0<&-; echo closed; else cat; fi'
    runner = start(spool, zygote, srun, spool, argv=("sh", "-c", script), tasks=(0, 1))
    srun.accept()
    srun.pump(lambda: 0 in srun.exits)
    big = b"x" * 300_000  # more than a pipe holds
    srun.send(stepio.IN, stepio.ALL_TASKS, big)
    srun.send(stepio.IN, stepio.ALL_TASKS, b"")
    srun.finish()
    assert srun.out == {0: b"closed\n", 1: big}
    assert runner.result().statuses == (0, 0)


def test_per_task_input_files_opened_on_the_node(
    spool: Path, zygote: Zygote, srun: Srun, tmp_path: Path
) -> None:
    tmp_path.chmod(0o755)
    for task in (2, 3):
        (tmp_path / f"in{task}").write_text(f"file {task}\n")
    runner = start(spool, zygote, srun, tmp_path, argv=("cat",), std_in="in%t")
    srun.accept()
    srun.finish()
    assert srun.out == {2: b"file 2\n", 3: b"file 3\n"}
    assert runner.result().statuses == (0, 0)


def test_a_file_srun_reads_comes_as_its_input(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """-i FILE without a per-task pattern: srun sends the bytes, every task gets them
    (the runner opens no such file: it need not exist on the node)."""
    runner = start(spool, zygote, srun, spool, argv=("cat",), std_in="not-on-this-node")
    srun.accept()
    srun.send(stepio.IN, stepio.ALL_TASKS, b"from srun\n")
    srun.send(stepio.IN, stepio.ALL_TASKS, b"")
    srun.finish()
    assert srun.out == {2: b"from srun\n", 3: b"from srun\n"}
    assert runner.result().statuses == (0, 0)


def test_input_none_is_dev_null(spool: Path, zygote: Zygote, srun: Srun) -> None:
    runner = start(spool, zygote, srun, spool, argv=("sh", "-c", "cat; echo end"), std_in="none")
    srun.accept()
    srun.finish()  # no end of input sent: /dev/null ends at once
    assert srun.out == {2: b"end\n", 3: b"end\n"}
    assert runner.result().statuses == (0, 0)


def test_missing_command_exits_2_with_slurms_message(
    spool: Path, zygote: Zygote, srun: Srun
) -> None:
    runner = start(spool, zygote, srun, spool, argv=("no-such-command-x", "a"))
    srun.accept()
    srun.finish()
    line = b"slurmstepd: error: execve(): no-such-command-x: No such file or directory\n"
    assert srun.err == {2: line, 3: line}
    assert srun.exits == {2: 2 << 8, 3: 2 << 8}
    assert runner.result().statuses == (2 << 8, 2 << 8)


def test_signal_frame_reaches_every_task(spool: Path, zygote: Zygote, srun: Srun) -> None:
    runner = start(spool, zygote, srun, spool, argv=("sleep", "60"))
    srun.accept()
    srun.send(stepio.SIGNAL, signal.SIGUSR1)
    srun.finish()
    assert srun.exits == {2: signal.SIGUSR1, 3: signal.SIGUSR1}
    assert runner.result().statuses == (signal.SIGUSR1, signal.SIGUSR1)


def test_srun_hanging_up_ends_the_tasks(spool: Path, zygote: Zygote, srun: Srun) -> None:
    runner = start(spool, zygote, srun, spool, argv=("sleep", "60"))
    srun.accept()
    began = time.monotonic()
    assert srun.conn is not None
    srun.conn.close()
    srun.conn = None
    assert runner.result().statuses == (signal.SIGTERM, signal.SIGTERM)
    assert time.monotonic() - began < 2


def test_time_limit_zero_ends_the_tasks(spool: Path, zygote: Zygote, srun: Srun) -> None:
    began = time.monotonic()
    runner = start(spool, zygote, srun, spool, argv=("sleep", "60"), time_limit=0)
    srun.accept()
    srun.finish()
    assert srun.exits == {2: signal.SIGTERM, 3: signal.SIGTERM}
    assert b"CANCELLED AT" in srun.err[2] and b"DUE TO TIME LIMIT" in srun.err[2]
    assert runner.result().statuses == (signal.SIGTERM, signal.SIGTERM)
    assert time.monotonic() - began < 2


def test_kill_follows_term_after_kill_wait(spool: Path, zygote: Zygote, srun: Srun) -> None:
    stubborn = "trap '' TERM; echo ready; while :; do sleep 0.1; done"
    runner = start(spool, zygote, srun, spool, argv=("sh", "-c", stubborn), tasks=(0,))
    srun.accept()
    srun.pump(lambda: srun.out.get(0) == b"ready\n")
    began = time.monotonic()
    runner.stepdir.request_cancel(1)  # what the agent does for a terminate
    assert runner.pid is not None
    signal_supervisor(runner.pid)
    srun.finish()
    assert srun.exits == {0: signal.SIGKILL}
    assert 0.9 < time.monotonic() - began < 2.5
    assert runner.result().statuses == (signal.SIGKILL,)


def test_term_kill_from_srun_terms_then_kills_after_kill_wait(
    spool: Path, zygote: Zygote, srun: Srun
) -> None:
    """srun -K: TERM first (a task may clean up), KILL after KillWait, no banner."""
    stubborn = "trap 'echo TERM' TERM; echo ready; while :; do sleep 0.1; done"
    start(spool, zygote, srun, spool, argv=("sh", "-c", stubborn), tasks=(0,), kill_wait=1)
    srun.accept()
    srun.pump(lambda: srun.out.get(0) == b"ready\n")
    began = time.monotonic()
    srun.send(stepio.SIGNAL, stepio.TERM_KILL)
    srun.finish()
    assert srun.out[0] == b"ready\nTERM\n" and b"CANCELLED" not in srun.err.get(0, b"")
    assert srun.exits == {0: signal.SIGKILL}
    assert 0.9 < time.monotonic() - began < 2.5


def test_cancel_request_from_the_agent(spool: Path, zygote: Zygote, srun: Srun) -> None:
    runner = start(spool, zygote, srun, spool, argv=("sleep", "60"))
    srun.accept()
    runner.stepdir.request_cancel(1)
    assert runner.pid is not None
    signal_supervisor(runner.pid)
    srun.finish()
    assert srun.exits == {2: signal.SIGTERM, 3: signal.SIGTERM}
    assert b"CANCELLED AT" in srun.err[2] and b"TIME LIMIT" not in srun.err[2]
    assert runner.result().statuses == (signal.SIGTERM, signal.SIGTERM)


def test_cancel_says_aborted_before_the_cancelled_line(
    spool: Path, zygote: Zygote, srun: Srun
) -> None:
    """A job's cancel: srun hears ABORTED (its "Job step aborted" line) with KillWait,
    then slurmstepd's CANCELLED line comes, as Slurm 22.05 orders them."""
    runner = start(spool, zygote, srun, spool, argv=("sleep", "60"), kill_wait=7)
    srun.accept()
    runner.stepdir.request_cancel(7)
    assert runner.pid is not None
    signal_supervisor(runner.pid)
    srun.finish()
    assert srun.said == [(stepio.ABORTED, 7, b"")]
    assert b"CANCELLED AT" in srun.err[2] and b"TIME LIMIT" not in srun.err[2]


def test_job_time_limit_says_so_then_aborted(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """The job's time limit, as the agent passes it on: DUE TO TIME LIMIT, then ABORTED."""
    runner = start(spool, zygote, srun, spool, argv=("sleep", "60"))
    srun.accept()
    runner.stepdir.request_cancel(3, time_limit=True)
    assert runner.pid is not None
    signal_supervisor(runner.pid)
    srun.finish()
    assert [(kind, number) for kind, number, _ in srun.said] == [(stepio.ABORTED, 3)]
    assert b"DUE TO TIME LIMIT ***\n" in srun.said[0][2]
    assert srun.exits == {2: signal.SIGTERM, 3: signal.SIGTERM}


def test_step_cancel_kills_at_once_after_its_lines(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """scancel JOB.STEP: ABORTED, the CANCELLED line, and KILL (no TERM: a task that
    ignores TERM still ends, and srun says Killed)."""
    stubborn = "trap '' TERM; echo ready; while :; do sleep 0.1; done"
    runner = start(
        spool, zygote, srun, spool, argv=("sh", "-c", stubborn), tasks=(0,), kill_wait=30
    )
    srun.accept()
    srun.pump(lambda: srun.out.get(0) == b"ready\n")
    runner.stepdir.request_signal(CANCEL_STEP)
    assert runner.pid is not None
    signal_supervisor(runner.pid)
    srun.finish()
    assert srun.said == [(stepio.ABORTED, 30, b"")]
    assert re.fullmatch(
        rb"slurmstepd: error: \*\*\* STEP 42\.\d+ ON n3 CANCELLED AT \S+ \*\*\*\n", srun.err[0]
    )
    assert srun.exits == {0: signal.SIGKILL}


def test_kill_signal_request_is_forced(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """scancel -s KILL JOB.STEP: FORCED (srun's "Force Terminated"), no ABORTED, no line."""
    runner = start(spool, zygote, srun, spool, argv=("sleep", "60"))
    srun.accept()
    runner.stepdir.request_signal(signal.SIGKILL)
    assert runner.pid is not None
    signal_supervisor(runner.pid)
    srun.finish()
    assert [(kind, number) for kind, number, _ in srun.said] == [(stepio.FORCED, 0)]
    assert srun.err == {} and srun.exits == {2: signal.SIGKILL, 3: signal.SIGKILL}


def test_bcast_step_starts_its_tasks_on_go(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """srun --bcast: nothing runs before GO (the copy is not there yet); after it the
    tasks run, and what srun sent with GO reaches them."""
    marker = spool / "ran-on-go"
    script = f"touch {marker}; read line; echo got $line"
    runner = start(spool, zygote, srun, spool, argv=("sh", "-c", script), tasks=(0,), bcast=True)
    srun.accept()
    assert runner.stepdir.read_started() is None and not marker.exists()
    srun.send(stepio.GO, 0)
    srun.send(stepio.IN, 0, b"hello\n")
    srun.finish()
    assert srun.out == {0: b"got hello\n"} and srun.exits == {0: 0} and marker.exists()


def test_bcast_step_without_go_starts_nothing(spool: Path, zygote: Zygote, srun: Srun) -> None:
    """srun hanging up before GO (its copy failed): no task ever starts."""
    marker = spool / "ran-without-go"
    runner = start(spool, zygote, srun, spool, argv=("touch", str(marker)), tasks=(0,), bcast=True)
    srun.accept()
    assert srun.conn is not None
    srun.conn.close()
    srun.conn = None
    result = runner.result()
    assert result.statuses == (NOT_STARTED,) and "hung up" in result.message
    assert not marker.exists()


def test_output_files_per_task(spool: Path, zygote: Zygote, srun: Srun, tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "42"
    logs.mkdir(parents=True)  # Slurm makes no directory for them
    runner = start(spool, zygote, srun, tmp_path, std_out="logs/%j/task-%t-%N.out")
    srun.accept()
    srun.finish()
    assert srun.out == {} and srun.err == {}  # stderr goes with stdout
    assert (logs / "task-2-n3.out").read_text() == "out 2\nerr 2\n"
    assert (logs / "task-3-n3.out").read_text() == "out 3\nerr 3\n"
    assert runner.result().statuses == (0, 0)


def test_shared_output_file_is_truncated_once(
    spool: Path, zygote: Zygote, srun: Srun, tmp_path: Path
) -> None:
    (tmp_path / "all.out").write_text("old contents\n")
    (tmp_path / "in-2.txt").write_text("two\n")
    (tmp_path / "in-3.txt").write_text("three\n")
    runner = start(
        spool, zygote, srun, tmp_path, argv=("cat",), std_out="all.out", std_in="in-%t.txt"
    )
    srun.accept()
    srun.finish()
    assert sorted((tmp_path / "all.out").read_text().splitlines()) == ["three", "two"]
    assert runner.result().statuses == (0, 0)


def test_errors_to_a_file_and_output_to_srun(
    spool: Path, zygote: Zygote, srun: Srun, tmp_path: Path
) -> None:
    (tmp_path / "e.err").write_text("old\n")
    runner = start(spool, zygote, srun, tmp_path, std_err="e.err", append=True, tasks=(0,))
    srun.accept()
    srun.finish()
    assert srun.out == {0: b"out 0\n"} and srun.err == {}
    assert (tmp_path / "e.err").read_text() == "old\nerr 0\n"
    assert runner.result().statuses == (0,)


def test_missing_cwd_runs_in_tmp_with_a_note(spool: Path, zygote: Zygote, srun: Srun) -> None:
    runner = start(spool, zygote, srun, spool / "gone", argv=("pwd",), tasks=(0,))
    srun.accept()
    srun.finish()
    assert srun.out == {0: b"/tmp\n"}
    assert b"couldn't chdir to" in srun.err[0] and b"going to /tmp instead" in srun.err[0]
    assert runner.result().statuses == (0,)


def test_unreachable_srun_runs_nothing(
    spool: Path, zygote: Zygote, srun: Srun, tmp_path: Path
) -> None:
    with socket.socket() as bound:  # a port of ours that nothing listens on
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        runner = start(spool, zygote, srun, tmp_path, argv=("touch", "ran"), io_port=port)
        result = runner.result()
    assert result.statuses == (-1, -1)
    assert "cannot connect to srun" in result.message
    assert not (tmp_path / "ran").exists()


def test_unopenable_output_runs_nothing(
    spool: Path, zygote: Zygote, srun: Srun, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    runner = start(spool, zygote, srun, tmp_path, argv=("touch", "ran"), std_out="file/x/o.out")
    result = runner.result()
    assert result.statuses == (-1, -1)
    assert "cannot open output file" in result.message
    assert not (tmp_path / "ran").exists()


# ---------------------------------------------------------------- srun --pty

PTY_ENV = {"PATH": "/usr/bin:/bin", "SLURM_PTY_WIN_ROW": "30", "SLURM_PTY_WIN_COL": "100"}
#: The session the shell leads (field 6 of its stat): its own pid when it leads one.
LEADER = 'test "$(cut -d" " -f6 /proc/$$/stat)" = $$ && echo leader'


def start_pty(
    spool: Path, zygote: Zygote, srun: Srun, cwd: Path, script: str, tasks: tuple[int, ...] = (0, 1)
) -> Runner:
    """Global ``tasks`` on node 0 under --pty, running ``script``."""
    return start(
        spool, zygote, srun, cwd, argv=("sh", "-c", script), tasks=tasks, node_id=0,
        environment=PTY_ENV, pty=True, unbuffered=True,
    )  # fmt: skip


def test_pty_task_zero_leads_a_session_on_a_terminal_srun_resizes(
    spool: Path, zygote: Zygote, srun: Srun
) -> None:
    """Task 0's stdin, stdout and stderr are one terminal, the controlling one of the
    session it leads, at srun's size, then at the size srun sends; the other task's
    I/O is /dev/null (Slurm's rule: it shows nothing)."""
    script = f"tty; stty size; {LEADER}; read line; stty size; echo got $line >&2"
    runner = start_pty(spool, zygote, srun, spool, script)
    srun.accept()
    srun.pump(lambda: b"leader" in srun.out.get(0, b""))
    srun.send(stepio.WINSIZE, 0, stepio.WINDOW.pack(40, 120))
    srun.send(stepio.IN, 0, b"hello\r")  # Enter, as a terminal in raw mode sends it
    srun.finish()
    lines = srun.out[0].split(b"\r\n")  # the terminal's output processing: \n -> \r\n
    assert lines[0].startswith(b"/dev/pts/"), srun.out
    assert lines[1:] == [b"30 100", b"leader", b"hello", b"40 120", b"got hello", b""]
    assert srun.err == {} and set(srun.out) == {0}
    assert srun.exits == {0: 0, 1: 0}
    assert runner.result().statuses == (0, 0)


def test_pty_ctrl_c_is_a_byte_the_terminal_turns_into_sigint(
    spool: Path, zygote: Zygote, srun: Srun
) -> None:
    """One process (a shell would catch SIGINT and could lose it to a child it forks
    meanwhile): SIGINT ends it however far it got once it says it is ready."""
    nap = "import time; print('ready', flush=True); time.sleep(30); print('not reached')"
    runner = start(
        spool, zygote, srun, spool, argv=(sys.executable, "-c", nap), tasks=(0,), node_id=0,
        environment=PTY_ENV, pty=True,
    )  # fmt: skip
    srun.accept()
    srun.pump(lambda: b"ready" in srun.out.get(0, b""))
    srun.send(stepio.IN, 0, b"\x03")
    srun.finish()
    assert srun.exits == {0: signal.SIGINT}
    assert b"not reached" not in srun.out[0]
    assert runner.result().statuses == (signal.SIGINT,)


def test_pty_a_resize_not_sealed_with_the_step_key_is_refused(
    spool: Path, zygote: Zygote, srun: Srun, tmp_path: Path
) -> None:
    """A WINSIZE record sealed with any key but the step's (one who does not hold it
    writing into the connection) never resizes the terminal: the runner takes srun's
    connection as broken and ends the tasks, which find their terminal as it was."""
    tmp_path.chmod(0o777)
    script = (
        "trap 'stty size > size$SLURM_PROCID; exit 7' TERM; echo ready; while :; do sleep 0.1; done"
    )
    runner = start_pty(spool, zygote, srun, tmp_path, script)
    srun.accept()
    srun.pump(lambda: b"ready" in srun.out.get(0, b""))
    forger = stepcipher.Sealer(os.urandom(stepio.KEY_BYTES))
    assert srun.conn is not None
    srun.conn.sendall(forger.seal(stepio.winsize_frame(50, 150)))
    task0, task1 = runner.result().statuses
    assert task0 == 7 << 8
    assert task1 in (7 << 8, signal.SIGTERM)  # its group too (its trap may not be set yet)
    assert (tmp_path / "size0").read_text() == "30 100\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_pty_device_belongs_to_the_tasks_user(spool: Path, zygote: Zygote, srun: Srun) -> None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    script = 'id -u; stat -c %u "$(tty)"'
    runner = start(
        spool, zygote, srun, Path("/"), argv=("sh", "-c", script), tasks=(0,), node_id=0,
        environment=PTY_ENV, pty=True, uid=nobody.pw_uid, gid=nobody.pw_gid, user="nobody",
    )  # fmt: skip
    srun.accept()
    srun.finish()
    assert srun.out[0].split() == [str(nobody.pw_uid).encode()] * 2
    assert runner.result().statuses == (0,)


def test_window_size_from_the_environment() -> None:
    assert window({"SLURM_PTY_WIN_ROW": "30", "SLURM_PTY_WIN_COL": "100"}) == (30, 100)
    assert window({"SLURM_PTY_WIN_ROW": "30"}) is None
    assert window({"SLURM_PTY_WIN_ROW": "x", "SLURM_PTY_WIN_COL": "100"}) is None
    assert window({"SLURM_PTY_WIN_ROW": "70000", "SLURM_PTY_WIN_COL": "100"}) is None


def test_winsize_frames_carry_rows_and_columns() -> None:
    kind, number, payload = stepio.Reader().feed(stepio.winsize_frame(40, 120))[0]
    assert (kind, number, stepio.read_winsize(payload)) == (stepio.WINSIZE, 0, (40, 120))
    with pytest.raises(stepio.ProtocolError):
        stepio.read_winsize(b"\0")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_root_runs_the_tasks_as_their_user(spool: Path, zygote: Zygote, srun: Srun) -> None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    public = Path(tempfile.mkdtemp(prefix="corral-steps-"))
    try:
        public.chmod(0o777)
        (public / "out").mkdir()
        (public / "out").chmod(0o777)
        runner = start(
            spool,
            zygote,
            srun,
            public,
            uid=nobody.pw_uid,
            gid=nobody.pw_gid,
            user="nobody",
            argv=("sh", "-c", "id -u; id -g; echo $SLURM_PROCID > mine"),
            std_out="out/%u-%t.out",
            tasks=(0,),
        )
        srun.accept()
        srun.finish()
        assert runner.result().statuses == (0,)
        out = public / "out" / "nobody-0.out"
        assert out.read_text().split() == [str(nobody.pw_uid), str(nobody.pw_gid)]
        assert out.stat().st_uid == nobody.pw_uid
        assert (public / "mine").stat().st_uid == nobody.pw_uid
        # The runner itself stays root and keeps its directory private.
        assert runner.stepdir.read_result() is not None
    finally:
        subprocess.run(["rm", "-rf", str(public)], check=True)


# ---------------------------------------------------------------- the step directory


def test_step_spec_round_trips() -> None:
    srun = Srun()
    try:
        spec = make_spec(srun, Path("/x"), array_task_id=3, append=True)
    finally:
        srun.close()
    assert StepSpec.from_json(spec.to_json()) == spec


def test_signal_requests_are_read_once_and_whole(tmp_path: Path) -> None:
    stepdir = StepDir(str(tmp_path / "step1.2"))
    stepdir.create()
    assert (stepdir.job_id, stepdir.step_id) == (1, 2)
    assert stepdir.read_signals(0) == ([], 0)
    stepdir.request_signal(10)
    stepdir.request_signal(12)
    signums, offset = stepdir.read_signals(0)
    assert signums == [10, 12]
    with open(stepdir.file("signals"), "a") as torn:
        torn.write("1")  # a line still being written is left for later
    assert stepdir.read_signals(offset) == ([], offset)


def test_a_lost_runner_is_settled(tmp_path: Path) -> None:
    orphan = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        stepdir = StepDir(str(tmp_path / "step3.0"))
        stepdir.create()
        assert stepdir.settle_lost(2).statuses == (-1, -1)
        os.unlink(stepdir.file("result"))
        stepdir.write_started(Started(pid=orphan.pid, start_time=int(time.time())))
        result = stepdir.settle_lost(2)
        assert orphan.wait(timeout=5) == -signal.SIGKILL
    finally:
        orphan.kill()
    assert result.statuses == (signal.SIGKILL, signal.SIGKILL)
    assert "node failure" in result.message
    assert stepdir.read_result() == result


def test_many_tasks_each_with_its_output_before_its_exit(
    spool: Path, zygote: Zygote, srun: Srun
) -> None:
    """200 tasks on the node: forked with every signal held once for them all, and their
    EXIT frames sent together per wake, each after what its task wrote."""
    count = 200
    runner = start(
        spool,
        zygote,
        srun,
        spool,
        tasks=tuple(range(count)),
        ntasks=count,
        argv=("sh", "-c", 'echo "out $SLURM_PROCID"; exit $((SLURM_PROCID % 7))'),
    )
    srun.accept()
    srun.finish()
    assert srun.out == {t: f"out {t}\n".encode() for t in range(count)}
    assert srun.exits == {t: (t % 7) << 8 for t in range(count)}
    assert runner.result().statuses == tuple((t % 7) << 8 for t in range(count))


def test_the_python_child_still_starts_what_c_does_not(
    spool: Path, zygote: Zygote, srun: Srun
) -> None:
    """--cpu-bind=verbose's report is the Python child's (nodeagent/taskspawn.py): its
    tasks start as every other step's do, each with its own SLURM_TASK_PID."""
    show = 'echo "$SLURM_PROCID $((SLURM_TASK_PID == $$))"'
    runner = start(spool, zygote, srun, spool, argv=("sh", "-c", show), cpu_verbose=True)
    srun.accept()
    srun.finish()
    assert srun.out == {2: b"2 1\n", 3: b"3 1\n"}
    assert all(b"cpu-bind=NONE - n3, task" in srun.err[t] for t in (2, 3))
    assert runner.result().statuses == (0, 0)
