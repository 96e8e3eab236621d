"""squeue's output, compared byte for byte with what Slurm 22.05 printed.

The jobs below are the golden cluster's queue (docs: shared/reference,
golden-slurm-22.05.txt): an array 2 of six throttled tasks, a held job 3, two
multi-node jobs 4 and 5 and a job 6 waiting on a dependency.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli import boundary, squeue
from cli.columns import Bound, Column, Field, cell, line, lines, parse_letters, parse_names
from cli.halt import Halt
from cli.jobs import statenames
from cli.jobs.ids import display_id
from cli.jobs.order import InvalidSort, parse_sort, sort_jobs
from corral.errors import SlurmError
from corral.wire import codec

NOW = 1796014614


def job(**fields: Any) -> dict[str, Any]:
    record = codec.decode("JobInfo", b"")
    record.update(
        user="root",
        group="root",
        account="bench",
        qos="normal",
        partition="debug",
        state="PENDING",
        reason="None",
        priority=1,
        num_nodes=1,
        num_cpus=1,
        time_limit=-1,
        batch_flag=True,
    )
    record.update(fields)
    return record


GOLDEN_JOBS = [
    job(job_id=2, array_job_id=2, array_task_str="1-6%2", array_max_tasks=2, name="wrap"),
    job(job_id=3, name="heldjob", reason="JobHeldUser", priority=0),
    job(job_id=4, name="big", num_nodes=4, num_cpus=8, time_limit=2),
    job(job_id=5, name="waiter", num_nodes=4, num_cpus=4, time_limit=10),
    job(job_id=6, name="dep", reason="Dependency"),
]

GOLDEN_DEFAULT = """\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
                 6     debug      dep     root PD       0:00      1 (Dependency)
                 5     debug   waiter     root PD       0:00      4 (None)
                 4     debug      big     root PD       0:00      4 (None)
         2_[1-6%2]     debug     wrap     root PD       0:00      1 (None)
                 3     debug  heldjob     root PD       0:00      1 (JobHeldUser)
"""

GOLDEN_LONG = """\
             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)
                 6     debug      dep     root  PENDING       0:00 UNLIMITED      1 (Dependency)
                 5     debug   waiter     root  PENDING       0:00     10:00      4 (None)
                 4     debug      big     root  PENDING       0:00      2:00      4 (None)
         2_[1-6%2]     debug     wrap     root  PENDING       0:00 UNLIMITED      1 (None)
                 3     debug  heldjob     root  PENDING       0:00 UNLIMITED      1 (JobHeldUser)
"""

GOLDEN_START = """\
             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)
         2_[1-6%2]     debug     wrap     root PD                 N/A      1 (null)               (None)
                 3     debug  heldjob     root PD                 N/A      1 (null)               (JobHeldUser)
                 4     debug      big     root PD                 N/A      4 (null)               (None)
                 5     debug   waiter     root PD                 N/A      4 (null)               (None)
                 6     debug      dep     root PD                 N/A      1 (null)               (Dependency)
"""  # noqa: E501

GOLDEN_LETTERS = """\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON) PRIORITY TIME_LIMIT CPUS MIN_MEMORY
                 6     debug      dep     root PD       0:00      1 (Dependency) 1 UNLIMITED 1 0
                 5     debug   waiter     root PD       0:00      4 (None) 1 10:00 4 0
                 4     debug      big     root PD       0:00      4 (None) 1 2:00 8 0
         2_[1-6%2]     debug     wrap     root PD       0:00      1 (None) 1 UNLIMITED 1 0
                 3     debug  heldjob     root PD       0:00      1 (JobHeldUser) 0 UNLIMITED 1 0
"""  # noqa: E501

GOLDEN_NAMES = (
    "JOBID               NAME                STATE               REASON              "
    "TIME_LIMIT          CPUS                \n"
    "6                   dep                 PENDING             Dependency          "
    "UNLIMITED           1                   \n"
    "5                   waiter              PENDING             None                "
    "10:00               4                   \n"
    "4                   big                 PENDING             None                "
    "2:00                8                   \n"
    "2                   wrap                PENDING             None                "
    "UNLIMITED           1                   \n"
    "3                   heldjob             PENDING             JobHeldUser         "
    "UNLIMITED           1                   \n"
)

GOLDEN_ARRAY = """\
6 6 bench N/A PENDING
5 5 bench N/A PENDING
4 4 bench N/A PENDING
2_1 2 bench 1 PENDING
2_2 2 bench 2 PENDING
2_3 2 bench 3 PENDING
2_4 2 bench 4 PENDING
2_5 2 bench 5 PENDING
2_6 2 bench 6 PENDING
3 3 bench N/A PENDING
"""


def settings(*argv: str, **env: str) -> squeue.Settings:
    return squeue.parse_settings(list(argv), env)


@pytest.mark.parametrize(
    ("argv", "sort", "expected"),
    [
        ((), squeue.DEFAULT_SORT, GOLDEN_DEFAULT),
        (("-l",), squeue.DEFAULT_SORT, GOLDEN_LONG),
        (("--start",), "S", GOLDEN_START),
        (("-o", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R %Q %l %C %m"), "P,t,-p", GOLDEN_LETTERS),
        (("-O", "JobID,Name,State,Reason,TimeLimit,NumCPUs"), "P,t,-p", GOLDEN_NAMES),
    ],
)
def test_golden_reports(argv: tuple[str, ...], sort: str, expected: str) -> None:
    chosen = settings(*argv)
    layout = squeue.build_layout(chosen)
    assert (chosen.sort or squeue.DEFAULT_SORT) == sort
    assert squeue.render(GOLDEN_JOBS, NOW, layout, sort=sort) == expected


def test_golden_array_expansion() -> None:
    tasks = [job(job_id=2, array_job_id=2, array_task_id=task, name="wrap") for task in range(1, 7)]
    layout = squeue.letters_layout("%i %A %a %K %T")
    text = squeue.render(tasks + GOLDEN_JOBS[1:], NOW, layout, header=False)
    assert text == GOLDEN_ARRAY


def test_start_defaults_to_pending_and_start_sort() -> None:
    chosen = settings("--start")
    assert chosen.states == ["PENDING"]
    assert chosen.sort == "S"
    assert chosen.fmt == squeue.START_FORMAT


@pytest.mark.parametrize(
    ("spec", "prefix", "columns"),
    [
        ("%.18i %9P", "", [Column("i", 18, True, " "), Column("P", 9, False, "")]),
        ("id=%i|%j", "id=", [Column("i", 0, False, "|"), Column("j", 0, False, "")]),
        ("%%%5R", "", [Column("R", 5, False, "")]),
        ("plain", "plain", []),
        ("%.5", "", [Column("", 5, True, "")]),
    ],
)
def test_parse_letters(spec: str, prefix: str, columns: list[Column]) -> None:
    assert parse_letters(spec) == (prefix, columns)


@pytest.mark.parametrize(
    ("spec", "columns"),
    [
        ("JobID", [Column("JobID", 20, False, "")]),
        ("jobid:.18 ,name:8", [Column("jobid", 18, True, " "), Column("name", 8, False, "")]),
        ("state:0,,reason", [Column("state", 0, False, ""), Column("reason", 20, False, "")]),
    ],
)
def test_parse_names(spec: str, columns: list[Column]) -> None:
    assert parse_names(spec) == columns


@pytest.mark.parametrize(
    ("text", "width", "right", "cut", "expected"),
    [
        ("TIME_LIMIT", 9, True, True, "TIME_LIMI"),
        ("12:00:00", 5, True, False, "12:00:00"),
        ("12:00:00", 5, False, False, "12:00"),
        ("ab", 5, False, True, "ab   "),
        ("ab", 5, True, True, "   ab"),
        ("anything", 0, True, True, "anything"),
    ],
)
def test_cell(text: str, width: int, right: bool, cut: bool, expected: str) -> None:
    assert cell(text, width, right, cut) == expected


_TEXT = st.text(alphabet="ab %{}.9ü", max_size=14)
_BOUND = st.builds(
    lambda key, width, right, suffix, field, cut, literal: Bound(
        Column(key, width, right, suffix),
        Field(key.upper(), lambda record, context: record[key], cut) if field else None,
        literal,
    ),
    st.sampled_from(["i", "j", "R"]),
    st.integers(0, 12),
    st.booleans(),
    _TEXT,
    st.booleans(),
    st.booleans(),
    _TEXT,
)


@given(
    prefix=_TEXT,
    bound=st.lists(_BOUND, max_size=5),
    records=st.lists(st.fixed_dictionaries({k: _TEXT for k in "ijR"}), max_size=4),
)
def test_lines_are_line_for_each_record(
    prefix: str, bound: list[Bound], records: list[dict[str, str]]
) -> None:
    """The column-at-a-time layout is the cell-by-cell one, escapes and cuts included."""
    assert lines(prefix, bound, records, None) == [
        line(prefix, bound, record, None) for record in records
    ]


@pytest.mark.parametrize(
    ("fields", "long", "compact"),
    [
        ({"state": "PENDING"}, "PENDING", "PD"),
        ({"state": "RUNNING", "state_flags": ["COMPLETING"]}, "COMPLETING", "CG"),
        ({"state": "PENDING", "state_flags": ["REQUEUED"]}, "REQUEUED", "RQ"),
        ({"state": "RUNNING", "state_flags": ["STAGE_OUT", "SIGNALING"]}, "STAGE_OUT", "SO"),
        ({"state": "OUT_OF_MEMORY"}, "OUT_OF_MEMORY", "OOM"),
        ({"state": "NODE_FAIL"}, "NODE_FAIL", "NF"),
    ],
)
def test_state_names(fields: dict[str, Any], long: str, compact: str) -> None:
    record = job(**fields)
    assert statenames.long_name(record) == long
    assert statenames.compact_name(record) == compact


@pytest.mark.parametrize(
    ("fields", "env", "expected"),
    [
        ({"job_id": 12}, {}, "12"),
        ({"job_id": 15, "array_job_id": 12, "array_task_id": 3}, {}, "12_3"),
        ({"job_id": 12, "array_job_id": 12, "array_task_str": "5-10"}, {}, "12_[5-10]"),
        (
            {
                "job_id": 12,
                "array_job_id": 12,
                "array_task_str": ",".join(map(str, range(0, 60, 2))),
            },
            {},
            "12_[0,2,4,6,8,10,12,14,16,18,20",
        ),
        (
            {"job_id": 12, "array_job_id": 12, "array_task_str": "1,3,5,7,9,11%4"},
            {"SLURM_BITSTR_LEN": "8"},
            "12_[1,3,...%4]",
        ),
    ],
)
def test_display_id(fields: dict[str, Any], env: dict[str, str], expected: str) -> None:
    assert display_id(job(**fields), env) == expected


def running(**fields: Any) -> dict[str, Any]:
    values = {
        "state": "RUNNING",
        "reason": "None",
        "start_time": NOW - 3725,
        "nodes": "n2,n1",
        "num_nodes": 2,
    }
    values.update(fields)
    return job(**values)


@pytest.mark.parametrize(
    ("spec", "record", "expected"),
    [
        ("%.10M", running(), "   1:02:05"),
        ("%M", running(start_time=NOW - 90061), "1-01:01:01"),
        ("%.9l", running(time_limit=90), "  1:30:00"),
        ("%L", running(time_limit=90), "27:55"),
        ("%R", running(), "n[1-2]"),
        ("%N", running(nodes="n[3-4],n1"), "n[1,3-4]"),
        ("%R", running(state="FAILED", reason="NonZeroExitCode"), "(NonZeroExitCode)"),
        (
            "%R",
            job(state_desc="ReqNodeNotAvail, UnavailableNodes:n3"),
            "(ReqNodeNotAvail, UnavailableNodes:n3)",
        ),
        ("%R", running(state="COMPLETED", state_flags=["COMPLETING"]), "n[1-2]"),
        ("%t %T", running(state_flags=["COMPLETING"]), "CG COMPLETING"),
        ("%S|%V|%e", job(), "N/A|N/A|N/A"),
        ("%e", running(end_time=NOW + 100), "NONE"),
        ("%a %k %E %f", job(account=""), "(null) (null) (null) (null)"),
        ("%p", job(priority=4294901759), "0.99998474121093"),
        ("%m", job(min_mem_node=2048), "2G"),
        ("%m", job(min_mem_cpu=1536), "1.50G"),
        ("%z %H %X", job(), "*:*:* * N/A"),
        ("%B", running(batch_host="n1"), "n1"),
        ("%B", job(), "n/a"),
        ("%F %K", job(job_id=7), "7 N/A"),
        ("%y %U %G", job(nice=-5, uid=1000, gid=100), "-5 1000 100"),
    ],
)
def test_fields(spec: str, record: dict[str, Any], expected: str) -> None:
    layout = squeue.letters_layout(spec)
    assert squeue.render([record], NOW, layout, header=False) == expected + "\n"


def test_unknown_letter_is_reported_and_printed_literally() -> None:
    layout = squeue.letters_layout("%i %5s %j")
    assert layout.errors == ["squeue: error: Invalid job format specification: s"]
    text = squeue.render([job(job_id=9, name="x")], NOW, layout)
    assert text == "JOBID %5s NAME\n9 %5s x\n"


def test_unknown_name_is_reported() -> None:
    layout = squeue.names_layout("JobID:5 ,Bogus:4|,NAME:4")
    assert layout.errors == ["squeue: error: Invalid job format specification: Bogus"]
    assert squeue.render([job(job_id=9, name="x")], NOW, layout) == "JOBID |NAME\n9     |x   \n"


def test_all_letters() -> None:
    layout = squeue.letters_layout("%all")
    assert not layout.errors
    header = squeue.render([], NOW, layout)
    assert header.startswith("ACCOUNT|TRES_PER_NODE|MIN_CPUS|")
    assert header.rstrip("\n").endswith("|WORK_DIR")


@pytest.mark.parametrize(
    ("spec", "keys"),
    [
        ("P,t,-p", [("P", False), ("t", False), ("p", True)]),
        ("-S", [("S", True)]),
        ("b,i", [("i", False)]),
        ("-cluster,i", [("cluster", True), ("i", False)]),
    ],
)
def test_parse_sort(spec: str, keys: list[tuple[str, bool]]) -> None:
    assert parse_sort(spec) == keys


def test_invalid_sort_letter() -> None:
    with pytest.raises(InvalidSort, match="Y"):
        parse_sort("P,Y")


def test_sort_orders() -> None:
    jobs = [
        running(job_id=10, partition="b", priority=5),
        job(job_id=11, partition="a", priority=3),
        running(job_id=12, partition="a", priority=9),
        job(job_id=13, partition="a", priority=3),
    ]
    default = [record["job_id"] for record in sort_jobs(jobs, "P,t,-p", NOW)]
    assert default == [13, 11, 12, 10]
    by_id = [record["job_id"] for record in sort_jobs(jobs, "-i", NOW)]
    assert by_id == [13, 12, 11, 10]


def test_expanded_array_tasks_sort_as_one_unit() -> None:
    tasks = [job(job_id=2, array_job_id=2, array_task_id=task) for task in (3, 1, 2)]
    ordered = sort_jobs([job(job_id=1), *tasks, job(job_id=3)], squeue.DEFAULT_SORT, NOW)
    assert [(rec["job_id"], rec["array_task_id"]) for rec in ordered] == [
        (3, None),
        (2, 1),
        (2, 2),
        (2, 3),
        (1, None),
    ]


def test_environment_formats_and_filters() -> None:
    chosen = settings(SQUEUE_FORMAT="%i", SQUEUE_SORT="i", SQUEUE_STATES="r,pd")
    assert chosen.fmt == "%i"
    assert chosen.sort == "i"
    assert chosen.states == ["RUNNING", "PENDING"]
    assert settings("-o", "%j", SQUEUE_FORMAT="%i").fmt == "%j"
    assert settings(SQUEUE_FORMAT2="JobID").fmt_long == "JobID"
    assert settings("-l", SQUEUE_FORMAT="%i").fmt is None


def test_request_from_options() -> None:
    chosen = settings("-j", "5,6_2", "-u", "root", "-t", "all", "-p", "a,b", "-r", "-n", "x")
    request = squeue.request(chosen, ["job_id"])
    assert request["filter"]["job_ids"] == ["5", "6_2"]
    assert request["filter"]["users"] == ["root"]
    assert request["filter"]["states"] == ["ALL"]
    assert request["filter"]["partitions"] == ["a", "b"]
    assert request["filter"]["names"] == ["x"]
    assert request["expand_arrays"] is True
    assert settings("-j", "7").job_ids == ["7"]


def test_named_jobs_are_still_filtered_by_the_default_states() -> None:
    """Slurm's squeue shows only pending, running, suspended and completing jobs
    unless -t asks for others, even for ids given with -j: a job that ended is no row."""
    request = squeue.request(settings("-j", "7"), ["job_id"])
    assert request["filter"]["states"] == ["PENDING", "RUNNING", "SUSPENDED", "COMPLETING"]
    assert squeue.request(settings("-j", "7", "-t", "all"), [])["filter"]["states"] == ["ALL"]


@pytest.mark.parametrize(
    ("argv", "lines"),
    [
        (
            ("-t", "bogus"),
            [
                "squeue: error: Invalid job state specified: bogus",
                "squeue: error: Valid job states include: "
                + ",".join(statenames.state_listing())
                + "\n",
            ],
        ),
        (("-j", "abc"), ["squeue: error: Invalid job id: abc"]),
        (
            ("-o", "%i", "-O", "JobID"),
            ["squeue: error: -O (--Format) is incompatible with -o (--format)"],
        ),
        (("-i", "0"), ["squeue: error: --iterate=0\n"]),
    ],
)
def test_option_errors(argv: tuple[str, ...], lines: list[str]) -> None:
    with pytest.raises(Halt) as stop:
        settings(*argv)
    assert stop.value.status == 1
    assert list(stop.value.lines) == lines


class FakeClient:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.requests: list[tuple[str, Any]] = []

    def call(self, method: str, request: Any, narrow: Any = ()) -> Any:
        self.requests.append((method, request))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def run(monkeypatch: pytest.MonkeyPatch, reply: Any, *argv: str) -> tuple[FakeClient, int]:
    client = FakeClient(reply)
    monkeypatch.setattr(boundary, "connect", lambda: client)
    for name in list(os.environ):
        if name.startswith("SQUEUE_"):
            monkeypatch.delenv(name)
    return client, squeue.squeue(list(argv))


def test_unknown_single_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, status = run(monkeypatch, SlurmError(2017), "-j", "999999")
    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == ""
    assert captured.err == "slurm_load_jobs error: Invalid job id specified\n"


def test_unknown_job_list_prints_header(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, status = run(monkeypatch, SlurmError(2017), "-h", "-j", "998,999")
    assert status == 0
    assert capsys.readouterr().out == ""


def test_command_prints_golden(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client, status = run(monkeypatch, {"jobs": GOLDEN_JOBS, "now": NOW, "last_update": NOW})
    assert status == 0
    assert capsys.readouterr().out == GOLDEN_DEFAULT
    method, request = client.requests[0]
    assert method == "Jobs"
    assert request["filter"]["states"] == list(squeue.DEFAULT_STATES)


@pytest.mark.parametrize(
    ("argv", "env", "everything"),
    [([], {}, False), (["-a"], {}, True), (["--all"], {}, True), ([], {"SQUEUE_ALL": ""}, True)],
)
def test_all_asks_for_jobs_in_hidden_partitions(
    argv: list[str], env: dict[str, str], everything: bool
) -> None:
    settings = squeue.parse_settings(argv, env)
    assert squeue.request(settings, [])["all_partitions"] is everything
