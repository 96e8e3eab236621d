"""slurmdbd.conf ``PrivateData=jobs,usage`` for users other than root, end to end.

Two ordinary Unix users submit a job each, and run sacct and sreport as
themselves: their identity reaches corral-dbd through the controller, which
learns it from its Unix socket (SO_PEERCRED). With PrivateData each sees only
their own jobs and usage, root sees everything; without it everyone sees both.

The clients run as real processes of those users. Where the test's own
interpreter is not theirs to run (a Python under root's 0700 home), the
system's Python of the same version runs them with this environment's
packages. The sreport part needs usage in whole hours that have ended: once
sacct has been checked, the two job records are moved two hours back in the
SQLite file, before any rollup counted them, so that sreport's rollup finds
them in a finished hour (what waiting two hours would do).
"""

from __future__ import annotations

import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.demo import client_command
from dbd.rollup import HOUR, hour_start
from tests.integration.cluster import TEST_USERS as USERS
from tests.integration.cluster import Cluster

SETTINGS = ("KillWait=2", "SlurmdTimeout=6")
#: CPU-seconds each user's job is given once moved into a finished hour.
RUN_SECONDS = {"corraltest1": 600, "corraltest2": 1200}


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    work: Path  # the user's own directory in the cluster's tree


#: A client's command line: (client name, the user or None for root) -> argv.
Clients = Callable[[str, User | None], list[str]]


def _runs_as(user: str, argv: list[str]) -> bool:
    """Whether ``user`` can run ``argv`` (an interpreter with its arguments)."""
    entry = pwd.getpwnam(user)
    try:
        done = subprocess.run(
            argv,
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            timeout=30,
            check=False,
        )
    except PermissionError:
        return False
    return done.returncode == 0


def _system_python(users: tuple[str, ...]) -> tuple[str, str] | None:
    """(a system Python of this version, the code that gives it this environment's
    packages), if ``users`` may run it; None if there is none."""
    packages = sysconfig.get_paths()["purelib"]
    boot = f"import site; site.addsitedir({packages!r})"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin"):
        python = os.path.join(folder, version)
        if os.access(python, os.X_OK) and all(
            _runs_as(name, [python, "-c", f"{boot}; import cli.sacct"]) for name in users
        ):
            return python, boot
    return None


@pytest.fixture(scope="module")
def clients(users: tuple[str, ...]) -> Clients:
    """How to run a client as one of ``users``: this interpreter if they may run
    it, else the system's Python of the same version with this environment's
    packages (this interpreter can sit under root's 0700 home)."""
    if all(_runs_as(name, [sys.executable, "-c", "import cli.sacct"]) for name in users):
        return lambda name, user: client_command(name)
    found = _system_python(users)
    if found is None:
        pytest.skip(f"the test users cannot run {sys.executable}, nor a system Python")
    python, boot = found

    def command(name: str, user: User | None) -> list[str]:
        if user is None:
            return client_command(name)
        return [python, "-c", f"{boot}; from cli.{name} import main; main()"]

    return command


@pytest.fixture
def shared_dir(users: tuple[str, ...]) -> Iterator[Path]:
    """A directory every user can reach: pytest's tmp_path is under a 0700 one."""
    top = Path(tempfile.mkdtemp(prefix="corral-private-", dir="/tmp"))
    try:
        top.chmod(0o755)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@dataclass
class Seen:
    """What each caller ("root" or a user's name) was shown."""

    sacct: dict[str, list[str]]
    sacct_of_other: dict[str, list[str]]  # A asking for B's jobs, and B for A's
    top_usage: dict[str, list[str]]
    by_user: dict[str, list[str]]
    jobs: dict[str, int]


def _run(cluster: Cluster, clients: Clients, user: User | None, name: str, *args: str) -> list[str]:
    result = attempt(cluster, clients, user, name, *args)
    who = user.name if user else "root"
    assert result.returncode == 0, f"{name} {args} as {who}: {result.stderr}"
    return sorted(result.stdout.splitlines())


def attempt(
    cluster: Cluster, clients: Clients, user: User | None, name: str, *args: str
) -> subprocess.CompletedProcess[str]:
    env = dict(cluster.env)
    if user is not None:
        env.update(HOME=str(user.work), USER=user.name, LOGNAME=user.name)
    return subprocess.run(
        [*clients(name, user), *args],
        env=env,
        cwd=user.work if user else cluster.dir,
        user=user.uid if user else None,
        group=user.gid if user else None,
        extra_groups=[] if user else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _scenario(top: Path, clients: Clients, private: bool) -> Seen:
    """Each user runs a job; then sacct and sreport as each user and as root."""
    cluster = Cluster(top / "c", 1, SETTINGS, accounting=True)
    if private:
        with open(cluster.dir / "slurmdbd.conf", "a") as conf:
            conf.write("PrivateData=jobs,usage\n")
    people = []
    for name in USERS:
        entry = pwd.getpwnam(name)
        work = top / name
        work.mkdir()
        os.chown(work, entry.pw_uid, entry.pw_gid)
        people.append(User(name, entry.pw_uid, entry.pw_gid, work))
    callers: dict[str, User | None] = {**{p.name: p for p in people}, "root": None}
    try:
        cluster.start()
        # Associations, as Slurm needs them for a user to see even their own jobs
        # with PrivateData (there is no AccountingStorageEnforce here).
        cluster.run("sacctmgr", "-i", "add", "user", ",".join(USERS), "Account=root")
        account = ("-A", "root")  # not left to when the controller learns the defaults
        jobs = {}
        for person in people:
            out = _run(cluster, clients, person, "sbatch", "--parsable", *account, "--wrap", "true")
            jobs[person.name] = int(out[0].split(";")[0])
        for job in jobs.values():
            assert cluster.wait_done(job)["state"] == "COMPLETED"

        def recorded() -> bool:
            query = {"filter": {"job_ids": [str(j) for j in jobs.values()]}}
            return all(r["end_time"] for r in cluster.client.call("History", query)["jobs"])

        cluster.wait_for(recorded, 20, "the final records did not reach dbd")
        # An ordinary user may read accounting data but not change it.
        refused = attempt(cluster, clients, people[0], "sacctmgr", "-i", "add", "account", "x")
        assert (refused.returncode, refused.stderr) == (
            1,
            "sacctmgr: error: Access/permission denied\n",
        ), refused
        seen = Seen({}, {}, {}, {}, jobs)
        sacct = ("sacct", "-X", "-n", "-P", "-o", "JobID,User")
        for name, who in callers.items():
            seen.sacct[name] = _run(cluster, clients, who, *sacct, "-a")
        first, second = people
        for person, other in ((first, second), (second, first)):
            seen.sacct_of_other[person.name] = _run(
                cluster, clients, person, *sacct, "-u", other.name
            )

        # Into a finished hour, before any rollup counted them (dbd rolls up at
        # its start, before these jobs, and then every 300 s or for sreport).
        start = hour_start(int(time.time())) - 2 * HOUR
        with closing(sqlite3.connect(cluster.dir / "accounting.db")) as db, db:
            for name, job in jobs.items():
                moved = db.execute(
                    "UPDATE jobs SET start_time = ?, end_time = ? WHERE job_id = ?",
                    (start, start + RUN_SECONDS[name], job),
                )
                assert moved.rowcount == 1
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start - HOUR))
        report = ("sreport", "-n", "-P", "-t", "seconds")
        window = (f"Start={since}", "End=now")
        top_usage = (*report, "user", "TopUsage", *window, "format=Login,Used")
        by_user = (*report, "cluster", "AccountUtilizationByUser", *window)
        for name, who in callers.items():
            seen.top_usage[name] = _run(cluster, clients, who, *top_usage)
            seen.by_user[name] = _run(cluster, clients, who, *by_user, "format=Account,Login,Used")
        return seen
    finally:
        cluster.stop()


def test_private_data_hides_other_users_jobs_and_usage(shared_dir: Path, clients: Clients) -> None:
    seen = _scenario(shared_dir, clients, private=True)
    a, b = (seen.jobs[name] for name in USERS)
    assert seen.sacct == {
        "corraltest1": [f"{a}|corraltest1"],
        "corraltest2": [f"{b}|corraltest2"],
        "root": [f"{a}|corraltest1", f"{b}|corraltest2"],
    }
    # Asking for the other user's jobs by name shows nothing (not one's own instead).
    assert seen.sacct_of_other == {"corraltest1": [], "corraltest2": []}
    assert seen.top_usage == {
        "corraltest1": ["corraltest1|600"],
        "corraltest2": ["corraltest2|1200"],
        "root": ["corraltest1|600", "corraltest2|1200"],
    }
    # A user's own rows only: not the accounts' totals, which include the others'.
    assert seen.by_user["corraltest1"] == ["root|corraltest1|600"]
    assert seen.by_user["corraltest2"] == ["root|corraltest2|1200"]
    assert seen.by_user["root"] == ["root|corraltest1|600", "root|corraltest2|1200", "root||1800"]


def test_without_private_data_every_user_sees_every_job_and_usage(
    shared_dir: Path, clients: Clients
) -> None:
    seen = _scenario(shared_dir, clients, private=False)
    a, b = (seen.jobs[name] for name in USERS)
    everyone = [f"{a}|corraltest1", f"{b}|corraltest2"]
    assert seen.sacct == {"corraltest1": everyone, "corraltest2": everyone, "root": everyone}
    assert seen.sacct_of_other == {"corraltest1": [everyone[1]], "corraltest2": [everyone[0]]}
    usage = ["corraltest1|600", "corraltest2|1200"]
    assert seen.top_usage == {"corraltest1": usage, "corraltest2": usage, "root": usage}
    assert seen.by_user["corraltest1"] == seen.by_user["root"]
