"""Accounting end to end: controller outbox -> corral-dbd -> SQLite or MariaDB -> sacct's query.

The daemons are real (controller, node agent, corral-dbd); the database is a
fresh SQLite file or a fresh MariaDB database per test (tests/databases.py).
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.errors import SlurmError
from tests.databases import BACKENDS, fresh_database
from tests.integration.cluster import Cluster

SETTINGS = ("KillWait=2", "SlurmdTimeout=6")


@pytest.fixture(params=BACKENDS)
def accounted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """Two nodes and a corral-dbd on a fresh database of each backend."""
    with fresh_database(request.param, tmp_path) as url:
        cluster = Cluster(tmp_path / "c", 2, SETTINGS, accounting=True, database=url)
        try:
            yield cluster.start()
        finally:
            cluster.stop()


def history(cluster: Cluster, **query: Any) -> list[dict[str, Any]]:
    return list(cluster.client.call("History", {"filter": query})["jobs"])


def test_finished_jobs_keep_their_final_states(accounted: Cluster) -> None:
    ok = accounted.sbatch("--wrap", "true")
    failed = accounted.sbatch("--wrap", "exit 3")
    cancelled = accounted.sbatch("--wrap", "sleep 60")
    accounted.wait_state(cancelled, {"RUNNING"})
    accounted.run("scancel", str(cancelled))
    for job in (ok, failed, cancelled):
        accounted.wait_done(job)
    accounted.wait_for(
        lambda: len([j for j in history(accounted) if j["end_time"]]) == 3,
        20,
        "the final records did not reach dbd",
    )
    got = {j["job_id"]: (j["state"], j["exit_status"] >> 8) for j in history(accounted)}
    assert got == {ok: ("COMPLETED", 0), failed: ("FAILED", 3), cancelled: ("CANCELLED", 0)}


def test_a_job_is_in_history_as_soon_as_sbatch_returns(accounted: Cluster) -> None:
    for _ in range(5):
        job = accounted.sbatch("--hold", "--wrap", "true")
        (record,) = history(accounted, job_ids=[str(job)])
        assert (record["job_id"], record["state"]) == (job, "PENDING")


def test_nothing_is_lost_while_dbd_is_down(accounted: Cluster) -> None:
    """dbd is killed mid-workload; the controller keeps scheduling, and is killed
    too; once dbd is back every job is there exactly once, with its final state."""
    first = accounted.sbatch("--array=1-60", "--wrap", "true")
    accounted.kill("dbd")
    second = accounted.sbatch("--array=1-60", "--wrap", "true")
    accounted.wait_for(
        lambda: all(j["state"] == "COMPLETED" for j in accounted.jobs(first, second)),
        60,
        "the workload did not finish while dbd was down",
    )
    accounted.kill("controller", signal.SIGKILL)
    accounted.start_controller()
    accounted.start_dbd()

    def all_recorded() -> bool:
        try:
            return len(history(accounted, job_ids=[str(first), str(second)])) == 120
        except SlurmError:
            return False

    accounted.wait_for(all_recorded, 60, "the backlog did not reach dbd")
    records = history(accounted, job_ids=[str(first), str(second)])
    once = Counter((r["array_job_id"], r["array_task_id"]) for r in records)
    assert set(once.values()) == {1}
    assert {r["state"] for r in records} == {"COMPLETED"}


def test_without_accounting_history_is_disabled(cluster: Cluster) -> None:
    with pytest.raises(SlurmError, match="Slurm accounting storage is disabled"):
        history(cluster)
