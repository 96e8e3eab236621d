"""Issue 20's test of controller failover (docs/ha.md): two controllers sharing a state
in MariaDB and four nodes; the serving controller is killed with SIGKILL at random
points while short jobs are submitted by a client that fails over by itself, and
started again as the standby. No job may be lost, submitted twice or run twice, and
every one must complete. The second run also cuts the controllers off the database
once (a TCP relay, tests/tcpcut.py); the third crashes the database server once
(SIGKILL) and starts it again: a MariaDB of the test's own
(tests/privatemariadb.py), since the machine's serves other tests meanwhile.

By default 200 jobs and 10 kills, to stay within a few minutes on a loaded CI
machine; the issue's full size is CORRAL_HA_JOBS=2000 (CORRAL_HA_KILLS sets the
kills). The takeover times are printed (run with -s), never asserted: docs/ha.md
records them. MariaDB is the
one at 127.0.0.1:3306: skipped where it cannot be reached, except under CI.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from corral.errors import ControllerUnreachable, SlurmError
from tests.databases import fresh_state_database
from tests.integration.cluster import DONE, Cluster
from tests.integration.hapair import Controllers, ha_settings
from tests.privatemariadb import PrivateMariaDB
from tests.tcpcut import Relay

JOBS = int(os.environ.get("CORRAL_HA_JOBS", "200"))
KILLS = int(os.environ.get("CORRAL_HA_KILLS", "10"))
#: How long the database stays cut off (less than the lease: the holder keeps it).
CUT_S = 2.0


def submit(both: Controllers, name: str, runs: Path, work: Path) -> None:
    """Submit job ``name`` once: a call whose answer was lost (its controller killed
    after it was sent) is made again only if no job of that name exists."""
    spec = {
        "name": name,
        "script": f'#!/bin/sh\necho "$SLURM_JOB_ID $SLURM_JOB_NAME" >> {runs}\n',
        "work_dir": str(work),
        "std_out": "/dev/null",
        "environment": {"PATH": "/usr/bin:/bin"},
    }
    while True:
        try:
            both.client.call("Submit", {"spec": spec})
            return
        except ControllerUnreachable:
            if _named(both, name):
                return
        except SlurmError:
            time.sleep(0.2)  # refused with nothing written (the database cut off): again


def _named(both: Controllers, name: str) -> list[dict[str, Any]]:
    return _ask(both, {"filter": {"names": [name], "states": ["ALL"]}})


def _ask(both: Controllers, request: dict[str, Any]) -> list[dict[str, Any]]:
    """A listing; asked again when its controller was killed while answering."""
    while True:
        try:
            return list(both.client.call("Jobs", request)["jobs"])
        except ControllerUnreachable:
            time.sleep(0.1)


class Killer(threading.Thread):
    """Kills the serving controller each time the submissions reach a chosen count,
    starts it again (it comes back in standby) and times the takeover."""

    def __init__(self, both: Controllers, points: list[int], submitted: list[int]) -> None:
        super().__init__(daemon=True)
        self.both = both
        self.points = points
        self.submitted = submitted
        self.takeovers: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for point in self.points:
                while self.submitted[0] < point:
                    time.sleep(0.01)
                serving = self.both.wait_serving(60)
                self.both.kill(serving)
                began = time.monotonic()
                self.both.start(serving)
                self.both.wait_serving(60)
                self.takeovers.append(time.monotonic() - began)
        except BaseException as exc:
            self.error = exc


@pytest.mark.parametrize(
    "fault", ["", "cut", "restart"], ids=["kills", "kills-and-a-cut", "kills-and-a-db-restart"]
)
def test_killed_controllers_lose_and_repeat_no_job(tmp_path: Path, fault: str) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"\nseed {seed}: {JOBS} jobs, {KILLS} kills, database fault: {fault or 'none'}")
    with contextlib.ExitStack() as stack:
        if fault == "restart":
            server = stack.enter_context(PrivateMariaDB(tmp_path / "mariadb"))
            storage = server.state_storage()
        else:
            storage = stack.enter_context(fresh_state_database(tmp_path))
        relay = Relay((storage.host, storage.port))
        cluster = Cluster(
            tmp_path / "c", nodes=4, settings=ha_settings(storage, relay.port), tls=False
        )
        both = Controllers(cluster)
        runs, work = tmp_path / "runs", tmp_path / "work"
        work.mkdir()
        submitted = [0]
        killer = Killer(both, sorted(rng.sample(range(1, JOBS), KILLS)), submitted)
        fault_at = rng.randrange(JOBS) if fault else -1
        try:
            both.start_cluster()
            began = time.monotonic()
            killer.start()
            for number in range(JOBS):
                if number == fault_at and fault == "cut":
                    relay.cut()
                    time.sleep(CUT_S)
                    relay.restore()
                elif number == fault_at:
                    print(f"database restarted after job {number}: away {server.restart():.2f} s")
                submit(both, f"j{number}", runs, work)
                submitted[0] = number + 1
            killer.join(timeout=600)
            assert killer.error is None, f"{killer.error}\n{both.logs()}"
            assert both.ended() == [], f"a controller exited (one fenced out waits):\n{both.logs()}"
            cluster.wait_for(lambda: _all_done(both), 300, "jobs did not all end")
            print(f"{JOBS} jobs done in {time.monotonic() - began:.1f} s")
            print("takeovers (s):", " ".join(f"{t:.2f}" for t in killer.takeovers))
            _check(both, runs)
        finally:
            cluster.stop()
            both.stop()
            relay.close()


def _jobs(both: Controllers) -> list[dict[str, Any]]:
    flt = {"states": ["ALL"]}
    return list(
        both.client.call("Jobs", {"filter": flt, "fields": ["job_id", "name", "state"]})["jobs"]
    )


def _all_done(both: Controllers) -> bool:
    return all(job["state"] in DONE for job in _jobs(both))


def _check(both: Controllers, runs: Path) -> None:
    jobs = _jobs(both)
    names = sorted(job["name"] for job in jobs)
    assert names == sorted(f"j{n}" for n in range(JOBS)), "a job lost or submitted twice"
    wrong = [(job["job_id"], job["state"]) for job in jobs if job["state"] != "COMPLETED"]
    assert not wrong, f"jobs that did not complete: {wrong[:20]}\n{both.logs()}"
    ran = Counter(int(line.split()[0]) for line in runs.read_text().splitlines())
    twice = sorted(job for job, count in ran.items() if count > 1)
    assert not twice, f"jobs that ran twice: {twice[:20]}"
    assert sorted(ran) == sorted(int(job["job_id"]) for job in jobs)
