"""sacct's output for hand-built History replies, compared with what Slurm printed.

The golden blocks are shared/reference/golden-slurm-22.05.txt's ``sacct`` runs
(jobs 2, 3, 6, 11, 12 of one run, job 1 of another, array 2 with tasks 1 and 2
running and 4-6 pending two at a time). Slurm there also had a step ``1.0``
from ``srun hostname``; Corral records no steps but the batch step yet, so
that line is left out. Local time is UTC (test_timefmt's fixture) so that
timestamps are the same on every machine.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli.sacct import query
from cli.sacct.fields import FIELDS, batch_step, help_format, job_state, parse_fields
from corral.wire import codec
from tests.unit.test_timefmt import NOW, epoch, utc  # noqa: F401  (utc: autouse fixture)

SUBMIT = epoch("2026-11-30T04:50:00")


def job(**fields: Any) -> dict[str, Any]:
    """A finished one-CPU batch job on n1, as the golden cluster ran them."""
    record = codec.decode("JobInfo", b"")
    record.update(
        name="wrap",
        uid=0,
        gid=0,
        user="root",
        group="root",
        account="bench",
        qos="normal",
        partition="debug",
        cluster="golden",
        state="COMPLETED",
        reason="None",
        batch_flag=True,
        time_limit=-1,
        submit_time=SUBMIT,
        eligible_time=SUBMIT,
        start_time=SUBMIT + 1,
        end_time=SUBMIT + 1,
        nodes="n1",
        batch_host="n1",
        num_nodes=1,
        num_cpus=1,
        cpus_per_node=[1],
        req_tres="cpu=1,node=1,billing=1",
        alloc_tres="cpu=1,node=1,billing=1",
        work_dir="/home/root",
    )
    record.update(fields)
    return record


def pending(**fields: Any) -> dict[str, Any]:
    """A job that has not started: no nodes, no allocation, an expected start."""
    values: dict[str, Any] = {
        "state": "PENDING",
        "reason": "Priority",
        "start_time": NOW + 600,
        "end_time": 0,
        "nodes": "",
        "batch_host": "",
        "cpus_per_node": [],
        "alloc_tres": "",
    }
    return job(**{**values, **fields})


def report(jobs: list[dict[str, Any]], *argv: str, env: dict[str, str] | None = None) -> str:
    settings = query.parse_settings(list(argv), env or {}, NOW, 0)
    return query.render(jobs, NOW, settings, env or {})


# ---------------------------------------------------------------- golden runs
GOLDEN_RUN = [
    job(job_id=2),
    job(job_id=3),
    job(job_id=6),
    job(job_id=11, state="FAILED", reason="NonZeroExitCode", exit_status=3 << 8),
    job(job_id=12),
]
GOLDEN_DEFAULT = """\
JobID           JobName  Partition    Account  AllocCPUS      State ExitCode 
------------ ---------- ---------- ---------- ---------- ---------- -------- 
2                  wrap      debug      bench          1  COMPLETED      0:0 
2.batch           batch                 bench          1  COMPLETED      0:0 
3                  wrap      debug      bench          1  COMPLETED      0:0 
3.batch           batch                 bench          1  COMPLETED      0:0 
6                  wrap      debug      bench          1  COMPLETED      0:0 
6.batch           batch                 bench          1  COMPLETED      0:0 
11                 wrap      debug      bench          1     FAILED      3:0 
11.batch          batch                 bench          1     FAILED      3:0 
12                 wrap      debug      bench          1  COMPLETED      0:0 
12.batch          batch                 bench          1  COMPLETED      0:0 
"""  # noqa: W291

GOLDEN_JOB_1 = job(
    job_id=1,
    name="golden",
    num_cpus=2,
    cpus_per_node=[2],
    req_tres="cpu=2,mem=6000M,node=1,billing=2",
    alloc_tres="cpu=2,node=1,billing=2",
    min_mem_node=6000,
)
GOLDEN_J1 = """\
JobID           JobName  Partition    Account  AllocCPUS      State ExitCode 
------------ ---------- ---------- ---------- ---------- ---------- -------- 
1                golden      debug      bench          2  COMPLETED      0:0 
1.batch           batch                 bench          2  COMPLETED      0:0 
"""  # noqa: W291
GOLDEN_P = """\
JobID|JobName|State|ExitCode|NodeList|AllocTRES
1|golden|COMPLETED|0:0|n1|billing=2,cpu=2,node=1
1.batch|batch|COMPLETED|0:0|n1|cpu=2,mem=0,node=1
"""
GOLDEN_LONG = (
    "JobID|JobIDRaw|JobName|Partition|MaxVMSize|MaxVMSizeNode|MaxVMSizeTask|AveVMSize|MaxRSS|"
    "MaxRSSNode|MaxRSSTask|AveRSS|MaxPages|MaxPagesNode|MaxPagesTask|AvePages|MinCPU|MinCPUNode|"
    "MinCPUTask|AveCPU|NTasks|AllocCPUS|Elapsed|State|ExitCode|AveCPUFreq|ReqCPUFreqMin|"
    "ReqCPUFreqMax|ReqCPUFreqGov|ReqMem|ConsumedEnergy|MaxDiskRead|MaxDiskReadNode|"
    "MaxDiskReadTask|AveDiskRead|MaxDiskWrite|MaxDiskWriteNode|MaxDiskWriteTask|AveDiskWrite|"
    "ReqTRES|AllocTRES|TRESUsageInAve|TRESUsageInMax|TRESUsageInMaxNode|TRESUsageInMaxTask|"
    "TRESUsageInMin|TRESUsageInMinNode|TRESUsageInMinTask|TRESUsageInTot|TRESUsageOutMax|"
    "TRESUsageOutMaxNode|TRESUsageOutMaxTask|TRESUsageOutAve|TRESUsageOutTot\n"
    "1|1|golden|debug||||||||||||||||||2|00:00:00|COMPLETED|0:0||Unknown|Unknown|Unknown|6000M|0"
    "|||||||||billing=2,cpu=2,mem=6000M,node=1|billing=2,cpu=2,node=1|||||||||||||\n"
    "1.batch|1.batch|batch||||||||||||||||||1|2|00:00:00|COMPLETED|0:0|0|0|0|0||0||||||||||"
    "cpu=2,mem=0,node=1|energy=0|||||||energy=0||||energy=0|energy=0\n"
)

GOLDEN_ARRAY = [
    job(job_id=7, array_job_id=2, array_task_id=1, state="RUNNING", end_time=NOW + 3600),
    job(job_id=8, array_job_id=2, array_task_id=2, state="RUNNING", end_time=NOW + 3600),
    pending(job_id=2, array_job_id=2, array_task_str="4-6%2", array_max_tasks=2),
]
GOLDEN_X = """\
JobID             State 
------------ ---------- 
2_1             RUNNING 
2_2             RUNNING 
2_[4-6%2]       PENDING 
"""  # noqa: W291


@pytest.mark.parametrize(
    ("jobs", "argv", "expected"),
    [
        pytest.param(GOLDEN_RUN, (), GOLDEN_DEFAULT, id="sacct"),
        pytest.param([GOLDEN_JOB_1], ("-j", "1"), GOLDEN_J1, id="sacct -j 1"),
        pytest.param(
            [GOLDEN_JOB_1],
            ("-j", "1", "-P", "-o", "JobID,JobName,State,ExitCode,NodeList,AllocTRES"),
            GOLDEN_P,
            id="parsable2 fields",
        ),
        pytest.param([GOLDEN_JOB_1], ("-l", "-j", "1", "-P"), GOLDEN_LONG, id="long parsable2"),
        pytest.param(GOLDEN_ARRAY, ("-X", "-j", "2", "-o", "JobID,State"), GOLDEN_X, id="array"),
    ],
)
def test_golden(jobs: list[dict[str, Any]], argv: tuple[str, ...], expected: str) -> None:
    assert report(jobs, *argv) == expected


# ---------------------------------------------------------------- the layout
def test_every_column_ends_with_a_space_and_long_text_ends_with_plus() -> None:
    long_name = job(job_id=22105866, name="averyveryverylongname")
    assert report([long_name], "-n", "-o", "jobid,jobname") == (
        "22105866     averyvery+ \n22105866.ba+      batch \n"
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("state%20", "           COMPLETED \n", id="wider"),
        pytest.param("state%-12", "COMPLETED    \n", id="left-justified"),
        pytest.param("state%4", "COM+ \n", id="cut"),
        pytest.param("nodelist%-256", "n1" + " " * 254 + " \n", id="snakemake nodelist"),
        pytest.param("Account%256", " " * 251 + "bench \n", id="snakemake account"),
        pytest.param("nnodes%1", "1 \n", id="number fits"),
        pytest.param("ncpus%1,jobid%1", "16 + \n", id="numbers overflow, text cut"),
        pytest.param("start%10", "########## \n", id="date too narrow"),
        pytest.param("elapsed%3", "00:00:01 \n", id="clock overflows"),
        pytest.param("start%19,state%0", "2026-11-30T04:50:01  \n", id="width zero"),
    ],
)
def test_widths(spec: str, expected: str) -> None:
    record = job(job_id=12, num_cpus=16, alloc_tres="cpu=16,node=1", end_time=SUBMIT + 2)
    assert report([record], "-n", "-X", "-o", spec) == expected


def test_unknown_date_is_cut_not_hashed() -> None:
    assert report([pending(job_id=5)], "-n", "-o", "start%4") == "Unkn \n"


def test_parsable_forms() -> None:
    record = job(job_id=12)
    assert report([record], "-X", "-p", "-o", "jobid,state") == ("JobID|State|\n12|COMPLETED|\n")
    assert report([record], "-X", "-P", "-o", "jobid,state") == "JobID|State\n12|COMPLETED\n"
    assert report([record], "-X", "-P", "--delimiter=::", "-o", "jobid,state,partition") == (
        "JobID::State::Partition\n12::COMPLETED::debug\n"
    )
    assert report([record], "-X", "-p", "--delimiter=,", "-n", "-o", "jobid,comment") == "12,,\n"
    # --delimiter alone does nothing: it only applies to -p and -P.
    assert report([record], "-X", "-n", "--delimiter=,", "-o", "jobid") == "12           \n"


def test_noheader_drops_both_header_lines() -> None:
    assert report([job(job_id=3)], "-n", "-X") == (
        "3                  wrap      debug      bench          1  COMPLETED      0:0 \n"
    )


def test_sacct_format_environment_and_brief() -> None:
    record = job(job_id=3)
    env = {"SACCT_FORMAT": "jobid,user"}
    assert report([record], "-X", "-P", env=env) == "JobID|User\n3|root\n"
    assert report([record], "-X", "-P", "-o", "state", env=env) == "State\nCOMPLETED\n"
    assert report([record], "-X", "-P", "-b") == "JobID|State|ExitCode\n3|COMPLETED|0:0\n"


# ---------------------------------------------------------------- records
def test_job_ids_of_tasks_and_remainders() -> None:
    jobs = [*GOLDEN_ARRAY, job(job_id=9, array_job_id=9, array_task_id=0)]
    assert report(jobs, "-n", "-P", "-o", "jobid,jobidraw") == (
        "2_1|7\n2_1.batch|7.batch\n2_2|8\n2_2.batch|8.batch\n2_[4-6%2]|2\n9_0|9\n9_0.batch|9.batch\n"
    )


def test_array_option_expands_the_pending_remainder() -> None:
    assert report(GOLDEN_ARRAY[2:], "-n", "-P", "--array", "-o", "jobid,jobidraw,state") == (
        "2_4|2|PENDING\n2_5|2|PENDING\n2_6|2|PENDING\n"
    )


def test_long_array_remainder_is_cut_like_slurm() -> None:
    tasks = ",".join(str(i) for i in range(0, 80, 2))
    record = pending(job_id=2, array_job_id=2, array_task_str=tasks)
    shown = report([record], "-n", "-P", "-o", "jobid")
    assert shown.startswith("2_[0,2,4,") and shown.endswith("...]\n")
    assert len(shown) == len("2_[]\n") + 63


def test_batch_step_follows_each_started_job() -> None:
    jobs = [
        job(job_id=20, num_nodes=2, nodes="n[1-2]", cpus_per_node=[4, 2], num_cpus=6),
        pending(job_id=21),
        job(job_id=22, state="CANCELLED", end_time=SUBMIT + 1, nodes="", batch_host=""),
    ]
    assert report(jobs, "-n", "-P", "-o", "jobid,ncpus,nnodes,nodelist") == (
        "20|1|2|n[1-2]\n20.batch|4|1|n1\n21|0|1|None assigned\n22|1|1|None assigned\n"
    )


@pytest.mark.parametrize(
    ("state", "flags", "job_shows", "batch_shows"),
    [
        pytest.param("COMPLETED", [], "COMPLETED", "COMPLETED", id="completed"),
        pytest.param("FAILED", [], "FAILED", "FAILED", id="failed"),
        pytest.param("CANCELLED", [], "CANCELLED", "CANCELLED", id="cancelled"),
        pytest.param("TIMEOUT", [], "TIMEOUT", "CANCELLED", id="timeout"),
        pytest.param("DEADLINE", [], "DEADLINE", "CANCELLED", id="deadline"),
        pytest.param("PREEMPTED", [], "PREEMPTED", "CANCELLED", id="preempted"),
        pytest.param("OUT_OF_MEMORY", [], "OUT_OF_MEMORY", "OUT_OF_MEMORY", id="oom"),
        pytest.param("NODE_FAIL", [], "NODE_FAIL", "NODE_FAIL", id="node fail"),
        pytest.param("RUNNING", [], "RUNNING", "RUNNING", id="running"),
        pytest.param("RUNNING", ["COMPLETING"], "RUNNING", "RUNNING", id="completing"),
        pytest.param("RUNNING", ["COMPLETING", "REQUEUED"], "REQUEUED", "REQUEUED", id="requeue"),
        pytest.param("CANCELLED", ["COMPLETING"], "CANCELLED", "CANCELLED", id="cancel ends"),
    ],
)
def test_states(state: str, flags: list[str], job_shows: str, batch_shows: str) -> None:
    record = job(job_id=30, state=state, state_flags=flags)
    assert job_state(record) == job_shows
    step = batch_step(record)
    assert step is not None and step.state == batch_shows


@pytest.mark.parametrize(
    ("status", "exit_text", "derived_text"),
    [
        pytest.param(0, "0:0", "0:0", id="success"),
        pytest.param(3 << 8, "3:0", "3:0", id="exit 3"),
        pytest.param(9, "0:9", "0:9", id="killed"),
        pytest.param(15 | 0x80, "0:15", "0:15", id="core dumped"),
        pytest.param(130 << 8, "2:0", "130:0", id="exit over 127 less 128"),
    ],
)
def test_exit_codes(status: int, exit_text: str, derived_text: str) -> None:
    record = job(job_id=31, exit_status=status, derived_exit_status=status)
    assert report([record], "-n", "-P", "-o", "exitcode,derivedexitcode").splitlines() == [
        f"{exit_text}|{derived_text}",
        f"{exit_text}|",
    ]


def test_times_of_a_finished_job() -> None:
    record = job(
        job_id=40,
        start_time=SUBMIT + 60,
        end_time=SUBMIT + 60 + 90061,
        time_limit=2 * 1440 + 61,
    )
    fields = "submit,eligible,start,end,elapsed,elapsedraw,timelimit,timelimitraw,cputime"
    assert report([record], "-n", "-P", "-o", fields).splitlines() == [
        "2026-11-30T04:50:00|2026-11-30T04:50:00|2026-11-30T04:51:00|2026-12-01T05:52:01|"
        "1-01:01:01|90061|2-01:01:00|2941|1-01:01:01",
        "2026-11-30T04:51:00|2026-11-30T04:51:00|2026-11-30T04:51:00|2026-12-01T05:52:01|"
        "1-01:01:01|90061|||1-01:01:01",
    ]


def test_times_of_running_and_pending_jobs() -> None:
    running = job(job_id=41, state="RUNNING", start_time=NOW - 3661, end_time=NOW + 600)
    waiting = pending(job_id=42, time_limit=60, eligible_time=0)
    fields = "start,end,elapsed,timelimit,eligible"
    assert report([running, waiting], "-n", "-X", "-P", "-o", fields).splitlines() == [
        "2026-11-30T03:55:51|Unknown|01:01:01|UNLIMITED|2026-11-30T04:50:00",
        "Unknown|Unknown|00:00:00|01:00:00|Unknown",
    ]


def test_requested_memory() -> None:
    per_node = job(job_id=50, req_tres="cpu=1,mem=6000M,node=1")
    scaled = job(job_id=51, req_tres="cpu=1,mem=65536M,node=1")
    per_cpu = job(job_id=52, req_tres="cpu=4,node=1", min_mem_cpu=512, num_cpus=4)
    none = job(job_id=53)
    jobs = [per_node, scaled, per_cpu, none]
    assert report(jobs, "-n", "-X", "-P", "-o", "reqmem") == "6000M\n64G\n2G\n0\n"
    assert report(jobs, "-n", "-X", "-P", "--noconvert", "-o", "reqmem") == (
        "6000M\n65536M\n2048M\n0\n"
    )
    assert report(jobs, "-n", "-X", "-P", "--units=G", "-o", "reqmem") == ("5.86G\n64G\n2G\n0\n")
    assert report(jobs[:1], "-n", "-X", "-P", "--units=k", "-o", "reqmem") == "6144000K\n"


def test_identity_and_text_fields() -> None:
    record = job(
        job_id=60,
        uid=1000,
        gid=100,
        user="alice",
        group="users",
        comment="a note",
        submit_line="sbatch --wrap true",
        work_dir="/home/alice",
        qos="high",
        priority=4294901759,
        restarts=2,
        std_out="/home/alice/slurm-60.out",
    )
    fields = "user,uid,group,gid,comment,submitline,workdir,qos,priority,restarts,cluster,stdout"
    assert report([record], "-n", "-P", "-o", fields).splitlines() == [
        "alice|1000|users|100|a note|sbatch --wrap true|/home/alice|high|4294901759|2|golden|"
        "/home/alice/slurm-60.out",
        "||||||||||golden|",
    ]


def test_fields_corral_does_not_record_are_blank_or_zero() -> None:
    fields = "maxrss,averss,totalcpu,usercpu,systemcpu,consumedenergy,reservation,wckey,flags"
    assert report([job(job_id=61)], "-n", "-P", "-o", fields).splitlines() == [
        "||00:00:00|00:00:00|00:00:00|0|||",
        "||00:00:00|00:00:00|00:00:00|0|||",
    ]


# ---------------------------------------------------------------- steps named by -j
def test_named_steps_only() -> None:
    jobs = [job(job_id=70), job(job_id=71)]
    assert report(jobs, "-n", "-P", "-o", "jobid", "-j", "70.batch,71") == (
        "70.batch\n71\n71.batch\n"
    )
    assert report(jobs[:1], "-n", "-P", "-o", "reason", "-j", "70.0") == ""
    assert report(jobs[:1], "-n", "-P", "-o", "jobid", "-X", "-j", "70.batch") == ""
    assert report(jobs[:1], "-n", "-P", "-o", "jobid", "-j", "70.batch", "-j", "70") == (
        "70\n70.batch\n"
    )


def test_header_is_printed_without_records() -> None:
    assert report([], "-X") == (
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n"
        "------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
    )
    assert report([], "-X", "-n") == ""


# ---------------------------------------------------------------- field lists
def test_field_names_are_case_insensitive_prefixes() -> None:
    names = [field.name for field, _ in parse_fields("jobid,JobIdRaw,nodelist,state,elapsed,ncpu,")]
    assert names == ["JobID", "JobIDRaw", "NodeList", "State", "Elapsed", "NCPUS"]


def test_field_list_quirks() -> None:
    everything = parse_fields("a,")
    assert [field for field, _ in everything] == list(FIELDS)
    # The last width given for a field applies to each of its columns.
    assert [width for _, width in parse_fields("state%5,state,jobid,")] == [5, 5, -12]
    assert [width for _, width in parse_fields("jobid%x,")] == [0]
    # An empty item ends the list.
    assert [field.name for field, _ in parse_fields("jobid,,state,")] == ["JobID"]
    assert [field.name for field, _ in parse_fields("  jobid, state,")] == ["JobID", "State"]


def test_help_format_lists_fields_four_to_a_line() -> None:
    lines = help_format().splitlines()
    assert lines[0] == (
        "Account             AdminComment        AllocCPUS           AllocNodes         "
    )
    assert sum(len(line.split()) for line in lines) == len(FIELDS)
    assert len(lines) == -(-len(FIELDS) // 4)


# ---------------------------------------------------------------- --json
def test_json_records() -> None:
    settings = query.parse_settings(["--json", "-j", "2"], {}, NOW, 0)
    jobs = [*GOLDEN_ARRAY, job(job_id=11, state="FAILED", exit_status=9)]
    text = query.render_json(jobs, NOW, settings, {}, ["--json", "-j", "2"])
    document = json.loads(text)
    assert (document["errors"], document["warnings"]) == ([], [])
    assert document["meta"]["slurm"]["release"] == "24.11.0"
    assert document["meta"]["command"] == ["sacct", "--json", "-j", "2"]
    first, _, remainder, failed = document["jobs"]
    assert first["job_id"] == 7
    assert first["array"]["job_id"] == 2
    assert first["array"]["task_id"] == {"set": True, "infinite": False, "number": 1}
    assert first["state"] == {"current": ["RUNNING"], "reason": "None"}
    assert first["exit_code"]["status"] == ["PENDING"]
    assert first["time"]["limit"] == {"set": False, "infinite": True, "number": 0}
    assert first["time"]["end"] == 0
    assert first["tres"]["allocated"] == [
        {"type": "cpu", "name": "", "id": 1, "count": 1},
        {"type": "node", "name": "", "id": 4, "count": 1},
        {"type": "billing", "name": "", "id": 5, "count": 1},
    ]
    assert [step["step"] for step in first["steps"]] == [{"id": "7.batch", "name": "batch"}]
    assert remainder["array"]["task"] == "4-6%2"
    assert remainder["array"]["task_id"]["set"] is False
    assert (remainder["steps"], remainder["nodes"]) == ([], "None assigned")
    assert failed["exit_code"] == {
        "status": ["SIGNALED"],
        "return_code": {"set": False, "infinite": False, "number": 0},
        "signal": {"id": {"set": True, "infinite": False, "number": 9}, "name": "SIGKILL"},
    }
    assert failed["steps"][0]["exit_code"]["signal"]["name"] == "SIGKILL"


def test_a_cancelled_job_says_by_whom() -> None:
    from cli.sacct.fields import job_state

    base = {"state": "CANCELLED", "state_flags": []}
    assert job_state({**base, "cancelled_by": 1000}) == "CANCELLED by 1000"
    assert job_state({**base, "cancelled_by": None}) == "CANCELLED"


def test_cpu_time_and_rss_as_sacct_prints_them() -> None:
    from cli.sacct.fields import View, cpu_clock, kibibytes

    assert cpu_clock(0) == "00:00:00"
    assert cpu_clock(4_321) == "00:00.004"
    assert cpu_clock(61_500_000) == "01:01.500"
    assert cpu_clock(3_600_000_000 + 61_000_000) == "01:01:01"
    assert cpu_clock(90_061_000_000) == "1-01:01:01"
    view = View(0, {})
    assert kibibytes(51_200, view) == "50M"
    assert kibibytes(51_234, view) == "51234K"
    assert kibibytes(51_200, View(0, {}, noconvert=True)) == "51200K"
    assert kibibytes(1536, View(0, {}, units=2)) == "1.50M"
