"""--cores-per-socket and -B end to end on a node of two sockets of one core each (the
test machine's two CPUs): a task per socket, scontrol's ReqB:S:C:T and Socks/Node, a
job asking both sockets waits while one socket's core is held, and what the node
cannot have is refused in Slurm 22.05's words (measured there on nodes of two 4-core
sockets: tests/unit/test_socket_core_fit.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.integration.cluster import Cluster

SETTINGS = ("NodeName=DEFAULT Sockets=2 CoresPerSocket=1 ThreadsPerCore=1",)
SHOW = (
    "scontrol show job -d $SLURM_JOB_ID"
    " | grep -oE 'NumTasks=[0-9]+|T=[0-9*:]+|Socks/Node=[^ ]+|CPU_IDs=[^ ]+'"
)

pytestmark = pytest.mark.skipif(
    os.cpu_count() != 2, reason="the test cluster's node has the machine's CPUs: two wanted"
)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("sockets"), nodes=1, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def test_a_task_per_socket_shown_as_slurm_shows_it(two: Cluster) -> None:
    out_file = two.dir / "b.out"
    wrap = f"echo ntasks=$SLURM_NTASKS; {SHOW}"
    job_id = two.sbatch("-N1", "-B", "2:1", "-o", str(out_file), "--wrap", wrap)
    state = two.wait_done(job_id, 60)["state"]
    words = out_file.read_text().split()
    assert state == "COMPLETED", words
    assert words[0] == "ntasks=2", words
    assert {"NumTasks=2", "T=0:0:1:*", "Socks/Node=2", "CPU_IDs=0-1"} <= set(words), words


@pytest.mark.parametrize(
    ("given", "shown"),
    [("0", {"T=0:0:*:*", "Socks/Node=0"}), ("1:0", {"T=0:0:0:*", "Socks/Node=1"})],
)
def test_a_count_given_as_0_is_shown_as_0(two: Cluster, given: str, shown: set[str]) -> None:
    """As Slurm 22.05 showed ``-B 0`` and ``-B 1:0``: one task, the 0 kept apart from
    "any" (``*``)."""
    out_file = two.dir / f"zero-{given}.out"
    job_id = two.sbatch("-N1", "-B", given, "-o", str(out_file), "--wrap", SHOW)
    state = two.wait_done(job_id, 60)["state"]
    words = out_file.read_text().split()
    assert state == "COMPLETED", words
    assert {"NumTasks=1", *shown} <= set(words), words


def test_both_sockets_wait_while_one_core_is_held(two: Cluster) -> None:
    with two.running("-N1", "-n1", "--wrap", "sleep 60"):
        # one task: it waits for a second socket with a free core, not for CPUs
        waiting = two.sbatch("-N1", "-n1", "-B", "2", "--wrap", "true")
        two.wait_for(lambda: two.job(waiting)["reason"] == "Resources", 30, "the -B 2 job to wait")
        assert two.job(waiting)["state"] == "PENDING"
        two.run("scancel", str(waiting))


@pytest.mark.parametrize("option", ["-B3", "-B1:2", "--cores-per-socket=2", "-B1:1:2"])
@pytest.mark.parametrize(
    ("prog", "failed"),
    [
        ("sbatch", "Batch job submission failed"),
        ("salloc", "Job submit/allocate failed"),
        ("srun", "Unable to allocate resources"),
    ],
)
def test_what_the_node_cannot_have_is_refused(
    two: Cluster, option: str, prog: str, failed: str
) -> None:
    args = ("--wrap", "true") if prog == "sbatch" else ("true",)
    refused = two.run(prog, option, *args, check=False)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"{prog}: error: Socket, core and/or thread specification can not be satisfied\n"
        f"{prog}: error: {failed}: Requested node configuration is not available\n",
    )


def test_rest_takes_the_socket_counts_as_sbatch_sends_them(two: Cluster) -> None:
    """``POST /slurm/v0.0.42/job/submit`` with Slurm's job description counts
    ``sockets_per_node``, ``cores_per_socket`` and ``threads_per_core``: the job shows
    them as scontrol shows sbatch's ``-B 2:1:1`` (with ``tasks``: the gateway sets no
    task count of its own); a count no node has, or a T of 0, is refused as Slurm's
    controller refuses them. Slurm 22.05's slurmrestd (openapi/v0.0.38):
    ``cores_per_socket=2, sockets_per_node=1`` NumTasks=1 ReqB:S:C:T=0:0:2:*
    Socks/Node=1; ``threads_per_core=0`` error 2014, "Requested node configuration is
    not available"."""
    from tests.integration.rest import Rest
    from tests.integration.test_restd import V, job_desc, token_for

    rest = Rest(two.start_restd(), token_for(two, "root"))
    counts = {"set": True, "number": 1}
    desc = job_desc(
        two,
        tasks=2,
        sockets_per_node={"set": True, "number": 2},
        cores_per_socket=counts,
        threads_per_core=counts,
    )
    status, reply = rest.call("POST", f"{V}/job/submit", {"job": desc})
    assert status == 200, reply
    shown = two.run("scontrol", "show", "job", str(reply["job_id"])).stdout.split()
    assert {"NumTasks=2", "ReqB:S:C:T=0:0:1:1", "Socks/Node=2"} <= set(shown), shown
    two.run("scancel", str(reply["job_id"]))
    for field in ("cores_per_socket", "threads_per_core"):
        number = 0 if field == "threads_per_core" else 2
        bad = job_desc(two, **{field: {"set": True, "number": number}})
        status, reply = rest.call("POST", f"{V}/job/submit", {"job": bad})
        assert status == 400, (field, reply)
        assert "Requested node configuration is not available" in str(reply["errors"]), reply


def test_tasks_per_socket_take_a_core_of_each_socket(two: Cluster) -> None:
    """``--ntasks-per-socket=1``: two tasks on the node's two sockets, shown as
    NtasksPerN:B:S:C=0:0:1:* and SLURM_NTASKS_PER_SOCKET=1 in the batch job and in
    salloc's command (as Slurm 22.05 sets them); one socket's core held, a second
    such job of one task runs on the other one."""
    out_file = two.dir / "per-socket.out"
    wrap = f"echo $SLURM_NTASKS_PER_SOCKET; {SHOW}; scontrol show job $SLURM_JOB_ID"
    job_id = two.sbatch("-n2", "--ntasks-per-socket=1", "-o", str(out_file), "--wrap", wrap)
    state = two.wait_done(job_id, 60)["state"]
    words = out_file.read_text().split()
    assert state == "COMPLETED", words
    assert words[0] == "1", words
    assert {"NumTasks=2", "CPU_IDs=0-1", "NtasksPerN:B:S:C=0:0:1:*"} <= set(words), words
    env = two.run("salloc", "-n1", "--ntasks-per-socket=1", "env").stdout.splitlines()
    assert "SLURM_NTASKS_PER_SOCKET=1" in env, env
    with two.running("-n1", "--wrap", "sleep 60"):
        beside = two.dir / "beside.out"
        job_id = two.sbatch("-n1", "--ntasks-per-socket=1", "-o", str(beside), "--wrap", SHOW)
        assert two.wait_done(job_id, 60)["state"] == "COMPLETED"
        assert "CPU_IDs=1" in beside.read_text().split()
