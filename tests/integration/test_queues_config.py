"""Team queues on a live cluster: the preemption delay before a reclaim, and
queues.conf changed or broken while jobs run (scontrol reconfigure)."""

from __future__ import annotations

import os
import time
from pathlib import Path

#: Two nodes of 2 GPUs and as many CPUs as this host (2 on CI's).
SETTINGS = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:2", "KillWait=1")
QUEUES = """\
QueueName=teama Accounts=teama Guarantee=gres/gpu=2
QueueName=teamb Accounts=teamb Guarantee=gres/gpu=2 PreemptionDelay=0:04
"""


def running(c, ids: list[int]) -> list[int]:  # type: ignore[no-untyped-def]
    return [j["job_id"] for j in c.jobs(*ids) if j["state"] == "RUNNING"]


def test_reclaim_waits_for_the_preemption_delay_and_survives_a_reconfigure(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=2, settings=SETTINGS, start=False)
    queues = Path(os.path.dirname(c.conf), "queues.conf")
    queues.write_text(QUEUES)
    c.start()
    a = [c.sbatch("-A", "teama", "--gres=gpu:1", "--wrap", "sleep 300") for _ in range(4)]
    c.wait_for(lambda: len(running(c, a)) == 4, 30, "team A did not borrow all 4 GPUs")
    submitted = time.monotonic()
    b = c.sbatch("-A", "teamb", "--gres=gpu:2", "--wrap", "sleep 300")
    c.wait_for(lambda: len(running(c, a)) < 4, 30, "nothing was reclaimed for team B")
    waited = time.monotonic() - submitted
    # PreemptionDelay=0:04 (4 s) from its eligibility, then the next pass (at most a few
    # seconds). Eligibility is kept in whole seconds, as Slurm keeps it, so the delay
    # can end up to a second early.
    assert 3 <= waited <= 12, waited
    c.wait_state(b, {"RUNNING"})
    # A broken queues.conf is refused with its file and line; nothing in flight changes.
    queues.write_text(QUEUES + "QueueName=teamc Parent=nosuch\n")
    refused = c.run("scontrol", "reconfigure", check=False)
    assert refused.returncode != 0
    assert f"{queues}:3:" in refused.stderr, refused.stderr
    assert c.job(b)["state"] == "RUNNING" and len(running(c, a)) == 2
    # A valid change applies to the next pass: team A may now borrow nothing more.
    limited = "Guarantee=gres/gpu=2 Limit=gres/gpu=2\n"
    queues.write_text(QUEUES.replace("Guarantee=gres/gpu=2\n", limited, 1))
    c.run("scontrol", "reconfigure")
    c.run("scancel", str(b))
    c.wait_done(b)
    waiting = [j for j in c.jobs(*a) if j["state"] == "PENDING"]
    assert waiting, c.jobs(*a)
    c.wait_for(
        lambda: all(c.job(j["job_id"])["reason"] == "QueueLimit" for j in waiting),
        20,
        "team A's requeued jobs did not wait for their queue's new Limit",
    )
    assert len(running(c, a)) == 2
    c.run("scancel", *map(str, a))
