"""MPI jobs as HPC users run them: an MPICH program under ``srun --mpi=pmi2`` (PMI-1
over PMI_FD, each fence through srun) on four nodes, and OpenMPI's ``mpirun`` in a
batch job, starting its daemons with srun as under Slurm."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from corral import errors
from corral.errors import SlurmError
from tests.integration import mpiprog
from tests.integration.cluster import Cluster


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("mpi"), nodes=4, settings=("KillWait=2",))
    try:
        yield c.start()
    finally:
        c.stop()


def test_mpich_ranks_wire_up_through_srun_on_four_nodes(four: Cluster) -> None:
    program = mpiprog.build("mpich", four.dir)
    run = four.run("srun", "-N4", "-n8", "--mpi=pmi2", str(program))
    ranks = mpiprog.ranks(run.stdout)
    assert sorted(ranks) == list(range(8)), run
    # Every rank sees the whole world, and the sum needs every other rank's address.
    assert {(size, total) for size, total, _ in ranks.values()} == {(8, sum(range(8)))}
    assert {rank: node for rank, (_, _, node) in ranks.items()} == {
        rank: f"node{rank // 2 + 1}" for rank in range(8)
    }
    # Without PMI each task is a world of its own, as under Slurm's mpi/none.
    alone = four.run("srun", "-N2", "-n2", "--mpi=none", str(program)).stdout
    worlds = sorted((m[1], m[2], m[3], m[4]) for m in mpiprog.LINE.finditer(alone))
    assert worlds == [("0", "1", "0", "node1"), ("0", "1", "0", "node2")], alone
    # A type srun would refuse is refused by the controller too, for any other client.
    with pytest.raises(SlurmError) as refused:
        four.client.call("StepCreate", {"job_id": 1, "argv": ["true"], "mpi": "pmix"})
    assert refused.value.code == errors.ESLURM_NOT_SUPPORTED


def test_openmpi_mpirun_in_a_batch_job_starts_its_daemons_with_srun(four: Cluster) -> None:
    program = mpiprog.build("openmpi", four.dir)
    out = four.dir / "ompi.out"
    # Every "node" here is this one host: OpenMPI's shared-memory transports would take
    # ranks on two of them for neighbours and fail, so TCP carries the messages.
    script = four.dir / "ompi.sh"
    script.write_text(
        "#!/bin/sh\nexport OMPI_MCA_btl=self,tcp\n"
        f"exec mpirun.openmpi --allow-run-as-root -np 4 {program}\n"
    )
    job = four.sbatch("-N2", "-n4", "-o", str(out), str(script))
    assert four.wait_done(job, timeout=60)["state"] == "COMPLETED", out.read_text()
    ranks = mpiprog.ranks(out.read_text())
    assert ranks == {
        0: (4, 6, "node1"),
        1: (4, 6, "node1"),
        2: (4, 6, "node2"),
        3: (4, 6, "node2"),
    }, out.read_text()
