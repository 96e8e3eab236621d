"""sbatch --hint end to end on a node of one core of two threads: the job holds the whole
core (scontrol's NumCPUs and CPU_IDs), uses one thread of it (SLURM_JOB_CPUS_PER_NODE,
SLURM_CPUS_ON_NODE, as Slurm 22.05 tells such a job), and its steps read SLURM_HINT; an
unknown hint is refused in Slurm's words."""

from __future__ import annotations

from collections.abc import Callable

from tests.integration.cluster import Cluster

SETTINGS = ("NodeName=DEFAULT Sockets=1 CoresPerSocket=1 ThreadsPerCore=2",)
SHOW = "scontrol show job -d $SLURM_JOB_ID | grep -oE 'NumCPUs=[0-9]+|T=[0-9*:]+|CPU_IDs=[^ ]+'"


def test_a_nomultithread_job_holds_the_core_and_uses_one_thread(
    make_cluster: Callable[..., Cluster],
) -> None:
    ht = make_cluster(nodes=1, settings=SETTINGS)
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
