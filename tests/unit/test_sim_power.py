"""``corral sim --suspend-time S --resume-time R`` (controller/sim/powersim.py): a replay
worked out by hand, against the same replay without power saving, and the CLI.

``TRACE`` runs on 1-CPU nodes under fcfs with SuspendTime 50 s and a 30 s resume:

* job 1 (submit 0, 100 s, 1 CPU) starts at once on n1: idle 0 s, not powered down;
* job 2 (submit 60, 10 s) gets n2, idle since 0: powered down at 50, so the job holds
  it from 60 and starts at 90 (wait 30; without power saving 0); n2 was down 10 s;
* job 3 (submit 200, 10 s, 2 CPUs) gets n1 and n2, idle since 100: both down since
  150, 50 s each; it starts at 230 (wait 30), ends at 240, the replay's end.

So 110 node-seconds powered down on two nodes, 3 nodes resumed for 2 jobs, waits
(0, 30, 30) against (0, 0, 0): 20 s added a job on average, 30 s at p95.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli.corral import corral
from controller.sim import read, replay
from controller.sim.powersim import PowerModel, PowerTracker, compare

ROOT = Path(__file__).resolve().parents[2]


def _line(number: int, submit: int, run: int, procs: int) -> str:
    fields = [number, submit, -1, run, -1, -1, -1, procs, run, -1, 1] + [-1] * 7
    return " ".join(str(f) for f in fields)


HEADER = ["; MaxNodes: 2", "; MaxProcs: 2"]
TRACE = "\n".join([*HEADER, _line(1, 0, 100, 1), _line(2, 60, 10, 1), _line(3, 200, 10, 2), ""])
MODEL = PowerModel(suspend_time=50, resume_time=30)


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "power.swf"
    path.write_text(TRACE)
    return path


def test_the_hand_trace_with_power_saving(tmp_path: Path) -> None:
    result, f = compare(read(str(_trace(tmp_path))), 2, 1, "fcfs", MODEL)
    assert [(j.start, j.end) for j in result.jobs] == [(0, 100), (90, 100), (230, 240)]
    assert (f.down_node_hours * 3600, f.node_hours * 3600) == (pytest.approx(110), 480)
    assert (f.resumed_nodes, f.delayed_jobs) == (3, 2)
    assert (f.mean_wait, f.mean_wait_power, f.p95_wait, f.p95_wait_power) == (0, 20, 0, 30)
    assert (f.mean_added_wait, f.p95_added_wait) == (20, 30)


def test_a_node_no_job_had_is_powered_down_from_the_start(tmp_path: Path) -> None:
    _, f = compare(read(str(_trace(tmp_path))), 3, 1, "fcfs", MODEL)
    assert f.down_node_hours * 3600 == pytest.approx(110 + (240 - 50))  # n3, never used


def test_a_node_shared_by_two_jobs_is_resumed_once() -> None:
    tracker = PowerTracker(MODEL, start=0)
    assert tracker.started(("n1",), 100) == 30
    assert tracker.started(("n1",), 110) == 0  # on: a second job beside the first
    tracker.idle("n1", 200)
    assert tracker.started(("n1",), 249) == 0  # idle 49 s: still on
    tracker.close(300, nodes=1)
    assert (tracker.down_seconds, tracker.resumed_nodes, tracker.delayed_jobs) == (50, 1, 1)


def test_without_a_tracker_the_replay_is_unchanged(tmp_path: Path) -> None:
    trace = read(str(_trace(tmp_path)))
    plain = replay(trace, 2, 1, "easy")
    zero = compare(trace, 2, 1, "easy", PowerModel(10**9, 30))[0]  # never powered down
    assert plain.jobs == zero.jobs


def test_cli_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(_trace(tmp_path))
    power = ["--suspend-time", "50", "--resume-time", "30"]
    assert corral(["sim", trace, *power]) == 0
    text = capsys.readouterr().out
    assert "average wait          20.0 s" in text  # the replay with power saving
    assert "powered down          0.0 node-hours of 0.1 (22.92 %)" in text
    assert "resumes               3 nodes, for 2 jobs" in text
    assert "mean wait             20.0 s with, 0.0 s without (added +20.0 s a job)" in text
    assert "p95 wait              30 s with, 0 s without (added per job, p95: +30 s)" in text
    assert corral(["sim", trace, "--json", *power]) == 0
    out = json.loads(capsys.readouterr().out)["power_saving"]
    assert out["powered_down_share"] == pytest.approx(110 / 480, abs=1e-6)
    assert (out["mean_added_wait_s"], out["p95_added_wait_s"]) == (20, 30)


def test_cli_refuses_half_or_bad_power_options(tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=c\nNodeName=n[1-2] CPUs=1\n")
    cases = [
        (("--suspend-time", "50"), "--suspend-time and --resume-time go together"),
        (("--resume-time", "30"), "--suspend-time and --resume-time go together"),
        (("--suspend-time", "0", "--resume-time", "3"), "--suspend-time wants a positive"),
        (("--suspend-time", "5", "--resume-time", "-3"), "--resume-time wants seconds"),
        (("--suspend-time", "5", "--resume-time", "3", "--policy", "fcfs,easy"), "not with -f"),
        (("--suspend-time", "5", "--resume-time", "3", "-f", str(conf)), "not with -f"),
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
        assert result.stdout == ""
