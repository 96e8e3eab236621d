"""A StrictFIFO queue on a live cluster: team B's big job, which must borrow, holds
back B's small job (reason Priority, and ``corral why`` names the head) while team
A's jobs still start; once A leaves room, the big job starts first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.integration.cluster import Cluster
from tests.integration.test_queues import SETTINGS, running

QUEUES = """\
QueueName=teama Accounts=teama Guarantee=gres/gpu=4
QueueName=teamb Accounts=teamb Guarantee=gres/gpu=4 QueueingStrategy=StrictFIFO
"""


def test_a_strict_queues_head_holds_back_its_small_job(make_cluster: Any) -> None:
    c: Cluster = make_cluster(nodes=4, settings=SETTINGS, start=False)
    Path(os.path.dirname(c.conf), "queues.conf").write_text(QUEUES)
    c.start()
    a = [c.sbatch("-A", "teama", "--gres=gpu:1", "--wrap", "sleep 300") for _ in range(3)]
    c.wait_for(lambda: len(running(c, a)) == 3, 30, "team A's jobs did not start")
    # 6 GPUs: B would borrow 2 where A lends only the 1 it does not use.
    big = c.sbatch("-A", "teamb", "-N", "3", "--gres=gpu:2", "--wrap", "sleep 300")
    small = c.sbatch("-A", "teamb", "--gres=gpu:1", "--wrap", "sleep 300")
    c.wait_for(lambda: c.job(big)["reason"] == "QueueCohortFull", 20, "B's big job did not wait")
    c.wait_for(lambda: c.job(small)["reason"] == "Priority", 20, "B's small job did not wait")
    later = c.sbatch("-A", "teama", "--gres=gpu:1", "--wrap", "sleep 300")
    c.wait_for(lambda: running(c, [later]) == [later], 30, "team A's new job did not start")
    assert c.job(small)["state"] == "PENDING"
    user = c.job(small)["user"]
    why = c.run("corral", "why", str(small)).stdout
    assert (
        f"It waits behind job {big} ({user}), the head of its queue "
        "(QueueingStrategy=StrictFIFO), which waits: QueueCohortFull."
    ) in why, why
    c.run("scancel", *map(str, [*a, later]))
    c.wait_for(lambda: running(c, [big, small]) == [big, small], 60, "B's jobs did not start")
    c.run("scancel", str(big), str(small))
