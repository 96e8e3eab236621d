"""Team queues made visible on a live cluster (test_queues.py's two teams): while
team B reclaims its guarantee from team A, ``corral queues -P``, ``corral why``,
``scontrol show job``, ``GET /corral/v1/queues`` and the Prometheus gauges say
who holds, borrows and lends what, and why B's extra job waits."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.integration.cluster import Cluster, free_port
from tests.integration.rest import Rest
from tests.integration.test_metrics import _scrape
from tests.integration.test_queues import QUEUES, SETTINGS, running
from tests.integration.test_restd import token_for

GPU = "gres/gpu"


def queues_p(c: Cluster) -> dict[tuple[str, str], dict[str, str]]:
    """``corral queues -P`` by (queue, resource): each line's columns by title."""
    lines = c.run("corral", "queues", "-P").stdout.splitlines()
    titles = lines[0].split("|")
    rows = [dict(zip(titles, line.split("|"), strict=True)) for line in lines[1:]]
    return {(row["Queue"].strip(), row["Resource"]): row for row in rows}


def _numbers(row: dict[str, str], *titles: str) -> tuple[int, ...]:
    return tuple(int(row[t]) for t in titles)


def test_queues_why_rest_and_metrics_while_team_b_reclaims(make_cluster: Any) -> None:
    port = free_port()
    metrics = ("MetricsType=metrics/openmetrics", f"MetricsParameters=port={port}")
    c: Cluster = make_cluster(nodes=4, settings=(*SETTINGS, *metrics), start=False)
    Path(os.path.dirname(c.conf), "queues.conf").write_text(QUEUES)
    c.start()
    a = [c.sbatch("-A", "teama", "--gres=gpu:1", "--wrap", "sleep 300") for _ in range(8)]
    c.wait_for(lambda: len(running(c, a)) == 8, 30, "team A did not borrow all 8 GPUs")
    shown = queues_p(c)
    assert set(shown) == {("root", GPU), ("teama", GPU), ("teamb", GPU)}, shown
    titles = ("Guarantee", "Allocated", "Borrowed", "Lent")
    assert _numbers(shown["teama", GPU], *titles) == (4, 8, 4, 0)
    assert _numbers(shown["teamb", GPU], *titles) == (4, 0, 0, 4)
    assert shown["teama", GPU]["RunJobs"] == "8" and shown["teamb", GPU]["Limit"] == ""
    assert "Queue=teama" in c.run("scontrol", "show", "job", str(a[0])).stdout
    listed = c.run("squeue", "-h", "-j", str(a[0]), "-O", "JobID,Queue").stdout.split()
    assert listed == [str(a[0]), "teama"], listed
    # B takes its guarantee back; its third job cannot borrow (Preemptible=no) and waits.
    b = [c.sbatch("-A", "teamb", "--gres=gpu:2", "--wrap", "sleep 300") for _ in range(2)]
    c.wait_for(lambda: len(running(c, b)) == 2, 30, "team B did not get its guarantee back")
    third = c.sbatch("-A", "teamb", "--gres=gpu:1", "--wrap", "sleep 1")
    c.wait_for(lambda: c.job(third)["reason"] == "QueueGuarantee", 20, "B's third job did not wait")
    c.wait_for(lambda: len(running(c, a)) == 4, 20, "A's over-quota jobs did not leave")
    shown = queues_p(c)
    assert _numbers(shown["teama", GPU], *titles) == (4, 4, 0, 0)
    assert _numbers(shown["teamb", GPU], *titles, "Pending", "PendJobs") == (4, 4, 0, 0, 1, 1)
    assert _numbers(shown["root", GPU], "Guarantee", "Allocated") == (8, 8)
    why = c.run("corral", "why", str(third)).stdout
    assert "Queue teamb: gres/gpu: guarantee 4, fair share" in why, why
    assert "holds 4." in why and "it would borrow gres/gpu=1 above the guarantee" in why, why
    assert "cannot be preempted (Preemptible=no)" in why, why
    doc = json.loads(c.run("corral", "why", "--json", str(third)).stdout)
    assert doc["queue"]["resources"][0]["would_borrow"] == 1
    # The same numbers over REST and as Prometheus gauges.
    rest = Rest(c.start_restd(), token_for(c, "root"))
    status, reply = rest.call("GET", "/corral/v1/queues")
    assert status == 200 and reply["errors"] == [], reply
    served = {q["name"]: q for q in reply["queues"]["queues"]}
    assert served["teamb"]["resources"][0]["allocated"] == 4
    assert served["teamb"]["parent"] == "root" and served["root"]["parent"] is None
    printed = json.loads(c.run("corral", "queues", "--json").stdout)
    assert [q["name"] for q in printed["queues"]] == ["root", "teama", "teamb"]
    samples = _scrape(port)
    allocated = {
        labels["queue"]: value
        for labels, value in samples["corral_queue_allocated"]
        if labels["resource"] == GPU
    }
    assert allocated == {"root": 8, "teama": 4, "teamb": 4}
    deserved = {lab["queue"]: v for lab, v in samples["corral_queue_deserved"]}
    assert deserved["teamb"] == 4
    c.run("scancel", *map(str, [*a, *b, third]))
