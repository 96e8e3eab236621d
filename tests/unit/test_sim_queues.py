"""corral sim with queues: a borrow-and-reclaim replay worked out by hand, the
queue map, the refused configurations, the command line, and a window of a real
trace.

The hand-made trace runs on 2 nodes x 2 CPUs (4 CPUs) under fcfs with two
queues guaranteed 2 CPUs each; trace user 1 is team A, user 2 team B:

====  ====  ======  ===  =====  ==========================================
job   user  submit  run  procs  what happens
====  ====  ======  ===  =====  ==========================================
1     1     0       100  2      starts at 0 within A's guarantee
2     1     0       100  2      starts at 0, A borrowing B's 2 unused CPUs
3     2     10      50   2      B below its guarantee reclaims: job 2 (A's
                                latest, the only one above A's guarantee)
                                is requeued at 10, job 3 starts at 10
4     2     20      30   2      B at its guarantee, A too: nothing to
                                reclaim; starts at 60 when job 3 ends
2'                              requeued, eligible at 10 + 121 = 131;
                                runs 131-231
====  ====  ======  ===  =====  ==========================================

Makespan 0-231: the cluster's CPU-seconds are 4 x 231 = 924.
Team A: waits 0 and 131 (mean 65.5, p95 by nearest rank of 2: 131); bounded
slowdowns 1 and (131 + 100) / 100 = 2.31 (mean 1.655); CPU-seconds 2 x 100 +
2 x 10 (the lost run) + 2 x 100 = 420 (utilization 420/924); above its
guarantee only 0-10, 2 CPUs: 20 of 420 borrowed; 1 job preempted.
Team B: waits 0 and 40 (mean 20, p95 40); slowdowns 1 and 70/30 (mean 5/3);
CPU-seconds 2 x 50 + 2 x 30 = 160; never borrowed; reclaimed for once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.corral import corral
from controller.sim import queuemap, read, replay, report
from controller.sim.queuereport import as_dicts, figures, text
from controller.sim.queues import load_conf
from controller.sim.replay import JobResult
from controller.sim.swf import parse
from corral.queueconf import QueueConf

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("CORRAL_TRACES", ROOT.parent / "shared" / "traces"))

TWO_TEAMS = (
    "QueueName=team-a Accounts=teama Guarantee=cpu=2\n"
    "QueueName=team-b Accounts=teamb Guarantee=cpu=2\n"
)
MAP = "# trace users to teams\nuser=1 account=teama\nuser=2 account=teamb  # B\n"


def line(number: int, submit: int, run: int, procs: int, user: int, group: int = 1) -> bytes:
    """One SWF job line (18 fields) asking 200 s; unknown fields are -1."""
    fields = [number, submit, -1, run, procs, -1, -1, procs, 200, -1, 1, user, group]
    fields += [-1] * (18 - len(fields))
    return " ".join(str(f) for f in fields).encode()


HAND = [
    line(1, 0, 100, 2, user=1),
    line(2, 0, 100, 2, user=1),
    line(3, 10, 50, 2, user=2),
    line(4, 20, 30, 2, user=2),
]


def conf_file(tmp_path: Path, text: str = TWO_TEAMS) -> QueueConf:
    path = tmp_path / "queues.conf"
    path.write_text(text)
    return load_conf(str(path))


def hand_replay(tmp_path: Path, conf_text: str = TWO_TEAMS) -> tuple[JobResult, ...]:
    conf = conf_file(tmp_path, conf_text)
    result = replay(parse(HAND, "hand"), 2, 2, queues=(conf, queuemap.parse(MAP, "map", conf)))
    return result.jobs


def test_borrow_then_reclaim_starts_and_requeues(tmp_path: Path) -> None:
    starts = {j.number: (j.queue, j.start, j.end, j.requeued) for j in hand_replay(tmp_path)}
    assert starts == {
        1: ("team-a", 0, 100, 0),  # within A's guarantee: never reclaimed
        2: ("team-a", 131, 231, 1),  # borrowed, reclaimed at 10, back after 121 s
        3: ("team-b", 10, 60, 0),
        4: ("team-b", 60, 90, 0),
    }


def test_borrow_then_reclaim_per_queue_figures(tmp_path: Path) -> None:
    conf = conf_file(tmp_path)
    result = replay(parse(HAND, "hand"), 2, 2, queues=(conf, queuemap.parse(MAP, "map", conf)))
    summary = report.summarize(result)
    assert summary.makespan == 231
    a, b = figures(result, summary)
    assert (a.queue, a.jobs, a.mean_wait, a.p95_wait) == ("team-a", 2, 65.5, 131)
    assert a.mean_bounded_slowdown == pytest.approx((1 + 2.31) / 2)
    assert a.cpu_seconds == 420 and a.lost_cpu_seconds == 20
    assert a.utilization == pytest.approx(420 / 924)
    assert a.borrowed_share == {"cpu": pytest.approx(20 / 420)}
    assert (a.preempted, a.reclaimed_for, a.requeued_jobs) == (1, 0, 1)
    assert (b.queue, b.jobs, b.mean_wait, b.p95_wait) == ("team-b", 2, 20.0, 40)
    assert b.mean_bounded_slowdown == pytest.approx((1 + 70 / 30) / 2)
    assert b.cpu_seconds == 160 and b.lost_cpu_seconds == 0
    assert b.utilization == pytest.approx(160 / 924)
    assert b.borrowed_share == {"cpu": 0.0}
    assert (b.preempted, b.reclaimed_for, b.requeued_jobs) == (0, 1, 0)
    rows = as_dicts([a, b])
    assert rows[0]["borrowed_share"] == {"cpu": round(20 / 420, 6)}
    assert rows[1]["reclaimed_for"] == 1 and rows[0]["preempted"] == 1
    table = text([a, b]).splitlines()
    assert table[0].split()[:3] == ["queue", "jobs", "avg"]
    assert table[1].split()[:3] == ["team-a", "2", "65.5"]


def test_reclaim_waits_for_reclaim_min_runtime(tmp_path: Path) -> None:
    """With ReclaimMinRuntime=0:30 (30 s) the victim is taken at 30, when it has run 30 s:
    no job ends or arrives then, so the replay must wake up for it."""
    jobs = hand_replay(tmp_path, "QueueName=root ReclaimMinRuntime=0:30\n" + TWO_TEAMS)
    starts = {j.number: (j.start, j.requeued) for j in jobs}
    assert starts == {1: (0, 0), 2: (30 + 121, 1), 3: (30, 0), 4: (80, 0)}


def test_preemption_delay_holds_reclaim_back(tmp_path: Path) -> None:
    """Team B's PreemptionDelay=0:45 (45 s): job 3 evicts nobody before 10 + 45 = 55.
    Job 4 then borrows the 2 CPUs job 1 leaves at 100 (A's job 2 waits for 176)."""
    conf = TWO_TEAMS.replace("teamb Guarantee", "teamb PreemptionDelay=0:45 Guarantee")
    starts = {j.number: (j.start, j.requeued) for j in hand_replay(tmp_path, conf)}
    assert starts == {1: (0, 0), 2: (55 + 121, 1), 3: (55, 0), 4: (100, 0)}


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
@pytest.mark.parametrize("resource", ["cpu", "node"])
def test_every_policy_and_governed_resource(tmp_path: Path, policy: str, resource: str) -> None:
    """Backfill changes nothing here, nor guarantees in nodes: each hand job takes one
    node (2 CPUs), so a guarantee of 1 node is one of 2 CPUs; A borrows a node 0-10."""
    conf = conf_file(
        tmp_path, TWO_TEAMS.replace("cpu=2", "node=1" if resource == "node" else "cpu=2")
    )
    qmap = queuemap.parse(MAP, "map", conf)
    result = replay(parse(HAND, "hand"), 2, 2, policy, queues=(conf, qmap))
    assert [(j.start, j.requeued) for j in result.jobs] == [(0, 0), (131, 1), (10, 0), (60, 0)]
    a, b = figures(result, report.summarize(result))
    assert a.borrowed_share == {
        resource: pytest.approx(10 / 210 if resource == "node" else 20 / 420)
    }
    assert b.borrowed_share == {resource: 0.0}


@pytest.mark.parametrize(
    ("strategy", "starts"),
    [
        pytest.param("BestEffortFIFO", {1: 0, 2: 210, 3: 2, 4: 110}, id="best effort"),
        pytest.param("StrictFIFO", {1: 0, 2: 100, 3: 150, 4: 150}, id="strict"),
    ],
)
def test_a_strict_queues_big_job_is_not_passed_by_its_small_ones(
    tmp_path: Path, strategy: str, starts: dict[int, int]
) -> None:
    """B's job 2 wants all 4 CPUs, 2 of them borrowed, and A holds one until 100. Best
    effort, B's small jobs 3 and 4 start within B's guarantee meanwhile and keep the big
    job out until 210; StrictFIFO, they wait behind it, and it starts at 100."""
    conf = conf_file(tmp_path, TWO_TEAMS.replace("cpu=2\n", f"cpu=2 QueueingStrategy={strategy}\n"))
    trace = parse(
        [
            line(1, 0, 100, 1, user=1),
            line(2, 1, 50, 4, user=2),
            line(3, 2, 120, 1, user=2),
            line(4, 110, 100, 1, user=2),
        ],
        "t",
    )
    result = replay(trace, 2, 2, queues=(conf, queuemap.parse(MAP, "map", conf)))
    assert {j.number: j.start for j in result.jobs} == starts


def test_jobs_in_no_queue_and_limits(tmp_path: Path) -> None:
    """A job whose user has no rule is in no queue and runs as Slurm would; a Limit
    keeps a queue's jobs to it even on an idle cluster."""
    conf = conf_file(
        tmp_path,
        TWO_TEAMS.replace(
            "Guarantee=cpu=2\nQueueName=team-b", "Guarantee=cpu=2 Limit=cpu=2\nQueueName=team-b"
        ),
    )
    trace = parse(
        [line(1, 0, 100, 2, user=1), line(2, 0, 100, 2, user=1), line(3, 0, 10, 2, user=9)], "t"
    )
    result = replay(trace, 2, 2, queues=(conf, queuemap.parse(MAP, "map", conf)))
    starts = {j.number: (j.queue, j.start) for j in result.jobs}
    assert starts == {1: ("team-a", 0), 2: ("team-a", 100), 3: ("", 0)}


# ---------------------------------------------------------------- the map and the configuration


def test_queue_map_rules(tmp_path: Path) -> None:
    conf = conf_file(tmp_path, TWO_TEAMS + "QueueName=other Accounts=misc\n")
    qmap = queuemap.parse(
        "USER=12 Account=TeamA\ngroup=3 account=teamb\n\ndefault account=misc\n", "m", conf
    )
    assert qmap.account(12, 3) == "teama"  # the user's rule before the group's
    assert qmap.account(5, 3) == "teamb"
    assert qmap.account(5, 4) == "misc"
    assert queuemap.parse("user=1 account=teama", "m", conf).account(2, 2) == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("user=1 account=teama\nuser=1 account=teamb", "m:2: user 1 is mapped twice"),
        ("default account=teama\ndefault account=teamb", "m:2: a second default line"),
        ("user=x account=teama", "m:1: user wants the trace's number"),
        ("uid=1 account=teama", "m:1: expected user=N, group=N or default first"),
        ("user=1", "m:1: each line is one rule and one account=NAME"),
        ("user=1 acct=teama", "m:1: expected account=NAME, got 'acct=teama'"),
        ("user=1 account=teama queue=x", "m:1: each line is one rule"),
        ("# c\ngroup=2 account=nobody", "m:2: account 'nobody' is in no queue of queues.conf"),
    ],
)
def test_queue_map_errors(tmp_path: Path, text: str, message: str) -> None:
    conf = conf_file(tmp_path)
    with pytest.raises(queuemap.SimError, match="^" + message):
        queuemap.parse(text, "m", conf)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TWO_TEAMS + "QueueName=c Accounts=c Guarantee=mem=1G\n", ":3: queue c: mem: SWF"),
        (TWO_TEAMS + "QueueName=c Accounts=c Guarantee=gres/gpu=1\n", ":3:"),
    ],
)
def test_queues_the_sim_cannot_govern_are_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(queuemap.SimError, match="queues.conf" + message):
        conf_file(tmp_path, text)


# ---------------------------------------------------------------- the command line


def _write_hand(tmp_path: Path) -> tuple[str, str, str]:
    trace = tmp_path / "hand.swf"
    trace.write_bytes(b"; MaxNodes: 2\n; MaxProcs: 4\n" + b"\n".join(HAND) + b"\n")
    (tmp_path / "queues.conf").write_text(TWO_TEAMS)
    (tmp_path / "map").write_text(MAP)
    return str(trace), str(tmp_path / "queues.conf"), str(tmp_path / "map")


def test_cli_json_carries_the_queues(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, conf, qmap = _write_hand(tmp_path)
    assert corral(["sim", trace, "--queues", conf, "--queue-map", qmap, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [q["queue"] for q in out["queues"]] == ["team-a", "team-b"]
    assert out["queues"][0]["p95_wait_s"] == 131 and out["queues"][0]["preempted"] == 1
    assert out["queues"][1]["reclaimed_for"] == 1
    out_csv = tmp_path / "out.csv"
    assert corral(["sim", trace, "--queues", conf, "--queue-map", qmap, "--csv", str(out_csv)]) == 0
    shown = capsys.readouterr().out
    assert "team-a     2    65.5 s     131 s" in shown
    rows = out_csv.read_text().splitlines()
    assert rows[0] == "id,submit,start,end,wait,run,procs,nodes,queue,requeued"
    assert rows[2] == "2,0,131,231,131,100,2,1,team-a,1"


def test_cli_queue_errors(tmp_path: Path) -> None:
    trace, conf, qmap = _write_hand(tmp_path)
    bad_map = tmp_path / "bad.map"
    bad_map.write_text("user=1 account=teamz\n")
    cases = [
        (("--queues", conf), "--queues and --queue-map go together"),
        (("--queue-map", qmap), "--queues and --queue-map go together"),
        (("--queues", conf, "--queue-map", str(bad_map)), "bad.map:1: account 'teamz'"),
        (("--queues", str(tmp_path / "no.conf"), "--queue-map", qmap), "no.conf: cannot read"),
    ]
    for args, message in cases:
        result = subprocess.run(
            [sys.executable, "-m", "cli.corral", "sim", trace, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr.startswith("corral sim: error: "), (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)


# ---------------------------------------------------------------- a real trace


@pytest.mark.skipif(not (TRACES / "KTH-SP2-1996-2.1-cln.swf.gz").exists(), reason="no traces")
def test_window_of_a_real_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """3,000 jobs of KTH's SP2 (100 CPUs) split between two teams by SWF group,
    each guaranteed half the CPUs: every job runs, each CPU is given once, and
    teams borrow and reclaim. The figures are printed (pytest -s), not timed."""
    conf = conf_file(
        tmp_path,
        "QueueName=team-a Accounts=teama Guarantee=cpu=50\n"
        "QueueName=team-b Accounts=teamb Guarantee=cpu=50\n",
    )
    qmap = queuemap.parse(
        "group=18 account=teama\ngroup=25 account=teama\ngroup=39 account=teama\n"
        "default account=teamb\n",
        "kth.map",
        conf,
    )
    trace = read(str(TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"), 0, 3000)
    result = replay(trace, 100, 1, queues=(conf, qmap))
    summary = report.summarize(result)
    rows = figures(result, summary)
    with capsys.disabled():
        print("\n" + report.text("KTH-SP2 records 0:3000", result, summary))
        print(text(rows))
    assert sum(r.jobs for r in rows) == len(result.jobs) == 3000
    assert all(r.jobs > 0 and r.preempted + r.reclaimed_for > 0 for r in rows)
    assert sum(r.utilization for r in rows) <= 1.0
    for job in result.jobs[::50]:
        assert job.start >= job.submit
        assert sum(o.procs for o in result.jobs if o.start <= job.start < o.end) <= 100


# ---------------------------------------------------------------- any trace


JOB = st.tuples(
    st.integers(0, 30),  # gap since the previous submission
    st.integers(1, 80),  # run time
    st.integers(1, 4),  # processors
    st.sampled_from([1, 2, 3]),  # user: 3 has no rule, so is in no queue
)


@settings(max_examples=40, deadline=None)
@given(
    jobs=st.lists(JOB, min_size=1, max_size=25),
    guarantees=st.tuples(st.integers(0, 4), st.integers(0, 4)).filter(lambda g: sum(g) <= 4),
    policy=st.sampled_from(["fcfs", "easy"]),
)
def test_any_trace_with_queues(
    tmp_path_factory: pytest.TempPathFactory,
    jobs: list[tuple[int, int, int, int]],
    guarantees: tuple[int, int],
    policy: str,
) -> None:
    """Every job runs once to its end, never before its submission nor on a CPU given
    twice; each queue's CPU-seconds are its jobs' runs plus the runs reclaim ended,
    and every eviction is counted once on each side."""
    submit, lines = 0, []
    for number, (gap, run, procs, user) in enumerate(jobs, 1):
        submit += gap
        lines.append(line(number, submit, run, procs, user))
    text = "".join(
        f"QueueName=team-{t} Accounts=team{t} Guarantee=cpu={g}\n"
        for t, g in zip("ab", guarantees, strict=True)
    )
    conf = conf_file(tmp_path_factory.mktemp("q"), text)
    result = replay(
        parse(lines, "any"), 2, 2, policy, queues=(conf, queuemap.parse(MAP, "m", conf))
    )
    assert len(result.jobs) == len(jobs)
    for job in result.jobs:
        assert job.start >= job.submit
        assert sum(o.procs for o in result.jobs if o.start <= job.start < o.end) <= 4
        assert job.queue == {1: "team-a", 2: "team-b", 3: ""}[jobs[job.number - 1][3]]
    for queue, use in result.queues.items():
        runs = sum(j.procs * (j.end - j.start) for j in result.jobs if j.queue == queue)
        assert use.seconds.get("cpu", 0.0) == runs + use.lost_cpu_seconds
        assert use.borrowed.get("cpu", 0.0) <= use.seconds.get("cpu", 0.0)
    assert sum(u.preempted for u in result.queues.values()) == sum(j.requeued for j in result.jobs)
    assert sum(u.reclaimed_for for u in result.queues.values()) <= sum(
        u.preempted for u in result.queues.values()
    )
