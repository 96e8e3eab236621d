"""Flavor fungibility on a live cluster (issue 18, point 2): a job that accepts either of
two GPU types starts on the second when the first is busy, and ``scontrol show job``
and ``corral why`` say which it got and why; one that can get neither waits for the
one expected soonest; bad alternatives and preferences are refused in Slurm's words."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.integration.cluster import Cluster

#: One node with one GPU of each type; gres.conf names their (absent) device files, so
#: the GPU a job gets shows in CUDA_VISIBLE_DEVICES as its index.
SETTINGS = (
    "GresTypes=gpu",
    "NodeName=DEFAULT Gres=gpu:h100:1,gpu:a100:1",
    "KillWait=1",
    "SchedulerParameters=bf_interval=1",
)
EITHER = "--gres=gpu:h100:1|gpu:a100:1"


def test_a_busy_first_choice_starts_the_job_on_its_second(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    (cluster.dir / "gres.conf").write_text(
        f"Name=gpu Type=h100 File={cluster.dir}/gpu0\nName=gpu Type=a100 File={cluster.dir}/gpu1\n"
    )
    cluster.start()
    busy = cluster.sbatch("--gres=gpu:h100:1", "-t", "10", "--wrap", "sleep 120")
    cluster.wait_state(busy, {"RUNNING"})
    out = cluster.dir / "flavor.out"
    job = cluster.sbatch(
        EITHER, "-t", "10", "-o", str(out), "--wrap", "echo $CUDA_VISIBLE_DEVICES; sleep 120"
    )
    cluster.wait_state(job, {"RUNNING"})
    show = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "   TresPerNode=gres/gpu:a100:1\n" in show, show
    assert (
        "   Flavor=gpu:a100:1 (2 of 2: the ones before it cannot start now; gpu:h100:1 Resources)\n"
    ) in show, show
    cluster.wait_for(lambda: out.exists() and out.read_text().endswith("\n"), 10, "no output")
    assert out.read_text() == "1\n"  # the a100, gres.conf's second GPU
    why = cluster.run("corral", "why", str(job)).stdout
    assert "is RUNNING on node1, not pending.\n  Flavor: gpu:a100:1 (2 of 2" in why, why

    # Both busy: a third waits, for the one expected to start soonest (the h100's job
    # ends first), and corral why names both alternatives.
    third = cluster.sbatch(EITHER, "-t", "5", "--wrap", "true")
    cluster.wait_for(lambda: cluster.job(third)["start_time"] > 0, 15, "no expected start")
    doc = json.loads(cluster.run("corral", "why", "--json", str(third)).stdout)
    assert [(f["label"], f["chosen"]) for f in doc["flavors"]] == [
        ("gpu:h100:1", True),
        ("gpu:a100:1", False),
    ], doc
    assert doc["flavors"][0]["outcome"] == "awaited" and doc["flavors"][0]["start"]
    pending = cluster.run("scontrol", "show", "job", str(third)).stdout
    assert "   TresPerNode=gres/gpu:h100:1|gres/gpu:a100:1\n" in pending, pending
    assert "   Flavor=gpu:h100:1 (1 of 2: expected to start soonest; " in pending, pending
    cluster.run("scancel", str(busy), str(job), str(third))


def test_bad_alternatives_and_preferences_are_refused(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    refusals = {
        "--gres=gpu:h100:1|gpu:v100:1": "Invalid generic resource (gres) specification",
        "--gres=gpu:h100:1|gpu:a100:4": "Requested node configuration is not available",
        "--prefer=nosuchfeature": "Invalid feature specification",
    }
    for option, words in refusals.items():
        done = cluster.run("sbatch", option, "--wrap", "true", check=False)
        assert done.returncode == 1, (option, done.stdout)
        assert done.stderr == f"sbatch: error: Batch job submission failed: {words}\n", option
