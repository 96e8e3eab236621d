"""Steps through the agent's own code path: LaunchStep in, StepDone out, signals.

A RunTable (with its zygote) runs on an event loop in the
test, against the fake srun of test_steprunner; what the table would send to
the controller is collected in a list.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from corral.wire import corral_pb2 as pb
from nodeagent import runs
from nodeagent.runs import RunTable
from nodeagent.spool import Spool
from tests.unit.test_steprunner import Srun

ME = pwd.getpwuid(os.getuid())
WAIT = 5.0


class Agent:
    """A job table serving node n1 and what it sent."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.work = tmp / "work"
        self.work.mkdir(exist_ok=True)
        self.table = RunTable(
            spool=Spool(str(tmp / "spool"), "host1"),
            hostnames={"n1": "host1"},
            slurm_conf="/etc/corral/slurm.conf",
            kill_wait=1,
            python=sys.executable,
        )
        self.sent: list[pb.AgentMessage] = []
        self.table.connect(self.sent.append)

    def launch_step(self, srun: Srun, step_id: int, argv: list[str], **fields: Any) -> None:
        msg = pb.LaunchStep(
            job_id=7,
            step_id=step_id,
            node="n1",
            node_id=0,
            tasks=fields.pop("tasks", [0, 1]),
            uid=ME.pw_uid,
            gid=ME.pw_gid,
            user=ME.pw_name,
            argv=argv,
            environment={"PATH": "/usr/bin:/bin"},
            cwd=str(self.work),
            io_host="127.0.0.1",
            io_port=srun.port,
            io_key=srun.key,
            kill_wait=1,
            time_limit=-1,
            **fields,
        )
        self.table.launch(msg)

    def launch_job(self, script: str) -> None:
        msg = pb.LaunchJob(
            job_id=7,
            node="n1",
            uid=ME.pw_uid,
            gid=ME.pw_gid,
            user=ME.pw_name,
            script="#!/bin/sh\n" + script,
            work_dir=str(self.work),
            environment={"PATH": "/usr/bin:/bin"},
            time_limit=-1,
            start_time=int(time.time()),
            kill_wait=1,
        )
        self.table.launch(msg)

    async def expect(self, kind: str, where: Callable[[Any], bool] = lambda _: True) -> Any:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            for i, message in enumerate(self.sent):
                if message.WhichOneof("body") == kind and where(getattr(message, kind)):
                    del self.sent[i]
                    return getattr(message, kind)
            await asyncio.sleep(0.01)
        raise AssertionError(f"no {kind} within {WAIT} s; sent {self.sent}")


class started_agent:
    """An agent recovered from the spool in ``tmp``, its zygote ready and polling on."""

    def __init__(self, tmp: Path) -> None:
        self.agent = Agent(tmp)

    async def __aenter__(self) -> Agent:
        table = self.agent.table
        table.recover()
        table.zygote.start()
        deadline = time.monotonic() + 10
        while not table.zygote.available():
            assert time.monotonic() < deadline, "zygote not ready"
            await asyncio.sleep(0.01)
        self.poll = asyncio.create_task(table.poll_forever())
        return self.agent

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is not None:  # a failed test: end its job and steps rather than leak them
            self.agent.table.signal(pb.SignalJob(job_id=7, signal=0, reason="test failed"))
            await asyncio.sleep(2.5)  # TERM, then KILL after kill_wait (1 s)
        self.poll.cancel()
        self.agent.table.close()


def run(tmp: Path, body: Callable[[Agent], Awaitable[None]]) -> None:
    async def main() -> None:
        async with started_agent(tmp) as agent:
            await body(agent)

    asyncio.run(main())


def test_launch_step_to_step_done(tmp_path: Path) -> None:
    async def body(agent: Agent) -> None:
        srun = Srun()
        try:
            accepted = asyncio.create_task(asyncio.to_thread(srun.accept))
            began = time.monotonic()
            agent.launch_step(srun, 3, ["sh", "-c", "echo $SLURM_PROCID; exit $SLURM_PROCID"])
            await accepted
            hello_after = time.monotonic() - began
            await asyncio.to_thread(srun.finish)
            assert srun.out == {0: b"0\n", 1: b"1\n"}
            done = await agent.expect("step_done")
            assert (done.job_id, done.step_id, done.node) == (7, 3, "n1")
            assert list(done.tasks) == [0, 1]
            assert list(done.statuses) == [0, 1 << 8]
            assert done.message == "" and done.max_rss_kb > 0
            assert not (tmp_path / "spool" / "n1" / "step7.3").exists()
            # LaunchStep to HELLO through the zygote: a fork, not an interpreter start.
            print(f"LaunchStep -> HELLO {hello_after * 1000:.1f} ms")
            assert hello_after < 1.0
        finally:
            srun.close()

    run(tmp_path, body)


def test_refused_launch_runs_nothing(tmp_path: Path) -> None:
    """A launch whose credential the link refused: reported as never started."""

    async def body(agent: Agent) -> None:
        srun = Srun()
        try:
            msg = pb.LaunchStep(job_id=7, step_id=0, node="n1", tasks=[0, 1], argv=["true"])
            msg.io_port = srun.port
            agent.table.refuse(msg, "Invalid authentication credential")
            done = await agent.expect("step_done")
            assert list(done.statuses) == [-1, -1]
            assert done.message == "Invalid authentication credential"
            srun.server.settimeout(0.2)
            try:
                srun.server.accept()
                raise AssertionError("a forged launch connected to srun")
            except TimeoutError:
                pass
        finally:
            srun.close()

    run(tmp_path, body)


async def start_step(agent: Agent, step_id: int, argv: list[str]) -> Srun:
    srun = Srun()
    accepted = asyncio.create_task(asyncio.to_thread(srun.accept))
    agent.launch_step(srun, step_id, argv)
    await accepted
    return srun


async def ended(agent: Agent, srun: Srun, step_id: int) -> list[int]:
    """The step's statuses, from srun's EXIT frames and the agent's StepDone alike."""
    await asyncio.to_thread(srun.finish)
    srun.close()
    done = await agent.expect("step_done", lambda m: m.step_id == step_id)
    assert list(done.statuses) == [srun.exits[task] for task in done.tasks]
    return list(done.statuses)


def test_signals_follow_slurms_rules(tmp_path: Path) -> None:
    """Without --batch or --full a signal is for the steps alone (or the one named);
    --full reaches the batch script's process group too; terminate ends everything."""

    async def body(agent: Agent) -> None:
        agent.launch_job("trap 'echo usr1 >> batch.sig' USR1\nwhile :; do sleep 0.05; done\n")
        await agent.expect("running")
        flag = agent.work / "batch.sig"
        one = await start_step(agent, 1, ["sleep", "60"])
        two = await start_step(agent, 2, ["sleep", "60"])
        await asyncio.sleep(0.2)  # the batch shell has set its trap

        agent.table.signal(pb.SignalJob(job_id=7, signal=signal.SIGUSR1, step_id=1))
        assert await ended(agent, one, 1) == [signal.SIGUSR1] * 2
        agent.table.signal(pb.SignalJob(job_id=7, signal=signal.SIGUSR1))
        assert await ended(agent, two, 2) == [signal.SIGUSR1] * 2
        await asyncio.sleep(0.2)
        assert not flag.exists()

        three = await start_step(agent, 3, ["sleep", "60"])
        agent.table.signal(pb.SignalJob(job_id=7, signal=signal.SIGUSR1, full=True))
        assert await ended(agent, three, 3) == [signal.SIGUSR1] * 2
        deadline = time.monotonic() + WAIT
        while not flag.exists():
            assert time.monotonic() < deadline, "the batch script got no USR1"
            await asyncio.sleep(0.01)

        four = await start_step(agent, 4, ["sleep", "60"])
        agent.table.signal(pb.SignalJob(job_id=7, signal=0, reason="cancel"))
        assert await ended(agent, four, 4) == [signal.SIGTERM] * 2
        done = await agent.expect("done")
        assert done.outcome == "cancelled"

    run(tmp_path, body)


def test_steps_end_with_their_batch_job(tmp_path: Path) -> None:
    async def body(agent: Agent) -> None:
        agent.launch_job("sleep 0.5\n")
        await agent.expect("running")
        step = await start_step(agent, 0, ["sleep", "60"])
        done = await agent.expect("done")
        assert (done.outcome, done.exit_status) == ("exited", 0)
        assert await ended(agent, step, 0) == [signal.SIGTERM] * 2

    run(tmp_path, body)


def test_terminate_reaches_steps_without_a_batch_job_here(tmp_path: Path) -> None:
    """A node of a multi-node job runs its steps but not the batch script; a
    terminate naming a step ends that step alone."""

    async def body(agent: Agent) -> None:
        zero = await start_step(agent, 0, ["sleep", "60"])
        one = await start_step(agent, 1, ["sleep", "60"])
        agent.table.signal(pb.SignalJob(job_id=7, signal=0, step_id=1))
        assert await ended(agent, one, 1) == [signal.SIGTERM] * 2
        agent.table.signal(pb.SignalJob(job_id=7, signal=0, reason="cancel"))
        assert await ended(agent, zero, 0) == [signal.SIGTERM] * 2

    run(tmp_path, body)


def test_a_restarted_agent_adopts_running_steps(tmp_path: Path) -> None:
    """Runners outlive their agent; the next one still signals them and reports their end."""

    async def main() -> None:
        async with started_agent(tmp_path) as first:
            step = await start_step(first, 5, ["sleep", "60"])
        # The first agent is gone (its zygote too); the step runs on.
        async with started_agent(tmp_path) as second:
            second.table.signal(pb.SignalJob(job_id=7, signal=signal.SIGUSR2))
            assert await ended(second, step, 5) == [signal.SIGUSR2] * 2

    asyncio.run(main())


def test_a_step_whose_agent_stopped_before_its_runner_started_runs_after_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent stops between writing a step and starting its runner: the next agent
    process starts it, srun (still waiting) gets its tasks, and the controller its end."""

    class AgentStopped(BaseException):
        pass

    def stop(*_: object) -> None:
        raise AgentStopped

    spawned: list[int] = []
    spawn = runs.spawn_step_runner

    def recorded(*args: Any) -> Any:
        proc = spawn(*args)
        spawned.append(proc.pid)
        return proc

    async def main() -> None:
        srun = Srun()
        async with started_agent(tmp_path) as first:
            monkeypatch.setattr(runs, "spawn_step_runner", stop)
            with pytest.raises(AgentStopped):
                first.launch_step(srun, 8, ["sh", "-c", "exit 3"])
        assert (tmp_path / "spool" / "n1" / "step7.8" / "launch.json").exists()
        monkeypatch.setattr(runs, "spawn_step_runner", recorded)
        accepted = asyncio.create_task(asyncio.to_thread(srun.accept))
        async with started_agent(tmp_path) as second:
            await accepted
            assert await ended(second, srun, 8) == [3 << 8] * 2
        (runner,) = spawned  # the new agent's child: reaped here, as its loop would
        os.waitpid(runner, 0)

    asyncio.run(main())


def test_a_restarted_agent_drops_ended_steps(tmp_path: Path) -> None:
    async def main() -> None:
        async with started_agent(tmp_path) as first:
            step = await start_step(first, 6, ["sleep", "0.3"])
        # The step ends while no agent watches it.
        await asyncio.to_thread(step.finish)
        step.close()
        stepdir = tmp_path / "spool" / "n1" / "step7.6"
        deadline = time.monotonic() + WAIT
        while not (stepdir / "result").exists():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        async with started_agent(tmp_path) as second:
            assert not stepdir.exists()  # step results do not outlive their agent
            assert second.sent == []

    asyncio.run(main())
