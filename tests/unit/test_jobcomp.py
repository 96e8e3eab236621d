"""jobcomp/filetxt lines, word for word as Slurm writes them."""

from __future__ import annotations

from pathlib import Path

from controller import jobcomp
from controller.jobstate import JobState
from tests.unit.scenario import job
from tests.unit.test_timefmt import utc  # noqa: F401 (autouse fixture: times in UTC)


def test_a_finished_array_task() -> None:
    done = job(
        7,
        state=JobState.FAILED,
        partition="debug",
        nodes=("node1", "node2"),
        cpus=(2, 2),
        alloc_mem=(100, 100),
        time_limit=30,
        submit_time=1_700_000_000,
        eligible_time=1_700_000_000,
        start_time=1_700_000_010,
        end_time=1_700_000_070,
        exit_status=3 << 8,
        account="lab",
        work_dir="/home/alice",
        array_job_id=5,
        array_task_id=2,
    )
    assert jobcomp.line(done, "corral") == (
        "JobId=7 UserId=alice(4242) GroupId=alice(4242) Name=job7 JobState=FAILED "
        "Partition=debug TimeLimit=30 StartTime=2023-11-14T22:13:30 "
        "EndTime=2023-11-14T22:14:30 NodeList=node[1-2] NodeCnt=2 ProcCnt=4 "
        "WorkDir=/home/alice ReservationName= Tres=cpu=4,mem=200M,node=2,billing=4 "
        "Account=lab QOS=normal WcKey= Cluster=corral SubmitTime=2023-11-14T22:13:20 "
        "EligibleTime=2023-11-14T22:13:20 ArrayJobId=5 ArrayTaskId=2 "
        "DerivedExitCode=3:0 ExitCode=3:0 \n"
    )


def test_a_job_cancelled_before_it_started(tmp_path: Path) -> None:
    never = job(8, state=JobState.CANCELLED, time_limit=-1, end_time=1_700_000_000)
    text = jobcomp.line(never, "c")
    assert "TimeLimit=UNLIMITED StartTime=Unknown" in text
    assert "NodeList=(null) NodeCnt=0 ProcCnt=0" in text
    log = tmp_path / "jobcomp.log"
    jobcomp.append(str(log), text)
    jobcomp.append(str(log), text)
    assert log.read_text() == text * 2
    jobcomp.append(str(tmp_path / "missing" / "dir.log"), text)  # logged, not raised
