"""Job directories: naming, listing, what a scan reads from them, and settling lost jobs."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from nodeagent.spool import (
    LAUNCH_FAILED_STATUS,
    LOCK,
    JobDir,
    LaunchSpec,
    Phase,
    Result,
    Spool,
    Started,
)


def test_node_dir_appends_the_node_unless_the_pattern_names_it(tmp_path: Path) -> None:
    assert Spool(str(tmp_path), "h").node_dir("n1") == str(tmp_path / "n1")
    assert Spool(str(tmp_path / "%h-%n"), "h").node_dir("n1") == str(tmp_path / "h-n1")
    assert Spool(str(tmp_path / "%h"), "h").node_dir("n1") == str(tmp_path / "h" / "n1")


@pytest.mark.parametrize(
    ("pattern", "root"), [("", ""), ("%n", ""), ("slurmd.%n", ""), ("%h/%n/x", "h")]
)
def test_root_holds_every_node_dir(tmp_path: Path, pattern: str, root: str) -> None:
    spool = Spool(os.path.join(tmp_path, pattern).rstrip(os.sep), "h")
    assert spool.root() == os.path.join(tmp_path, root).rstrip(os.sep)
    assert spool.node_dir("n1").startswith(spool.root() + os.sep)


def test_jobs_lists_job_directories_in_order(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path), "h")
    spool.prepare("n1")
    for job_id, restarts in ((12, 0), (3, 1), (3, 0)):
        spool.job_dir("n1", job_id, restarts).create()
    (tmp_path / "n1" / "stray").mkdir()
    found = [(jd.job_id, jd.restarts) for jd in spool.jobs("n1")]
    assert found == [(3, 0), (3, 1), (12, 0)]
    assert spool.jobs("other") == []


def test_job_dir_rejects_other_names() -> None:
    with pytest.raises(ValueError):
        JobDir("/x/notajob")


def test_launch_spec_round_trips() -> None:
    spec = LaunchSpec(
        job_id=1,
        restarts=2,
        node="n",
        uid=5,
        gid=6,
        user="u",
        argv=("a", "b"),
        environment={"K": "V"},
        array_task_id=0,
    )
    assert LaunchSpec.from_json(spec.to_json()) == spec


def test_job_directory_is_private_but_traversable(tmp_path: Path) -> None:
    jobdir = JobDir(str(tmp_path / "job1.0"))
    jobdir.create()
    jobdir.write_script("#!/bin/sh\n", os.getuid(), os.getgid())
    assert os.stat(jobdir.path).st_mode & 0o777 == 0o711
    assert os.stat(jobdir.file("script")).st_mode & 0o777 == 0o700


def test_phases(tmp_path: Path) -> None:
    jobdir = JobDir(str(tmp_path / "job7.0"))
    jobdir.create()
    assert jobdir.phase() is Phase.LOST
    fd = os.open(jobdir.file(LOCK), os.O_RDWR | os.O_CREAT)
    try:
        assert jobdir.phase() is Phase.LOST
        # flock locks belong to the open file, so a second open sees this one held.
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert jobdir.supervisor_alive()
        assert jobdir.phase() is Phase.LAUNCHING
        jobdir.write_started(Started(pid=123, start_time=1000))
        assert jobdir.phase() is Phase.RUNNING
        assert jobdir.read_started() == Started(pid=123, start_time=1000)
        jobdir.write_result(Result(exit_status=256, outcome="exited", end_time=1001))
        assert jobdir.phase() is Phase.DONE
    finally:
        os.close(fd)
    assert not jobdir.supervisor_alive()
    assert jobdir.phase() is Phase.DONE
    jobdir.delete()
    assert not os.path.exists(jobdir.path)


def test_control_files(tmp_path: Path) -> None:
    jobdir = JobDir(str(tmp_path / "job7.0"))
    jobdir.create()
    assert jobdir.read_cancel() is None
    assert jobdir.read_time_limit() is None
    jobdir.request_cancel(4)
    jobdir.request_time_limit(-1)
    assert jobdir.read_cancel() == 4
    assert jobdir.read_time_limit() == -1
    assert not [name for name in os.listdir(jobdir.path) if name.endswith(".tmp")]


def test_lost_before_start_is_a_launch_failure(tmp_path: Path) -> None:
    jobdir = JobDir(str(tmp_path / "job8.0"))
    jobdir.create()
    result = jobdir.settle_lost()
    assert result.outcome == "launch_failed"
    assert result.exit_status == LAUNCH_FAILED_STATUS
    assert jobdir.read_result() == result
    assert jobdir.phase() is Phase.DONE


def test_lost_after_start_kills_the_orphans(tmp_path: Path) -> None:
    orphan = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        jobdir = JobDir(str(tmp_path / "job9.1"))
        jobdir.create()
        jobdir.write_started(Started(pid=orphan.pid, start_time=int(time.time())))
        result = jobdir.settle_lost()
        assert orphan.wait(timeout=5) == -signal.SIGKILL
    finally:
        orphan.kill()
    assert result.outcome == "exited"
    assert result.exit_status == signal.SIGKILL
    assert "node failure" in result.message


def test_recovery_forgets_a_launch_the_previous_agent_never_finished(tmp_path: Path) -> None:
    """An agent killed mid-launch leaves a directory but no supervisor and no start:
    nothing ran, so the next agent drops it and the controller's relaunch runs the job."""
    from nodeagent.runs import RunTable

    spool = Spool(str(tmp_path), "h")
    spool.prepare("n1")
    half = spool.job_dir("n1", 7, 0)
    half.create()
    table = RunTable(
        spool=spool,
        hostnames={"n1": "h"},
        slurm_conf="/x",
        kill_wait=1,
        python="/bin/false",
    )
    table.recover()
    assert table.running() == []
    assert table.unacked() == []
    assert list(spool.jobs("n1")) == []
