"""corral sim: SWF parsing, a replay worked out by hand, the CLI, and the fast path's equivalence.

The hand-made trace (``HAND``) runs on 2 nodes x 2 CPUs under fcfs; its
expected starts are derived in the comments next to it, and the summary
figures from those starts.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cli.corral import corral
from controller.sim import SimError, TraceError, cluster_shape, read, replay
from controller.sim.policy import NAMES, POLICIES
from controller.sim.replay import SKIP_PROCS, SKIP_RUN, SKIP_TOO_BIG, Progress
from controller.sim.report import CSV_COLUMNS, csv_rows, summarize, write_csv
from controller.sim.swf import Header, parse

ROOT = Path(__file__).resolve().parents[2]


def line(
    number: int,
    submit: int,
    run: int,
    procs: int,
    req_time: int = -1,
    alloc: int = -1,
    wait: int = -1,
) -> str:
    """One SWF job line (18 fields); unknown fields are -1."""
    fields = [number, submit, wait, run, alloc, -1, -1, procs, req_time, -1, 1]
    fields += [-1] * (18 - len(fields))
    return " ".join(str(f) for f in fields)


HAND = "\n".join(
    [
        "; Version: 2.2",
        "; MaxNodes: 2 (a tiny test machine)",
        "; MaxProcs: 4",
        ";   a comment line without a key",
        "",
        # 4 CPUs in all. Job 1 takes them all from 0 to 100.
        line(1, 0, 100, 4, req_time=120),
        # Job 2 (2 CPUs) waits for job 1: starts 100, ends 150 (wait 90).
        line(2, 10, 50, 2, req_time=60),
        # Job 3 (1 CPU) starts beside job 2 at 100, ends 105 (wait 80).
        line(3, 20, 5, 1, req_time=600),
        # Job 4 (3 CPUs): only 1 free at 100, 2 at 105; starts at 150 when job 2
        # ends, runs to 350 (wait 120).
        line(4, 30, 200, 3, req_time=300),
        "; a comment between records",
        # Job 5 (1 CPU) would fit at 100, but fcfs keeps it behind job 4:
        # starts with it at 150, ends 170 (wait 110).
        line(5, 40, 20, 1, req_time=60),
        line(6, 50, 0, 1),  # skipped: no run time
        line(7, 60, 10, -1, alloc=-1),  # skipped: no processors
        line(8, 70, 10, 8),  # skipped: more than the cluster's 4 CPUs
        # Job 9: requested processors unknown, allocated 2; no requested time.
        # The cluster is empty at 400: starts at once, ends 410.
        line(9, 400, 10, -1, alloc=2),
        "",
    ]
)

# job number -> (start, end, nodes)
HAND_EXPECTED = {
    1: (0, 100, 2),
    2: (100, 150, 1),
    3: (100, 105, 1),
    4: (150, 350, 2),
    5: (150, 170, 1),
    9: (400, 410, 1),
}


def hand_trace(tmp_path: Path, text: str = HAND, name: str = "hand.swf") -> Path:
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


# ---------------------------------------------------------------- SWF parsing


def test_header_fields_and_comments() -> None:
    trace = parse(HAND.encode().split(b"\n"), "hand.swf")
    assert trace.header.max_nodes == 2
    assert trace.header.max_procs == 4
    assert trace.header.values["Version"] == "2.2"
    assert trace.header.values["MaxNodes"] == "2 (a tiny test machine)"
    assert len(trace.records) == 9  # comments and blank lines are not records


@pytest.mark.parametrize(
    ("values", "nodes", "procs"),
    [
        ({"MaxNodes": "338 (batch partition; 512 total)", "MaxProcs": "338"}, 338, 338),
        ({"MaxNodes": "-1", "MaxProcs": "many"}, None, None),
        ({}, None, None),
    ],
    ids=["leading-number", "unknown-values", "absent"],
)
def test_header_numbers(values: dict[str, str], nodes: int | None, procs: int | None) -> None:
    header = Header(values)
    assert (header.max_nodes, header.max_procs) == (nodes, procs)


def test_minus_one_fields_fall_back() -> None:
    trace = parse([line(9, 400, 10, -1, alloc=2).encode()], "t")
    (record,) = trace.records
    assert record.req_procs == -1 and record.procs == 2  # allocated when not requested
    assert record.req_time == -1 and record.limit == 10  # run time when not requested
    assert record.line == 1 and record.position == 0


def test_float_fields_are_accepted() -> None:
    text = line(1, 5, 100, 4).replace(" 100 ", " 100.0 ", 1)
    (record,) = parse([text.encode()], "t").records
    assert record.run == 100


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 2 3", "t:2: expected 18 fields, found 3"),
        (line(1, 0, 10, 1).replace(" 10 ", " ten ", 1), "t:2: field 4 (run time) is not a number"),
        (line(1, 0, 10, 1) + " 7", "t:2: expected 18 fields, found 19"),
    ],
    ids=["too-few-fields", "not-a-number", "too-many-fields"],
)
def test_malformed_lines(text: str, message: str) -> None:
    """A line that is no job record is skipped and kept with its number and what is
    wrong; the records around it are read as usual."""
    good = line(1, 0, 10, 1).encode()
    trace = parse([b"; MaxNodes: 4", text.encode(), good], "t")
    assert (trace.warning() or "").startswith(f"1 malformed line skipped, the first {message}")
    ((number, why),) = [(m.line, f"t:{m.line}: {m.why}") for m in trace.malformed]
    assert number == 2 and why.startswith(message)
    assert [r.line for r in trace.records] == [3]


def test_malformed_lines_are_counted_within_the_slice() -> None:
    """``--jobs A:B`` counts the lines that fail among its records only; a job line
    whose numbers are bad keeps its place in the record order."""
    lines = [line(n, n, 10, 1).encode() for n in range(1, 7)]
    lines[1] = b"1 2 3"  # no job line: no place in the order
    lines[3] = lines[3].replace(b" 10 ", b" ten ", 1)  # a job line: record 2
    whole = parse(lines, "t")
    assert [r.number for r in whole.records] == [1, 3, 5, 6]
    assert [m.line for m in whole.malformed] == [2, 4]
    sliced = parse(lines, "t", 3, 5)
    assert [r.number for r in sliced.records] == [5, 6]
    assert sliced.malformed == ()
    assert "2 malformed lines skipped" in (whole.warning() or "")


def test_replay_counts_malformed_lines() -> None:
    trace = parse([b"1 2 3", line(1, 0, 60, 1).encode(), b"x"], "t")
    result = replay(trace, 1, 1)
    assert result.skipped == {"malformed line": 2}
    with pytest.raises(SimError, match=re.escape("no job records to replay (2 malformed lines")):
        replay(parse([b"1 2 3", b"x"], "t"), 1, 1)


def test_slice_by_record_order() -> None:
    lines = HAND.encode().split(b"\n")
    numbers = [r.number for r in parse(lines, "t", 2, 5).records]
    assert numbers == [3, 4, 5]
    assert [r.number for r in parse(lines, "t", 7).records] == [8, 9]
    assert parse(lines, "t", 20).records == ()


def test_read_plain_and_gzip(tmp_path: Path) -> None:
    plain = read(str(hand_trace(tmp_path)))
    packed = read(str(hand_trace(tmp_path, name="hand.swf.gz")))
    assert plain.records == packed.records
    assert len(plain.records) == 9


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read: No such file or directory"),
        (b"\x1f\x8bnot really gzip", "not a readable gzip file"),
        (gzip.compress(HAND.encode())[:40], "not a readable gzip file"),
    ],
    ids=["missing", "corrupt-gzip", "truncated-gzip"],
)
def test_unreadable_traces(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "trace.swf.gz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        read(str(path))


# ---------------------------------------------------------------- the replay, by hand


def test_hand_trace_starts_and_skips(tmp_path: Path) -> None:
    trace = read(str(hand_trace(tmp_path)))
    nodes, cpus = cluster_shape(trace.header, None, None)
    assert (nodes, cpus) == (2, 2)
    result = replay(trace, nodes, cpus)
    got = {j.number: (j.start, j.end, j.nodes) for j in result.jobs}
    assert got == HAND_EXPECTED
    assert result.skipped == {SKIP_RUN: 1, SKIP_PROCS: 1, SKIP_TOO_BIG: 1}


def test_hand_trace_summary(tmp_path: Path) -> None:
    trace = read(str(hand_trace(tmp_path)))
    summary = summarize(replay(trace, 2, 2))
    assert summary.jobs == 6
    # waits 0, 90, 80, 120, 110, 0
    assert summary.avg_wait == pytest.approx(400 / 6)
    assert summary.max_wait == 120
    # bounded slowdowns: 100/100, 140/50, (80+5)/10 (5 s counts as 10), 320/200, 130/20, 10/10
    assert summary.avg_bounded_slowdown == pytest.approx((1 + 2.8 + 8.5 + 1.6 + 6.5 + 1) / 6)
    # makespan: first submit 0, last end 410
    assert summary.makespan == 410
    # CPU-seconds 4*100 + 2*50 + 1*5 + 3*200 + 1*20 + 2*10 = 1145 of 4 CPUs x 410 s
    assert summary.utilization == pytest.approx(1145 / (4 * 410))


def test_hand_trace_csv_rows(tmp_path: Path) -> None:
    result = replay(read(str(hand_trace(tmp_path))), 2, 2)
    out = tmp_path / "jobs.csv"
    write_csv(str(out), result.jobs)
    with open(out, newline="") as src:
        rows = list(csv.reader(src))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert rows[1:3] == [
        ["1", "0", "0", "100", "0", "100", "4", "2"],
        ["2", "10", "100", "150", "90", "50", "2", "1"],
    ]
    assert len(rows) == 1 + 6
    assert list(csv_rows(result.jobs))[-1] == (9, 400, 400, 410, 0, 10, 2, 1)


def test_jobs_slice_replays_only_those(tmp_path: Path) -> None:
    trace = read(str(hand_trace(tmp_path)), 1, 4)  # jobs 2, 3, 4 without job 1 ahead
    result = replay(trace, 2, 2)
    got = {j.number: (j.start, j.end) for j in result.jobs}
    # Jobs 2 and 3 start when submitted; job 4 (3 CPUs) finds 2 free once job 3
    # has ended at 25, and starts when job 2 ends at 60.
    assert got == {2: (10, 60), 3: (20, 25), 4: (60, 260)}


def test_time_limit_and_tasks(tmp_path: Path) -> None:
    from controller.sim.replay import SimCluster, admit

    trace = read(str(hand_trace(tmp_path)))
    records, _ = admit(trace.records, 4)
    sim = SimCluster(2, 2, records)
    sim.submit(1)
    sim.submit(6)
    first, last = sim.queue()
    assert (first.num_tasks, first.cpus_per_task, first.time_limit) == (4, 1, 2)  # 120 s
    assert (last.num_tasks, last.time_limit) == (2, 1)  # 10 s run, no request: 1 minute
    assert first.partitions == ("batch",)


def test_progress_every_tenth(tmp_path: Path) -> None:
    text = "\n".join(line(i, i * 10, 5, 1) for i in range(1, 101))
    seen: list[Progress] = []
    replay(read(str(hand_trace(tmp_path, text))), 2, 2, progress=seen.append)
    assert [p.submitted for p in seen] == list(range(10, 101, 10))
    assert seen[-1].total == 100


def test_timeline(tmp_path: Path) -> None:
    result = replay(read(str(hand_trace(tmp_path))), 2, 2, timeline=True)
    by_time = {t: (pending, busy) for t, pending, busy in result.timeline}
    assert by_time[0] == (0, 4)
    assert by_time[40] == (4, 4)  # jobs 2-5 wait behind job 1
    assert by_time[100] == (2, 3)  # jobs 2 and 3 run; 4 and 5 wait
    assert by_time[150] == (0, 4)  # jobs 4 and 5
    assert by_time[410] == (0, 0)


# ---------------------------------------------------------------- shape and policies


@pytest.mark.parametrize(
    ("header", "nodes", "cpus", "shape"),
    [
        ({"MaxNodes": "144", "MaxProcs": "1152"}, None, None, (144, 8)),
        ({"MaxNodes": "144", "MaxProcs": "1152"}, 10, None, (10, 8)),
        ({"MaxNodes": "338 (batch partition; 512 total)", "MaxProcs": "338"}, None, 4, (338, 4)),
        ({"MaxProcs": "256"}, None, None, (256, 1)),
        ({"MaxProcs": "256"}, None, 4, (64, 4)),
        ({}, 3, None, (3, 1)),
    ],
    ids=["header", "nodes-given", "cpus-given", "procs-only", "procs-and-cpus", "no-header"],
)
def test_cluster_shape(
    header: dict[str, str], nodes: int | None, cpus: int | None, shape: tuple[int, int]
) -> None:
    assert cluster_shape(Header(header), nodes, cpus) == shape


def test_cluster_shape_needs_a_size() -> None:
    with pytest.raises(SimError, match="use --nodes"):
        cluster_shape(Header({}), None, None)


@pytest.mark.parametrize("name", ["easy", "conservative"])
def test_backfill_starts_job_5_beside_job_2(tmp_path: Path, name: str) -> None:
    """At 100 one CPU is free until job 4's reservation: job 5 (one minute) fits there."""
    trace = read(str(hand_trace(tmp_path)))
    got = {j.number: (j.start, j.end) for j in replay(trace, 2, 2, name).jobs}
    assert got == {number: (start, end) for number, (start, end, _) in HAND_EXPECTED.items()} | {
        5: (100, 120)
    }


def test_policy_names() -> None:
    assert NAMES == tuple(POLICIES) == ("fcfs", "conservative", "easy")


# ---------------------------------------------------------------- fast path == the controller's way

RECORD = st.tuples(
    st.integers(0, 30),  # gap since the previous submission
    st.integers(1, 60),  # run time
    st.integers(1, 8),  # processors
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(RECORD, min_size=1, max_size=40),
    nodes=st.integers(1, 4),
    cpus=st.integers(1, 3),
)
def test_fast_path_decides_as_the_whole_queue(
    records: list[tuple[int, int, int]], nodes: int, cpus: int
) -> None:
    """Windowed queue, free nodes only and skipped calls change no decision."""
    submit = 0
    lines = []
    for number, (gap, run, procs) in enumerate(records, 1):
        submit += gap
        lines.append(line(number, submit, run, procs).encode())
    assume(any(procs <= nodes * cpus for _, _, procs in records))
    trace = parse(lines, "random")
    fast = replay(trace, nodes, cpus)
    slow = replay(trace, nodes, cpus, whole_queue=True)
    assert fast.jobs == slow.jobs
    assert fast.skipped == slow.skipped
    assert fast.core.count <= slow.core.count
    # No CPU is ever given twice: at each start the running jobs fit the cluster.
    for job in fast.jobs:
        running = sum(o.procs for o in fast.jobs if o.start <= job.start < o.end)
        assert running <= nodes * cpus
        assert job.start >= job.submit


# ---------------------------------------------------------------- the command line


def test_cli_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_csv = tmp_path / "out.csv"
    trace = hand_trace(tmp_path)
    assert corral(["sim", str(trace), "--csv", str(out_csv)]) == 0
    text = capsys.readouterr().out
    assert "2 nodes x 2 CPUs (4 CPUs), policy fcfs" in text
    assert "6, 3 skipped (more processors than the cluster: 1" in text
    assert "66.7 s" in text and "69.82 %" in text and "410 s" in text
    assert len(out_csv.read_text().splitlines()) == 7


def test_cli_json_and_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = hand_trace(tmp_path, name="hand.swf.gz")
    assert corral(["sim", str(trace), "--json", "--jobs=1:4", "--nodes", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"] == 3 and out["skipped"] == 0
    assert out["nodes"] == 2 and out["cpus_per_node"] == 2 and out["policy"] == "fcfs"
    assert out["avg_wait_s"] == pytest.approx((0 + 0 + 30) / 3, abs=1e-3)
    assert out["trace"].endswith("(records 1:4)")


def test_cli_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert corral(["sim", "--help"]) == 0
    assert "--policy" in capsys.readouterr().out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.corral", "sim", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_errors(tmp_path: Path) -> None:
    """Each bad input: one ``corral sim: error:`` line, exit 1, no traceback."""
    trace = hand_trace(tmp_path)
    corrupt = tmp_path / "corrupt.swf.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage")
    cases = [
        ((str(tmp_path / "missing.swf"),), "missing.swf: cannot read: No such file"),
        ((str(corrupt),), "corrupt.swf.gz: not a readable gzip file"),
        ((str(trace), "--jobs", "5"), "--jobs wants A:B"),
        ((str(trace), "--jobs", "4:2"), "--jobs wants A:B"),
        ((str(trace), "--jobs", "x:"), "--jobs wants A:B"),
        ((str(trace), "--jobs", "20:"), "no job records to replay"),
        ((str(trace), "--nodes", "0"), "--nodes wants a positive integer, got '0'"),
        ((str(trace), "--policy", "sjf"), "unknown policy 'sjf'"),
        ((str(trace), "--frobnicate"), "unrecognized option '--frobnicate'"),
        ((), "which trace?"),
    ]
    for args, message in cases:
        result = _cli(*args)
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr.startswith("corral sim: error: "), (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert result.stdout == ""


def test_cli_warns_of_malformed_lines(tmp_path: Path) -> None:
    """One bad line costs that line: a warning names it, the summary counts it."""
    malformed = hand_trace(tmp_path, HAND + "1 2 3\n", name="malformed.swf")
    result = _cli(str(malformed), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(
        "corral sim: warning: 1 malformed line skipped, the first "
        f"{malformed}:16: expected 18 fields, found 3"
    )
    assert json.loads(result.stdout)["skipped_why"]["malformed line"] == 1
    both = _cli(str(malformed), "--policy", "fcfs,easy", "--quiet")  # cli/simsite.py's way
    assert both.returncode == 0, both.stderr
    assert both.stderr.startswith("corral sim: warning: 1 malformed line skipped")


def test_cli_png(tmp_path: Path) -> None:
    trace = hand_trace(tmp_path)
    png = tmp_path / "out.png"
    result = _cli(str(trace), "--png", str(png))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert result.returncode == 1
        assert result.stderr.startswith("corral sim: error: --png needs matplotlib")
        assert not png.exists()
    else:
        assert result.returncode == 0, result.stderr
        assert png.read_bytes().startswith(b"\x89PNG")
