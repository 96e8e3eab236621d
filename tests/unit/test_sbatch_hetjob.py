"""sbatch's heterogeneous jobs: components from ``#SBATCH hetjob`` lines and from ``:``
on the command line, matched by position; the options Slurm propagates carried to
the next component, the others starting afresh; only the first component has the
script. The controller is a fake that records the request."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cli import boundary
from cli.sbatch.submission import sbatch

SCRIPT = """#!/bin/sh
#SBATCH -J het -n 2 -t 5 -p debug
#SBATCH hetjob
#SBATCH -n 3 --mem=100
hostname
"""


class Recorder:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply: dict[str, Any] = {"job_id": 7, "cluster": "c"}

    def call(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        assert method == "Submit"
        self.requests.append(request)
        return self.reply


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Recorder:
    fake = Recorder()
    monkeypatch.setattr(boundary, "connect", lambda: fake)
    for name in list(os.environ):
        if name.startswith("SBATCH_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "het.sh").write_text(SCRIPT)
    return fake


def test_script_components(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    assert sbatch(["het.sh"]) == 0
    assert capsys.readouterr().out == "Submitted batch job 7\n"
    (request,) = recorder.requests
    first, (second,) = request["spec"], request["het_components"]
    assert (first["num_tasks"], second["num_tasks"]) == (2, 3)
    assert "mem_per_node" not in first and second["mem_per_node"] == 100
    # Propagated: the name, the time limit, the partition; the script is the first's alone.
    assert second["name"] == "het" and second["time_limit"] == 5
    assert second["partitions"] == ["debug"]
    assert first["script"] == SCRIPT and second["script"] == ""


def test_command_line_components_override_the_script_by_position(recorder: Recorder) -> None:
    assert sbatch(["-n", "4", ":", "-n", "1", "-J", "other", ":", "-N", "2", "het.sh"]) == 0
    (request,) = recorder.requests
    specs = [request["spec"], *request["het_components"]]
    assert [s.get("num_tasks") for s in specs] == [4, 1, None]  # the third: its -N alone
    assert [s["name"] for s in specs] == ["het", "other", "other"]
    assert specs[2]["min_nodes"] == 2
    assert specs[2]["mem_per_node"] == 100  # --mem propagates (as a real 22.05 sbatch's)


def test_a_plain_job_sends_no_components(recorder: Recorder, tmp_path: Path) -> None:
    assert sbatch(["--wrap", "true"]) == 0
    assert recorder.requests[0]["het_components"] == []


def test_test_only_asks_for_every_component_and_prints_one_line(
    recorder: Recorder, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slurm 22.05 prints one line for the whole heterogeneous job: its processors
    summed, its nodes merged, no partition (measured on a real 22.05)."""
    monkeypatch.setenv("TZ", "UTC")
    recorder.reply = {"job_id": 7, "start_time": 1796014614, "num_cpus": 5, "nodes": "n[1,3]"}
    assert sbatch(["--test-only", "het.sh"]) == 0
    (request,) = recorder.requests
    assert request["test_only"] is True and len(request["het_components"]) == 1
    assert capsys.readouterr() == (
        "",
        "sbatch: Job 7 to start at 2026-11-30T04:56:54 using 5 processors on n[1,3]\n",
    )
