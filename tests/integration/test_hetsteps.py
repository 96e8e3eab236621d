"""scancel, sstat and sattach on a step spanning heterogeneous job components, on a
real two-node cluster, each as a real Slurm 22.05 answered (slurmctld and two
``slurmd -N`` on one host, measured with a step like this one):

* ``scancel L.S`` ends every component's part, done by the controller (srun is
  stopped meanwhile, so it cannot end the rest itself); ``scancel C.S`` of a later
  component's job id ends its part alone; a signal (``-s USR1``) reaches only the
  part named; ``L+1.S`` names the leader's step.
* ``sstat -j L.S`` shows component 0's part, ``-j C.S`` component C's, each under
  the job id named; ``L+1.S`` is ``L.S``.
* ``sattach C.S`` shows component C's part, its tasks labelled from 0 in the part
  (their SLURM_PROCID is the whole step's); ``--layout`` the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster, command

SETTINGS = (
    "KillWait=2",
    "JobAcctGatherType=jobacct_gather/linux",
    "JobAcctGatherFrequency=task=1,energy=0",
)
#: Each task notes its pid, says when USR1 comes, and ticks with its global rank.
TASK = (
    'echo $$ > pid.$SLURM_PROCID; trap "echo got USR1 $SLURM_PROCID" USR1; '
    "while :; do echo tick $SLURM_PROCID; sleep 0.3; done"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("hetsteps"), nodes=2, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


class Spanning:
    """A batch heterogeneous job (component 0: one task, component 1: two, each a
    node of its own) whose script runs one srun spanning both: step 0 in each."""

    def __init__(self, cluster: Cluster, work: Path) -> None:
        self.cluster, self.work = cluster, work
        work.mkdir()
        script = work / "het.sh"
        script.write_text(
            "#!/bin/sh\n#SBATCH --exclusive -N1 -n1\n#SBATCH hetjob\n#SBATCH --exclusive -N1 -n2\n"
            f"srun -l --het-group=0,1 sh -c '{TASK}' > step.out 2>&1 &\n"
            "echo $! > srun.pid\nwait\n"
        )
        self.leader = cluster.sbatch("-D", str(work), "-o", "/dev/null", str(script))
        self.other = self.leader + 1
        cluster.wait_for(
            lambda: all((work / f"pid.{rank}").exists() for rank in range(3)),
            60,
            "the spanning step did not start",
        )
        self.pids = [int((work / f"pid.{rank}").read_text()) for rank in range(3)]
        self.srun = int((work / "srun.pid").read_text())

    def output(self) -> str:
        return (self.work / "step.out").read_text()

    def node(self, component: int) -> str:
        return str(self.cluster.job(f"{self.leader}+{component}")["nodes"])

    def end(self) -> None:
        self.cluster.run("scancel", str(self.leader))
        self.cluster.wait_done(f"{self.leader}+0")


def test_scancel_of_a_spanning_step(cluster: Cluster, tmp_path: Path) -> None:
    het = Spanning(cluster, tmp_path / "cancel")
    leader, other = het.leader, het.other
    # A signal reaches the part named only; L+1.0 names the leader's step.
    cluster.run("scancel", "-s", "USR1", f"{leader}.0")
    cluster.wait_for(lambda: "got USR1 0" in het.output(), 30, "task 0 got no USR1")
    said = cluster.run("scancel", "-v", "-s", "USR1", f"{leader}+1.0")
    assert said.stderr == f"scancel: Signal 10 to step {leader}.0\n", said.stderr
    cluster.wait_for(lambda: het.output().count("got USR1 0") == 2, 30, "no second USR1")
    assert "got USR1 1" not in het.output() and "got USR1 2" not in het.output()
    cluster.run("scancel", "-s", "USR1", f"{other}.0")
    cluster.wait_for(
        lambda: "got USR1 1" in het.output() and "got USR1 2" in het.output(),
        30,
        "component 1's tasks got no USR1",
    )
    assert het.output().count("got USR1 0") == 2
    # Cancelling the leader's part ends every part, srun stopped meanwhile: the
    # controller's doing, as slurmctld's.
    os.kill(het.srun, signal.SIGSTOP)
    try:
        cluster.run("scancel", f"{leader}.0")
        cluster.wait_for(
            lambda: not any(map(alive, het.pids)), 30, "a part of the step outlived its cancel"
        )
    finally:
        os.kill(het.srun, signal.SIGCONT)
    het.end()


def test_scancel_of_a_later_components_part_ends_it_alone(cluster: Cluster, tmp_path: Path) -> None:
    het = Spanning(cluster, tmp_path / "part")
    os.kill(het.srun, signal.SIGSTOP)
    try:
        cluster.run("scancel", f"{het.other}.0")
        cluster.wait_for(
            lambda: not alive(het.pids[1]) and not alive(het.pids[2]), 30, "part 1 lives on"
        )
        assert alive(het.pids[0])
    finally:
        os.kill(het.srun, signal.SIGCONT)
    het.end()


def test_sstat_of_a_spanning_step(cluster: Cluster, tmp_path: Path) -> None:
    het = Spanning(cluster, tmp_path / "sstat")
    leader, other = het.leader, het.other

    def rows(text: str) -> list[str]:
        fields = "JobID,NTasks,Nodelist"
        done = cluster.run("sstat", "-P", "-n", "-o", fields, "-j", text, check=False)
        return done.stdout.splitlines() if done.returncode == 0 else []

    cluster.wait_for(lambda: bool(rows(f"{other}.0")), 30, "no samples of component 1's part")
    first = [f"{leader}.0|1|{het.node(0)}"]
    assert rows(f"{leader}.0") == first
    assert rows(f"{other}.0") == [f"{other}.0|2|{het.node(1)}"]
    assert rows(f"{leader}+1.0") == first  # as 22.05's sstat reads it
    assert rows(f"{leader}+1") == first
    het.end()


def _attached(cluster: Cluster, *args: str) -> set[str]:
    """The lines a real sattach prints over a few ticks, then detached (SIGINT)."""
    with subprocess.Popen(
        [*command("sattach"), *args],
        env=cluster.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    ) as attached:
        time.sleep(3)
        attached.send_signal(signal.SIGINT)
        out, err = attached.communicate(timeout=30)
    assert (attached.returncode, err) == (0, ""), err
    return set(out.splitlines())


def test_sattach_of_a_spanning_step(cluster: Cluster, tmp_path: Path) -> None:
    het = Spanning(cluster, tmp_path / "sattach")
    leader, other = het.leader, het.other
    layout = cluster.run("sattach", "--layout", f"{other}.0").stdout
    node = het.node(1)
    assert layout == (
        f"Job step layout:\n\t2 tasks, 1 nodes ({node})\n\n\tNode 0 ({node}), 2 task(s): 0 1 \n"
    )
    # Labelled from 0 in the part, as 22.05's sattach; the ranks are the whole step's.
    assert _attached(cluster, "-l", f"{other}.0") == {"0: tick 1", "1: tick 2"}
    assert _attached(cluster, "-l", f"{leader}+1.0") == {"0: tick 0"}  # the leader's part
    het.end()
