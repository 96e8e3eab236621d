"""sbatch -m end to end: the job is told its distribution as Slurm's sbatch tells it, its
steps take it as their default, and a bad one is refused with Slurm's words and status."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.cluster import Cluster


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("dist"), nodes=2)
    try:
        yield c.start()
    finally:
        c.stop()


def test_a_jobs_distribution_is_its_steps_default(two: Cluster) -> None:
    script = (
        "#!/bin/bash\n"
        "echo job=$SLURM_DISTRIBUTION\n"
        "srun -l -n3 sh -c 'echo step $SLURM_NODEID $SLURM_DISTRIBUTION'\n"
    )
    path = two.dir / "dist.sh"
    path.write_text(script)
    job_id = two.sbatch(
        "-N2", "-n4", "-m", "cyclic:*", "-D", str(two.dir), "-o", "d.out", str(path)
    )
    job = two.wait_done(job_id, 60)
    out = (two.dir / "d.out").read_text()
    assert job["state"] == "COMPLETED", out
    lines = set(out.splitlines())
    assert "job=cyclic:cyclic" in lines
    # cyclic: task i on node i mod 2 (block would put tasks 0 and 1 on node 0)
    assert {
        "0: step 0 cyclic:cyclic",
        "1: step 1 cyclic:cyclic",
        "2: step 0 cyclic:cyclic",
    } <= lines


def test_a_distribution_slurm_refuses_is_refused(two: Cluster) -> None:
    refused = two.run("sbatch", "-m", "bogus", "--wrap", "true", check=False)
    assert refused.returncode == 255
    assert refused.stderr == "sbatch: error: Invalid --distribution specification\n"
