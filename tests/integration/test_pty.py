"""srun --pty end to end, driven from a real terminal: an interactive shell on a node with
job control, window-size changes and Ctrl-C, outside an allocation, inside salloc and inside
a batch job's allocation; srun's terminal restored; a peer without the step's key can
neither attach to the session nor resize it."""

from __future__ import annotations

import os
import pwd
import re
import signal
import socket
from collections.abc import Iterator

import pytest

from corral import stepcipher, stepio
from tests.forkuser import call_as
from tests.integration.cluster import Cluster, command
from tests.integration.console import Console

PROMPT = rb"PTYPROMPT> "
SHELL = ["/bin/bash", "--norc", "--noprofile", "-i"]
#: One process that says when it starts and when it is continued, then sleeps.
NAP = (
    "import signal, time; "
    "signal.signal(signal.SIGCONT, lambda *_: print('resumed', flush=True)); "
    "print('napping', flush=True); time.sleep(100)"
)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("pty"), nodes=2, settings=("KillWait=2",))
    try:
        yield c.start()
    finally:
        c.stop()


def console(cluster: Cluster, argv: list[str], rows: int = 30, cols: int = 100) -> Console:
    env = {**cluster.env, "PS1": PROMPT.decode(), "TERM": "dumb"}
    return Console(argv, env, cluster.dir, rows, cols)


def srun_pty(*options: str) -> list[str]:
    return [*command("srun"), *options, "--pty", *SHELL]


def run(con: Console, line: str, shows: bytes) -> bytes:
    """Type ``line`` and Enter at the prompt; what matched ``shows`` (its first group)."""
    con.send(line.encode() + b"\r")
    found = con.expect(shows)
    return found.group(1) if found.groups() else found.group(0)


def exit_with_3(con: Console) -> None:
    """Leave the shell with status 3: srun's (and the terminal as it was found)."""
    con.send(b"exit 3\r")
    assert con.wait() == 3, con.shown
    assert con.current_settings() == con.settings


def test_srun_pty_runs_an_interactive_shell_with_job_control(two: Cluster) -> None:
    con = console(two, srun_pty())
    try:
        con.expect(PROMPT)
        assert b"no job control" not in con.shown, con.shown
        assert run(con, "tty", rb"\r\n(/dev/pts/\d+)\r\n").startswith(b"/dev/pts/")
        assert run(con, "stty size", rb"\r\n(\d+ \d+)\r\n") == b"30 100"
        assert run(con, "echo $SLURM_PTY_WIN_ROW,$SLURM_PTY_WIN_COL", rb"\r\n(\d+,\d+)") == (
            b"30,100"
        )
        con.resize(40, 120)  # SIGWINCH for srun, the terminal's foreground job
        assert run(con, "stty size", rb"\r\n(\d+ \d+)\r\n") == b"40 120"
        # Ctrl-Z stops the foreground job and fg resumes it: the shell has job control;
        # Ctrl-C is a byte: the remote terminal interrupts that job, not the shell.
        run(con, f'python3 -c "{NAP}"', rb"\r\nnapping\r\n")
        con.send(b"\x1a")
        con.expect(rb"\[1\]\+ +Stopped")
        run(con, "fg", rb"\r\nresumed\r\n")
        con.send(b"\x03")
        con.expect(PROMPT)
        assert run(con, "echo status $?", rb"status (\d+)") == b"130"
        exit_with_3(con)
    finally:
        con.close()
    assert b"srun: error: node1: task 0: Exited with exit code 3\r\n" in con.shown


def test_srun_pty_inside_salloc(two: Cluster) -> None:
    con = console(two, [*command("salloc"), "-N2", *srun_pty("-N1")])
    try:
        con.expect(rb"salloc: Granted job allocation \d+")
        con.expect(PROMPT)
        assert run(con, "tty", rb"\r\n(/dev/pts/\d+)\r\n").startswith(b"/dev/pts/")
        con.resize(50, 132)
        assert run(con, "stty size", rb"\r\n(\d+ \d+)\r\n") == b"50 132"
        exit_with_3(con)
    finally:
        con.close()
    assert b"salloc: Relinquishing job allocation" in con.shown


def test_srun_pty_inside_a_batch_jobs_allocation(two: Cluster) -> None:
    job_id = two.sbatch("-N2", "-o", "/dev/null", "--wrap", "sleep 300")
    two.wait_state(job_id, {"RUNNING"})
    con = console(two, srun_pty("--jobid", str(job_id), "-w", "node2"), rows=25, cols=90)
    try:
        con.expect(PROMPT)
        assert run(con, "echo $SLURMD_NODENAME $SLURM_JOB_ID", rb"(node\d \d+)\r\n") == (
            f"node2 {job_id}".encode()
        )
        assert run(con, "stty size", rb"\r\n(\d+ \d+)\r\n") == b"25 90"
        exit_with_3(con)
    finally:
        con.close()
        two.run("scancel", str(job_id))
    two.wait_done(job_id)


def test_srun_pty_restores_the_terminal_when_its_job_is_cancelled(two: Cluster) -> None:
    con = console(two, srun_pty())
    try:
        con.expect(PROMPT)
        job_id = run(con, "echo job=$SLURM_JOB_ID", rb"job=(\d+)").decode()
        two.run("scancel", job_id)  # TERM (which an interactive bash ignores), then KILL
        assert con.wait() == 128 + signal.SIGKILL, con.shown
        assert con.current_settings() == con.settings
    finally:
        con.close()
    # slurmstepd's line as through the terminal, srun's in raw mode: each on a line of its own
    assert re.search(
        rb"slurmstepd: error: \*\*\* STEP \d+\.0 ON node1 CANCELLED AT \S+ \*\*\*\r\n"
        rb"srun: error: node1: task 0: Killed\r\n",
        con.shown,
    ), con.shown


def test_srun_pty_refuses_files_and_runs_without_a_terminal(two: Cluster) -> None:
    files = two.run("srun", "--pty", "-o", "out.txt", "true", check=False)
    assert (files.returncode, files.stderr) == (
        1,
        "srun: error: --error/--input/--output are incompatible with --pty\n",
    )
    piped = two.run("srun", "--pty", "sh", "-c", "tty; echo ran", check=False)
    assert piped.stderr.startswith(
        "srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device\n"
        "srun: error: Not using a pseudo-terminal, disregarding --pty option\n"
    ), piped.stderr
    assert piped.stdout == "not a tty\nran\n"


def _pose_as_the_runner(port: int) -> bool:
    """Connect to srun's I/O port as a runner without the step's key, say hello and
    ask for another window size; whether srun hung up on it."""
    session, opening = stepcipher.runner_session(os.urandom(stepio.KEY_BYTES), 0, 1)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(opening + session.seal(stepio.winsize_frame(50, 150)))
        try:
            return conn.recv(4096) == b""
        except ConnectionResetError:
            return True


def test_a_peer_without_the_step_key_cannot_attach_or_resize(
    two: Cluster, users: tuple[str, ...]
) -> None:
    """Another user reaches srun's port (SLURM_PTY_PORT) and poses as task 0's runner:
    srun hangs up on it at its first record, and the session goes on, its size kept."""
    con = console(two, srun_pty())
    try:
        con.expect(PROMPT)
        port = int(run(con, "echo port=$SLURM_PTY_PORT", rb"port=(\d+)"))
        assert call_as(pwd.getpwnam(users[0]), lambda: _pose_as_the_runner(port)) is True
        assert run(con, "stty size", rb"\r\n(\d+ \d+)\r\n") == b"30 100"
        exit_with_3(con)
    finally:
        con.close()
