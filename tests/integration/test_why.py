"""``corral why`` against a real cluster: the same expected start as ``squeue --start``."""

from __future__ import annotations

import json
from typing import Any

from corral import timefmt
from tests.integration.cluster import Cluster


def _why(c: Cluster, job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(c.run("corral", "why", "--json", str(job_id)).stdout)
    return found


def test_corral_why_explains_a_waiting_job_as_squeue_start_plans_it(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(settings=("SchedulerParameters=bf_interval=1",))
    blocker = c.sbatch("-N", "1", "--exclusive", "-t", "10", "--wrap", "sleep 120")
    c.wait_state(blocker, {"RUNNING"})
    waiting = c.sbatch("-N", "2", "--exclusive", "-t", "5", "--wrap", "true")
    c.wait_for(lambda: c.job(waiting)["start_time"] > 0, 15, "no expected start")

    # A backfill pass runs every second: read squeue between two equal answers.
    for _ in range(5):
        before = _why(c, waiting)
        start = c.run("squeue", "--start", "-h", "-j", str(waiting), "-o", "%S %Y").stdout.split()
        after = _why(c, waiting)
        planned = (before["expected_start"], before["expected_nodes"])
        if planned == (after["expected_start"], after["expected_nodes"]):
            break
    assert start == [timefmt.format_timestamp(planned[0]), planned[1]], (start, before)
    assert planned[1] == "node[1-2]"
    began = c.job(blocker)["start_time"]
    assert began + 600 <= planned[0] < began + 660, (began, planned)

    assert (before["state"], before["reason"], before["partition"]) == (
        "PENDING",
        "Resources",
        "debug",
    )
    assert (before["position"], before["queued"]) == (1, 1)
    assert before["needs"]["nodes"] == 2 and before["needs"]["exclusive"] is True
    assert before["needs"]["time_limit"] == 5
    assert before["free"] == {"count": 1, "nodes": "node2"}
    held = [(b["job_id"], b["state"], b["nodes"]) for b in before["blockers"]]
    assert held == [(blocker, "RUNNING", "node1")]
    assert before["blockers"][0]["end"] == began + 600
    assert [(s["option"], s["nodes"]) for s in before["suggestions"]] == [("--nodes=1", "node2")]
    assert before["suggestions"][0]["start"] <= before["now"]  # at once

    words = c.run("corral", "why", str(waiting)).stdout
    assert words.startswith(f"Job {waiting} (") and "is pending: Resources" in words, words
    assert f"Held by: job {blocker} (" in words, words
    assert f"Expected to start {start[0]} on node[1-2] (as squeue --start shows)." in words
    assert "Would start sooner with: --nodes=1 (now)" in words, words

    running = c.run("corral", "why", str(blocker)).stdout
    assert running.endswith("is RUNNING on node1, not pending.\n"), running
    missing = c.run("corral", "why", "999999", check=False)
    assert (missing.returncode, missing.stderr) == (
        1,
        "corral why: error: Invalid job id specified\n",
    )
    c.run("scancel", str(blocker), str(waiting))
