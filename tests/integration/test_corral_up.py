"""corral up and corral down as a user runs them: accounting on by default, or off."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, text

from cli import processes, shutdown
from cli.demo import client_command
from tests.databases import fresh_database
from tests.integration.rest import Rest
from tests.privileges import may_lower_oom_score


def corral(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.corral", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def sacct(directory: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
    return subprocess.run(
        [*client_command("sacct"), "-X", "-n"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_up_starts_accounting_on_sqlite_by_default(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = corral("up", "--nodes", "1", "--dir", str(directory), "--detach")
    try:
        assert up.returncode == 0, up.stderr
        assert f"accounting: SQLite in {directory}/accounting.db" in up.stdout
        assert (directory / "slurmdbd.conf").exists()
        assert sacct(directory).returncode == 0
        _the_rest_api_answers(directory, up.stdout)
    finally:
        assert corral("down", "--dir", str(directory)).returncode == 0


def _the_rest_api_answers(directory: Path, printed: str) -> None:
    """The REST gateway corral up started, found from what it printed, with a token
    from scontrol: a job submitted there shows in the accounting records."""
    url = printed.split("REST API (slurmrestd's) at ", 1)[1].split(",", 1)[0]
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
    minted = subprocess.run(
        [*client_command("scontrol"), "token"], capture_output=True, text=True, env=env, check=True
    )
    # corral up's restd serves HTTPS with a certificate of the cluster's CA.
    context = ssl.create_default_context(cafile=str(directory / "tls" / "ca_cert.pem"))
    assert url.startswith("https://")
    rest = Rest(url, minted.stdout.strip().split("=", 1)[1], context=context)
    desc = {
        "script": "#!/bin/sh\ntrue\n",
        "environment": ["PATH=/bin:/usr/bin"],
        "current_working_directory": str(directory),
    }
    status, reply = rest.call("POST", "/slurm/v0.0.42/job/submit", {"job": desc})
    assert status == 200, reply
    job = reply["job_id"]
    deadline = time.monotonic() + 30
    state: list[str] = []
    while state != ["COMPLETED"] and time.monotonic() < deadline:
        time.sleep(0.2)
        status, reply = rest.call("GET", f"/slurmdb/v0.0.42/job/{job}")
        state = reply["jobs"][0]["state"]["current"] if status == 200 else []
    assert state == ["COMPLETED"], reply
    listed = {}
    for listing in ("accounts", "users", "qos", "associations", "clusters", "tres"):
        status, reply = rest.call("GET", f"/slurmdb/v0.0.42/{listing}")
        assert status == 200 and reply[listing], (listing, reply)
        listed[listing] = reply[listing]
    assert [c["name"] for c in listed["clusters"]] == ["corral"]
    assert {"type": "cpu", "name": "", "id": 1} in [
        {k: t[k] for k in ("type", "name", "id")} for t in listed["tres"]
    ]


def test_up_without_accounting(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = corral(
        "up", "--nodes", "1", "--dir", str(directory), "--detach", "--no-accounting", "--no-restd"
    )
    try:
        assert up.returncode == 0, up.stderr
        assert "accounting: off" in up.stdout
        assert "REST API" not in up.stdout and not (directory / "log" / "restd.log").exists()
        assert not (directory / "slurmdbd.conf").exists()
        disabled = sacct(directory)
        assert (disabled.returncode, disabled.stderr) == (
            1,
            "Slurm accounting storage is disabled\n",
        )
    finally:
        assert corral("down", "--dir", str(directory)).returncode == 0


def test_database_and_no_accounting_exclude_each_other(tmp_path: Path) -> None:
    refused = corral(
        "up", "--dir", str(tmp_path), "--database", "sqlite:///x.db", "--no-accounting"
    )
    assert refused.returncode != 0
    assert "--database and --no-accounting exclude each other" in refused.stderr


def test_up_keeps_accounting_in_the_database_it_is_given(tmp_path: Path) -> None:
    with fresh_database("mariadb", tmp_path) as url:
        directory = tmp_path / "cluster"
        up = corral("up", "--nodes", "1", "--dir", str(directory), "--detach", "--database", url)
        try:
            assert up.returncode == 0, up.stderr
            assert f"accounting: {url}" in up.stdout
            env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
            submitted = subprocess.run(
                [*client_command("sbatch"), "--parsable", "--wrap", "true"],
                capture_output=True, text=True, env=env, timeout=60, check=True, cwd=directory,
            )  # fmt: skip
            job = submitted.stdout.strip()
            listed = sacct(directory)
            assert listed.returncode == 0 and job in listed.stdout, listed
        finally:
            assert corral("down", "--dir", str(directory)).returncode == 0
        engine = create_engine(url)
        try:
            with engine.connect() as connection:
                stored = connection.execute(text("SELECT job_id FROM jobs")).scalars().all()
        finally:
            engine.dispose()
        assert int(job) in stored


def test_down_cancels_the_jobs_and_ends_what_they_left_running(tmp_path: Path) -> None:
    """corral down cancels every job through the controller (CANCELLED in accounting,
    a job that ignores SIGTERM killed after KillWait), then ends what escaped its job's
    process group; nothing of the cluster runs afterwards. Jobs are tracked by process
    group here (in a cgroup nothing escapes its job: test_containment.py)."""
    directory = tmp_path / "cluster"
    conf = str(directory / "slurm.conf")
    up = corral(
        "up", "--nodes", "1", "--dir", str(directory), "--detach", "--no-restd",
        "--set", "ProctrackType=proctrack/pgid",
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    daemons = [int(line) for line in (directory / "pids").read_text().split()]
    try:
        if may_lower_oom_score():
            assert [_oom_score(pid) for pid in daemons] == [-1000] * len(daemons)
        escaped = directory / "escaped"
        jobs = [
            _sbatch(directory, "--wrap", f"setsid sleep 300 & echo $! > {escaped}; sleep 300"),
            _sbatch(directory, "--wrap", "trap '' TERM; sleep 300"),
        ]
        deadline = time.monotonic() + 30
        while not (escaped.exists() and escaped.read_text().strip()):
            assert time.monotonic() < deadline, "the first job did not start"
            time.sleep(0.1)
        escaped_pid = escaped.read_text().strip()
    finally:
        down = corral("down", "--dir", str(directory))
    assert down.returncode == 0, down
    assert down.stdout.splitlines()[0] == f"cancelled 2 job(s): {','.join(jobs)}"
    assert f"  {escaped_pid} sleep 300" in down.stdout.splitlines()
    assert down.stdout.endswith(f"stopped the cluster in {directory}\n")
    assert shutdown.of_cluster(conf, str(directory / "spool")) == []
    assert processes.scan(lambda p: p.pid in daemons) == []  # a zombie has ended
    engine = create_engine(f"sqlite:///{directory}/accounting.db")
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT job_id, state FROM jobs ORDER BY job_id"))
            assert [(str(job), state) for job, state in rows] == [
                (job, "CANCELLED") for job in jobs
            ]
    finally:
        engine.dispose()


def _sbatch(directory: Path, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
    submitted = subprocess.run(
        [*client_command("sbatch"), "--parsable", *args],
        capture_output=True, text=True, env=env, timeout=60, check=True, cwd=directory,
    )  # fmt: skip
    return submitted.stdout.strip()


def _oom_score(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())
