"""bench/liveagents.py at a size CI can afford: 200 nodes over two real agents, 2,000 jobs.

No timing is asserted (the machine's load decides those); the run must report every
figure with a value, keep the queue at its size and see no node go down or stop
responding while heartbeats flow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

FIGURES = (
    "controller_rss",
    "main_pass",
    "backfill_pass",
    "heartbeat",
    "submit_rate",
    "squeue",
    "sinfo",
    "nodes_down",
)


def test_liveagents_reports_every_figure_and_no_node_down() -> None:
    args = ["--nodes", "200", "--per-agent", "100", "--jobs", "2000", "--baseline-nodes", "0"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "liveagents.py"), *args, "--settle", "12"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    figures = out["figures"]
    assert set(figures) == {f"{name}_200n_2000j" for name in FIGURES}
    for name, fig in figures.items():
        assert fig["value"] is not None, (name, fig)
    assert figures["nodes_down_200n_2000j"]["value"] == 0, figures["nodes_down_200n_2000j"]
    assert figures["nodes_down_200n_2000j"]["not_responding_log_lines"] == 0
    assert figures["heartbeat_200n_2000j"]["heartbeats"] > 0
    assert figures["heartbeat_200n_2000j"]["nodes_per_agent"] == 100
    assert figures["squeue_200n_2000j"]["pending"] == 1999  # the queue stayed at its size
    assert figures["backfill_pass_200n_2000j"]["depth"] == 1000
    assert figures["controller_rss_200n_2000j"]["value"] > 0
