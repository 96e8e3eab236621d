"""--hint end to end on a node of one core of two threads: a job holds the whole core
(scontrol's NumCPUs and CPU_IDs), uses one thread of it (SLURM_JOB_CPUS_PER_NODE,
SLURM_CPUS_ON_NODE, as Slurm 22.05 tells such a job), and its steps read SLURM_HINT;
salloc and srun outside a job ask the same; an unknown hint, and more threads of a core
than the node has, are refused in Slurm's words."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cli.sbatch.hintopts import DROPPED
from tests.integration.cluster import Cluster

SETTINGS = ("NodeName=DEFAULT Sockets=1 CoresPerSocket=1 ThreadsPerCore=2",)
SHOW = "scontrol show job -d $SLURM_JOB_ID | grep -oE 'NumCPUs=[0-9]+|T=[0-9*:]+|CPU_IDs=[^ ]+'"
TOLD = "echo cpus=$SLURM_JOB_CPUS_PER_NODE hint=$SLURM_HINT tpc=$SLURM_THREADS_PER_CORE"


@pytest.fixture(scope="module")
def ht(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("hint"), nodes=1, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def test_a_nomultithread_job_holds_the_core_and_uses_one_thread(ht: Cluster) -> None:
    told = "echo cpus=$SLURM_JOB_CPUS_PER_NODE on=$SLURM_CPUS_ON_NODE hint=$SLURM_HINT"
    wrap = f"{told} tpc=$SLURM_THREADS_PER_CORE; {SHOW}"
    out_file = ht.dir / "h.out"
    job_id = ht.sbatch("-n1", "--hint=nomultithread", "-o", str(out_file), "--wrap", wrap)
    state = ht.wait_done(job_id, 60)["state"]
    words = out_file.read_text().split()
    assert state == "COMPLETED", words
    assert words[:4] == ["cpus=1", "on=1", "hint=nomultithread", "tpc=1"], words
    assert {"NumCPUs=2", "T=0:0:*:1", "CPU_IDs=0-1"} <= set(words), words

    refused = ht.run("sbatch", "--hint=bogus", "--wrap", "true", check=False)
    assert (refused.returncode, refused.stderr) == (
        1,
        'sbatch: error: unrecognized --hint argument "bogus", see --hint=help\n',
    )


def test_salloc_and_srun_outside_a_job_ask_what_sbatch_asks(ht: Cluster) -> None:
    got = ht.run("salloc", "-Q", "-n1", "--hint=nomultithread", "sh", "-c", f"{TOLD}; {SHOW}")
    words = got.stdout.split()
    assert words[:3] == ["cpus=1", "hint=nomultithread", "tpc=1"], words
    assert {"NumCPUs=2", "T=0:0:*:1", "CPU_IDs=0-1"} <= set(words), words
    # memory_bound: one core of each socket (C=1); srun's tasks are not told the hint
    got = ht.run("srun", "-Q", "-n1", "--hint=memory_bound", "sh", "-c", f"{TOLD}; {SHOW}")
    words = got.stdout.split()
    assert words[:3] == ["cpus=1", "hint=", "tpc=1"], words
    assert {"NumCPUs=2", "T=0:0:1:1", "CPU_IDs=0-1"} <= set(words), words


def test_threads_per_core_above_the_nodes_is_refused_and_a_dropped_hint_said_under_v(
    ht: Cluster,
) -> None:
    for prog, failed in (
        ("sbatch", "Batch job submission failed"),
        ("salloc", "Job submit/allocate failed"),
        ("srun", "Unable to allocate resources"),
    ):
        args = ("--wrap", "true") if prog == "sbatch" else ("true",)
        refused = ht.run(prog, "--threads-per-core=3", *args, check=False)
        assert (refused.returncode, refused.stderr) == (
            1,
            f"{prog}: error: Socket, core and/or thread specification can not be satisfied\n"
            f"{prog}: error: {failed}: Requested node configuration is not available\n",
        )
    said = ht.run("salloc", "-v", "--hint=nomultithread", "--threads-per-core=1", "true")
    assert f"salloc: {DROPPED}\n" in said.stderr
    quiet = ht.run("srun", "--hint=nomultithread", "--threads-per-core=1", "true")
    assert DROPPED not in quiet.stderr
