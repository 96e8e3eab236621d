"""restd's JOB_INFO record of a job, byte for byte as clients have seen it.

Why: the record is built from ``corral.jobinfo``'s table and named converters;
these records (restd_records.json, written by the hand-built record before the
table drove it) hold every key's value and order for a pending job, a running
job with GPUs, an array task and a failed job, so a change to the table or a
converter cannot change what ``GET /jobs`` writes unnoticed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from corral.wire import corral_pb2 as pb
from restd.jobs import job_info

CASES: dict[str, dict[str, Any]] = orjson.loads(
    (Path(__file__).parent / "restd_records.json").read_bytes()
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_record_is_what_restd_has_always_written(case: str) -> None:
    info = pb.JobInfo(**CASES[case]["info"])
    assert orjson.dumps(job_info(info)) == orjson.dumps(CASES[case]["record"])


def test_a_suspended_job_is_suspended_and_not_ended_in_restd() -> None:
    record = job_info(pb.JobInfo(job_id=5, state="SUSPENDED", start_time=100, exit_status=0))
    assert record["job_state"] == ["SUSPENDED"]
    ended = job_info(pb.JobInfo(job_id=5, state="CANCELLED", start_time=100))
    assert record["exit_code"] != ended["exit_code"]  # not shown until it has ended


def test_a_heterogeneous_component_shows_its_own_id_and_its_leaders() -> None:
    """As slurmrestd shows component 1 of job 10 (measured on a real 22.05): job_id is
    the component's own id, het_job_id the leader's; a plain job has 0 and ""."""
    record = job_info(
        pb.JobInfo(job_id=11, het_job_id=10, het_job_offset=1, het_job_id_set="10-11")
    )
    assert (record["job_id"], record["het_job_id_set"]) == (11, "10-11")
    assert record["het_job_id"] == {"set": True, "infinite": False, "number": 10}
    assert record["het_job_offset"] == {"set": True, "infinite": False, "number": 1}
    plain = job_info(pb.JobInfo(job_id=9))
    zero = {"set": True, "infinite": False, "number": 0}
    assert (plain["het_job_id"], plain["het_job_id_set"], plain["het_job_offset"]) == (
        zero,
        "",
        zero,
    )
