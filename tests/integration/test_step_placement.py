"""Step placement end to end: Slurm's block layout over the CPUs held, -m cyclic
and arbitrary, -r, --multi-prog, --cpu-bind and the task variables each task sees, in one two-node
job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Cluster]:
    """Two emulated nodes (the test machine's CPUs each, 2 here and in CI)."""
    c = Cluster(tmp_path, nodes=2, settings=("KillWait=2",))
    try:
        yield c.start()
    finally:
        c.stop()


def test_tasks_are_laid_out_and_numbered_as_slurm_does(two: Cluster) -> None:
    (two.dir / "mp.conf").write_text(
        "# the even tasks\n0,2  echo even %t %o\n\n1 echo 'one task' %t\n* echo rest %t %o\n"
    )
    (two.dir / "bad.conf").write_text("0-1 echo a\n1 echo b\n")
    vars_ = "$SLURM_NODEID $SLURM_LOCALID $SLURM_GTIDS $SLURM_STEP_TASKS_PER_NODE"
    script = (
        "#!/bin/bash\n"
        "echo batch=$SLURM_TASKS_PER_NODE\n"
        f"srun -l -n3 sh -c 'echo block {vars_} $SLURM_DISTRIBUTION $SLURM_CPU_BIND_TYPE'\n"
        f"srun -l -n3 -m cyclic sh -c 'echo cyclic {vars_} $SLURM_DISTRIBUTION'\n"
        "srun -l -r1 -n1 sh -c 'echo relative $SLURMD_NODENAME'\n"
        "srun -l -m arbitrary -w node2,node1,node2 sh -c 'echo arbitrary $SLURMD_NODENAME'\n"
        "srun -l --multi-prog mp.conf\n"
        "srun --multi-prog bad.conf; echo bad=$?\n"
        "srun -m bogus true; echo dist=$?\n"
        "srun -l -N1 -n2 --cpu-bind=verbose,cores sh -c "
        "'echo bind $(taskset -pc $$ | cut -d: -f2) $SLURM_CPU_BIND'\n"
        "srun -l -N1 -n1 --cpu-bind=map_cpu:9 true; echo map=$?\n"
    )
    path = two.dir / "job.sh"
    path.write_text(script)
    job_id = two.sbatch("-N2", "-n4", "-D", str(two.dir), "-o", "out.txt", str(path))
    job = two.wait_done(job_id, 60)
    out = (two.dir / "out.txt").read_text()
    assert job["state"] == "COMPLETED", out
    lines = set(out.splitlines())
    assert "batch=2(x2)" in lines
    # block over 2+2 CPUs: 3 tasks are 2 and 1, numbered node by node
    assert "0: block 0 0 0,1 2,1 block none" in lines
    assert "1: block 0 1 0,1 2,1 block none" in lines
    assert "2: block 1 0 2 2,1 block none" in lines
    # cyclic: task i on node i mod 2
    assert "0: cyclic 0 0 0,2 2,1 cyclic" in lines
    assert "1: cyclic 1 0 1 2,1 cyclic" in lines
    assert "2: cyclic 0 1 0,2 2,1 cyclic" in lines
    assert "0: relative node2" in lines
    assert {"0: arbitrary node2", "1: arbitrary node1", "2: arbitrary node2"} <= lines
    assert {"0: even 0 0", "2: even 2 1", "1: one task 1", "3: rest 3 3"} <= lines
    assert "srun: error: Duplicate record for task 1" in lines
    assert "srun: error: Line 2 of configuration file bad.conf invalid" in lines
    assert "bad=1" in lines
    assert "srun: error: Invalid --distribution specification" in lines
    assert "dist=255" in lines
    # --cpu-bind=cores: one core each, reported as Slurm's task/affinity does
    assert "0: bind 0 verbose,mask_cpu:0x1,0x2" in lines
    assert "1: bind 1 verbose,mask_cpu:0x1,0x2" in lines
    assert any(line.startswith("1: cpu-bind-cores=MASK - node1, task  1  1 [") for line in lines)
    assert any(line.endswith("]: mask 0x2 set") for line in lines)
    assert (
        f"srun: error: Unable to create step for job {job_id}: Unable to satisfy cpu bind request"
        in lines
    )
    assert "map=1" in lines
