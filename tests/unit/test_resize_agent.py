"""A resize through the agent's own code path (issue 18, point 3): ``ResizeJob`` in,
the runs on the nodes the job left ended, every other run's resize file written and
its signal sent once (``nodeagent/runs.py``, ``nodeagent/resizes.py``)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from corral.wire import corral_pb2 as pb
from nodeagent.resizes import script
from nodeagent.runs import RunTable
from nodeagent.spool import Spool
from tests.unit.test_steprunner import Srun
from tests.unit.test_steprunner_agent import ME, WAIT, Agent

RESIZED = pb.ResizeJob(
    job_id=7,
    nodes=["n1"],
    nodelist="n1",
    cpus_per_node="4",
    signal=signal.SIGWINCH,
    resize_time=1_700_000_000,
)


class TwoNodes(Agent):
    """The step harness's agent, serving n1 and n2."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.table = RunTable(
            spool=Spool(str(tmp / "spool"), "host1"),
            hostnames={"n1": "host1", "n2": "host1"},
            slurm_conf="/etc/corral/slurm.conf",
            kill_wait=1,
            python=sys.executable,
        )
        self.table.connect(self.sent.append)


async def step_on(agent: Agent, step_id: int, node: str) -> Srun:
    """A one-task step of job 7 sleeping on ``node``."""
    srun = Srun()
    accepted = asyncio.create_task(asyncio.to_thread(srun.accept))
    agent.table.launch(
        pb.LaunchStep(
            job_id=7,
            step_id=step_id,
            node=node,
            tasks=[0],
            uid=ME.pw_uid,
            gid=ME.pw_gid,
            user=ME.pw_name,
            argv=["sleep", "60"],
            environment={"PATH": "/usr/bin:/bin"},
            cwd=str(agent.work),
            io_host="127.0.0.1",
            io_port=srun.port,
            io_key=srun.key,
            kill_wait=1,
            time_limit=-1,
        )
    )
    await accepted
    return srun


async def until(predicate: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def test_the_file_the_job_reads_is_slurms_resize_script() -> None:
    two = pb.ResizeJob(job_id=12, nodes=["n1", "n2"], nodelist="n[1-2]", cpus_per_node="4(x2)")
    two.resize_time = 1767225600
    assert script(two) == (
        "# job 12 resized at 1767225600\n"
        'export SLURM_NODELIST="n[1-2]"\n'
        'export SLURM_JOB_NODELIST="n[1-2]"\n'
        "export SLURM_NNODES=2\n"
        "export SLURM_JOB_NUM_NODES=2\n"
        'export SLURM_JOB_CPUS_PER_NODE="4(x2)"\n'
        "unset SLURM_TASKS_PER_NODE\n"
    )
    with pytest.raises(ValueError):
        script(pb.ResizeJob(job_id=12, nodes=["n1"], nodelist='n1"; rm -rf ~; "'))


def test_a_resize_ends_the_steps_left_behind_and_tells_the_rest_once(tmp_path: Path) -> None:
    async def body() -> None:
        agent = TwoNodes(tmp_path)
        table = agent.table
        table.recover()
        table.zygote.start()
        while not table.zygote.available():
            await asyncio.sleep(0.01)
        poll = asyncio.create_task(table.poll_forever())
        try:
            agent.launch_job(
                'echo "$CORRAL_RESIZE_FILE" > path\n'
                'trap \'. "$CORRAL_RESIZE_FILE"; echo $SLURM_NNODES $SLURM_JOB_NODELIST'
                " >> told' WINCH\n"
                "while :; do sleep 0.05; done\n"
            )
            await agent.expect("running")
            kept = await step_on(agent, 0, "n1")
            left = await step_on(agent, 1, "n2")
            path = agent.work / "path"
            await until(path.exists, "the batch script did not start")
            await asyncio.sleep(0.2)  # its trap is set

            table.resize(RESIZED)
            await asyncio.to_thread(left.finish)
            left.close()
            done = await agent.expect("step_done", lambda m: m.step_id == 1)
            assert (done.node, list(done.statuses)) == ("n2", [signal.SIGTERM])
            told = agent.work / "told"
            await until(told.exists, "the batch script was not told")
            resize_file = Path(path.read_text().strip())
            assert resize_file == tmp_path / "spool/n1/job7.0/checkpoint/resize"
            assert resize_file.read_text() == script(RESIZED)
            step_file = tmp_path / "spool/n1/step7.0/checkpoint/resize"
            assert step_file.read_text() == script(RESIZED)
            assert oct(resize_file.stat().st_mode & 0o777) == "0o644"

            table.resize(RESIZED)  # again (an agent that reconnected): no second signal
            await asyncio.sleep(0.5)
            assert told.read_text() == "1 n1\n"
            assert kept.exits == {} and table.steps_on(7, "n1") == 1
        finally:
            table.signal(pb.SignalJob(job_id=7, signal=0, reason="test over"))
            await asyncio.sleep(2.5)
            poll.cancel()
            table.close()

    asyncio.run(body())


def test_a_link_the_user_planted_is_replaced_not_written_through(tmp_path: Path) -> None:
    from nodeagent.spool import JobDir

    run = JobDir(str(tmp_path / "job7.0"))
    os.mkdir(run.path)
    run.create_checkpoint(ME.pw_uid, ME.pw_gid)
    victim = tmp_path / "precious"
    victim.write_text("mine\n")
    os.symlink(victim, run.resize_file())
    assert run.write_resize("new\n")
    assert victim.read_text() == "mine\n"
    assert not os.path.islink(run.resize_file())
    assert Path(run.resize_file()).read_text() == "new\n"
    assert not run.write_resize("new\n")  # unchanged: nothing written
    assert sorted(os.listdir(tmp_path / "job7.0/checkpoint")) == ["resize", "saved"]
