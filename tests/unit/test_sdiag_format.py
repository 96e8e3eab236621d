"""sdiag's report, laid out as Slurm 24.11 prints it."""

from __future__ import annotations

from typing import Any

from cli.sdiag import render
from tests.unit.test_timefmt import utc  # noqa: F401 (autouse fixture: times in UTC)

REPLY: dict[str, Any] = {
    "now": 1_700_000_120,
    "since": 1_700_000_000,
    "agent_queue": 0,
    "agent_count": 2,
    "dbd_queue": 17,
    "jobs_submitted": 5,
    "jobs_started": 4,
    "jobs_completed": 3,
    "jobs_canceled": 1,
    "jobs_failed": 0,
    "jobs_pending": 1,
    "jobs_running": 1,
    "sched_last_us": 120,
    "sched_max_us": 900,
    "sched_cycles": 10,
    "sched_total_us": 2000,
    "sched_last_queue": 1,
    "sched_total_depth": 25,
    "sched_hit_depth": 2,
    "bf_total_jobs": 1,
    "bf_cycles": 0,
    "bf_last_when": 0,
    "bf_last_us": 0,
    "bf_max_us": 0,
    "bf_total_us": 0,
    "bf_last_depth": 0,
    "bf_last_queue": 0,
    "bf_hit_max_test": 0,
    "rpcs": [
        {"name": "REQUEST_JOB_INFO", "id": 2003, "count": 4, "total_us": 400},
        {"name": "REQUEST_SUBMIT_BATCH_JOB", "id": 4003, "count": 5, "total_us": 5000},
    ],
    "users": [{"user": "root", "uid": 0, "count": 9, "total_us": 5400}],
}


def test_the_report_has_slurms_lines() -> None:
    lines = render(REPLY).splitlines()
    assert lines[:4] == [
        "*******************************************************",
        "sdiag output at Tue Nov 14 22:15:20 2023 (1700000120)",
        "Data since      Tue Nov 14 22:13:20 2023 (1700000000)",
        "*******************************************************",
    ]
    assert "DBD Agent queue size: 17" in lines
    assert "\tMean cycle:   200" in lines and "\tMean depth cycle:  2" in lines
    assert "\tCycles per minute: 5" in lines
    assert "\tEnd of job queue: 8" in lines and "\tHit default_queue_depth: 2" in lines
    assert "\tLast cycle when: N/A" in lines
    rpc = lines.index("Remote Procedure Call statistics by message type")
    assert lines[rpc + 1] == (
        "\tREQUEST_SUBMIT_BATCH_JOB                ( 4003) count:5      ave_time:1000   "
        "total_time:5000"
    )
    assert lines[rpc + 2].startswith("\tREQUEST_JOB_INFO")
    by_user = lines.index("Remote Procedure Call statistics by user")
    assert lines[by_user + 1] == (
        "\troot            (       0) count:9      ave_time:600    total_time:5400"
    )


def test_sorting_by_id_and_time() -> None:
    by_id = render(REPLY, "id").splitlines()
    rpc = by_id.index("Remote Procedure Call statistics by message type")
    assert by_id[rpc + 1].startswith("\tREQUEST_JOB_INFO")
    by_time = render(REPLY, "time").splitlines()
    assert by_time[rpc + 1].startswith("\tREQUEST_SUBMIT_BATCH_JOB")
