"""cli/processes.py: finding processes through /proc and ending them; corral/oomscore.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli import processes
from tests.privileges import may_lower_oom_score


@pytest.mark.parametrize(
    ("values", "found"),
    [
        (["/tmp/run"], True),
        (["--chdir=/tmp/run/x"], True),
        (["sh", "-c", "cd /tmp/run; sleep 1"], True),
        (["/tmp/run2", "/tmp/run.old", "/tmp/run-x", "/tmp/run_1"], False),
        (["/tmp/ru", "/tmp"], False),
        (["/tmp/run2:/tmp/run"], True),
    ],
)
def test_mentions_names_the_path_and_below_it_only(values: list[str], found: bool) -> None:
    assert processes.mentions(values, "/tmp/run/") is found


@pytest.fixture
def stubborn(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child that ignores SIGTERM, started in (and naming) ``tmp_path``."""
    ready = tmp_path / "ready"
    code = (
        "import signal, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=tmp_path)
    while not ready.exists():
        time.sleep(0.01)
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def test_scan_finds_by_argv_and_cwd_and_end_kills_after_the_grace(
    stubborn: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    by_argv = processes.scan(lambda p: processes.mentions(p.argv, str(tmp_path)))
    by_cwd = processes.scan(lambda p: p.cwd() == str(tmp_path))
    assert [p.pid for p in by_argv] == [p.pid for p in by_cwd] == [stubborn.pid]
    assert processes.alive(by_argv[0])
    started = time.monotonic()
    assert processes.end(by_argv, 0.3) == []
    assert time.monotonic() - started >= 0.3  # TERM was ignored: KILL after the grace
    assert stubborn.wait(5) == -9
    assert not processes.alive(by_argv[0])


def test_scan_reads_the_environment_and_spares_this_process_and_its_ancestors() -> None:
    marker = f"corral-test-{os.getpid()}"
    os.environ["CORRAL_TEST_MARK"] = marker
    try:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            time.sleep(0.2)  # its environment is in place once exec is done

            def marked(p: processes.Process) -> bool:
                return p.environ().get("CORRAL_TEST_MARK") == marker

            assert [p.pid for p in processes.scan(marked)] == [child.pid]
        finally:
            child.kill()
            child.wait()
    finally:
        del os.environ["CORRAL_TEST_MARK"]
    everything = {p.pid for p in processes.scan(lambda p: True)}
    assert not processes.ancestors() & everything


def test_a_reused_pid_is_not_the_process_found() -> None:
    """A pid with another start time is another process: never signalled as this one."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (found,) = processes.scan(lambda p: p.pid == child.pid)
        reused = processes.Process(found.pid, found.start + 1, found.argv)
        assert processes.alive(found) and not processes.alive(reused)
        assert processes.end([reused], 0.1) == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
    assert not processes.alive(found)


def test_protect_exempts_the_process_where_it_may() -> None:
    """In a child: True and -1000 with CAP_SYS_RESOURCE, else False and a warning."""
    code = (
        "import logging; from corral import oomscore; logging.basicConfig(); "
        "print(oomscore.protect('prog'), oomscore.current())"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if may_lower_oom_score():
        assert (run.stdout, run.stderr) == ("True -1000\n", "")
    else:
        assert run.stdout.split()[0] == "False"
        assert "prog: cannot set oom_score_adj to -1000 (Permission denied)" in run.stderr
