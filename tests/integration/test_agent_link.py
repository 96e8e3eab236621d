"""The real node agent against a tiny fake controller speaking AgentLink.

The fake controller (grpc.aio on 127.0.0.1, an ephemeral port) welcomes the
agent, records everything it sends and lets a test push ControllerMessages;
the agent runs as ``python -m nodeagent.main`` in a subprocess, serving two
emulated nodes, with its spool in a temporary directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from corral import auth, credentials
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[2]
WAIT = 10.0


class FakeController(pb_grpc.AgentLinkServicer):
    """Welcomes each stream, queues what the agent sends, sends what tests push, each
    message with the controller's credential for agent n1 (unless pushed ``raw``)."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[pb.AgentMessage] = asyncio.Queue()
        self.outbox: asyncio.Queue[pb.ControllerMessage | None] = asyncio.Queue()
        self.stash: list[pb.AgentMessage] = []
        self.streams = 0
        self.keys: auth.Keys | None = None  # set once the test's key exists

    def seal(self, message: pb.ControllerMessage) -> pb.ControllerMessage:
        """``message`` with a credential as the real controller makes it."""
        if message.HasField("cred"):  # pushed raw: sent as it is
            return message
        assert self.keys is not None
        kind = message.WhichOneof("body") or ""
        sealed: pb.ControllerMessage = credentials.stamp(
            message,
            self.keys.seal,
            uid=os.getuid(),
            gid=os.getgid(),
            method=credentials.agent_message_method(kind),
            receiver=auth.agent_receiver("test", "n1"),
        )
        return sealed

    async def Attach(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: Any
    ) -> AsyncIterator[pb.ControllerMessage]:
        self.streams += 1
        self.outbox = asyncio.Queue()
        outbox = self.outbox

        async def pump() -> None:
            async for message in request_iterator:
                await self.inbox.put(message)

        reader = asyncio.create_task(pump())
        try:
            yield self.seal(
                pb.ControllerMessage(
                    welcome=pb.Welcome(cluster="test", heartbeat_interval=1, kill_wait=1)
                )
            )
            while (message := await outbox.get()) is not None:
                yield self.seal(message)
        finally:
            reader.cancel()

    async def expect(
        self, kind: str, where: Callable[[Any], bool] = lambda _: True, timeout: float = WAIT
    ) -> Any:
        """The first message of ``kind`` that satisfies ``where``.

        Messages that do not match are kept for later calls, since reports of
        different jobs may arrive in any order.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for i, message in enumerate(self.stash[seen:], start=seen):
                if message.WhichOneof("body") == kind and where(getattr(message, kind)):
                    del self.stash[i]
                    return getattr(message, kind)
            seen = len(self.stash)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {kind} message within {timeout} s")
            try:
                self.stash.append(await asyncio.wait_for(self.inbox.get(), left))
            except TimeoutError:
                raise AssertionError(f"no {kind} message within {timeout} s") from None

    def send(self, **body: Any) -> None:
        self.outbox.put_nowait(pb.ControllerMessage(**body))

    def send_raw(self, message: pb.ControllerMessage) -> None:
        """Push ``message`` as it is: its credential (set, perhaps empty) is not replaced."""
        self.outbox.put_nowait(message)

    def hang_up(self) -> None:
        """End the current stream cleanly, as a restarting controller would."""
        self.outbox.put_nowait(None)


class Setup:
    """A slurm.conf, cluster key, spool and agent process around a fake controller."""

    def __init__(self, tmp: Path, port: int) -> None:
        self.tmp = tmp
        self.work = tmp / "work"
        self.work.mkdir()
        self.spool = tmp / "spool"
        self.conf = tmp / "slurm.conf"
        self.conf.write_text(
            "ClusterName=test\n"
            "SlurmctldHost=ctl(127.0.0.1)\n"
            f"SlurmctldPort={port}\n"
            f"SlurmdSpoolDir={self.spool}/%n\n"
            "KillWait=1\n"
            "TLSType=tls/none\n"  # the fake controller serves plaintext
            "NodeName=n[1-2] CPUs=4 Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 "
            "RealMemory=1000 TmpDisk=50\n"
            "PartitionName=p Nodes=n[1-2] Default=YES\n"
        )
        key_file = auth.key_path(str(self.conf))
        auth.create_key(key_file)
        self.keys = auth.Keys.derive(auth.load_key(key_file))
        self.log = tmp / "agent.log"
        self.agent: subprocess.Popen[bytes] | None = None

    def start_agent(self) -> None:
        with open(self.log, "ab") as log:
            self.agent = subprocess.Popen(
                [sys.executable, "-m", "nodeagent.main", "-f", str(self.conf), "-N", "n[1-2]"],
                stdout=log,
                stderr=log,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )

    def kill_agent(self) -> None:
        assert self.agent is not None
        self.agent.kill()
        self.agent.wait()

    def stop(self) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            self.agent.wait(timeout=10)
        # Supervisors outlive agents by design; end the jobs this test left running.
        for started in self.spool.glob("*/job*/started"):
            if not (started.parent / "result").exists():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(json.loads(started.read_text())["pid"], signal.SIGKILL)

    def launch(self, job_id: int, script: str, node: str = "n1", **fields: Any) -> pb.LaunchJob:
        msg = pb.LaunchJob(
            job_id=job_id,
            node=node,
            uid=os.getuid(),
            gid=os.getgid(),
            user="tester",
            script="#!/bin/bash\n" + script,
            work_dir=str(self.work),
            std_out="%j.out",
            environment={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": str(job_id)},
            time_limit=-1,
            start_time=int(time.time()),
            kill_wait=1,
            job_name="t",
            node_list=node,
            **fields,
        )
        return msg

    def jobdir(self, job_id: int, restarts: int = 0, node: str = "n1") -> Path:
        return self.spool / node / f"job{job_id}.{restarts}"

    def agent_log(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


async def serve_controller(port: int = 0) -> tuple[FakeController, grpc.aio.Server, int]:
    controller = FakeController()
    server = grpc.aio.server()
    pb_grpc.add_AgentLinkServicer_to_server(controller, server)
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return controller, server, port


def run(test: Callable[[FakeController, Setup], Awaitable[None]], tmp: Path) -> None:
    """Serve a fake controller, start the agent, run ``test``, clean up."""

    async def main() -> None:
        controller, server, port = await serve_controller()
        setup = Setup(tmp, port)
        controller.keys = setup.keys
        setup.start_agent()
        try:
            await test(controller, setup)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- agent log ---\n{setup.agent_log()[-4000:]}") from None
        finally:
            setup.stop()
            await server.stop(None)

    asyncio.run(main())


async def wait_until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {WAIT} s")
        await asyncio.sleep(0.02)


def test_hello_launch_running_done_ack(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        hello = await ctl.expect("hello")
        assert [n.name for n in hello.nodes] == ["n1", "n2"]
        n1 = hello.nodes[0]
        assert (n1.cpus, n1.sockets, n1.cores_per_socket, n1.threads_per_core) == (4, 1, 2, 2)
        assert n1.real_memory == 1000 and n1.tmp_disk == 50
        assert n1.hostname and n1.os.startswith("Linux") and n1.boot_time > 0
        assert hello.version and hello.agent_start_time > 0
        assert list(hello.running) == []

        ctl.send(launch=setup.launch(5, "echo hello from $SLURMD_NODENAME\nexit 2\n"))
        running = await ctl.expect("running", lambda m: m.job_id == 5)
        assert running.pid > 0 and running.start_time > 0
        done = await ctl.expect("done", lambda m: m.job_id == 5)
        assert (done.exit_status, done.outcome, done.restarts) == (2 << 8, "exited", 0)
        assert done.end_time > 0
        assert (setup.work / "5.out").read_text() == "hello from n1\n"

        # A repeated launch of a finished run is answered, not run again.
        ctl.send(launch=setup.launch(5, "echo again\n"))
        again = await ctl.expect("done", lambda m: m.job_id == 5)
        assert again.exit_status == 2 << 8
        assert (setup.work / "5.out").read_text() == "hello from n1\n"

        assert setup.jobdir(5).exists()
        ctl.send(ack_done=pb.AckDone(job_id=5, restarts=0))
        await wait_until(lambda: not setup.jobdir(5).exists(), "job directory removed")
        await ctl.expect("heartbeat", timeout=3)

    run(body, tmp_path)


def test_duplicate_launch_of_a_running_job_answers_running(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        launch = setup.launch(6, "echo once >> count\nsleep 30\n", node="n2")
        ctl.send(launch=launch)
        first = await ctl.expect("running", lambda m: m.job_id == 6)
        ctl.send(launch=launch)
        second = await ctl.expect("running", lambda m: m.job_id == 6)
        assert second.pid == first.pid
        count = setup.work / "count"
        # The shell creates the file before it writes the line: wait for the line.
        await wait_until(lambda: count.exists() and count.read_text() != "", "the job wrote")
        assert count.read_text() == "once\n"
        ctl.send(signal=pb.SignalJob(job_id=6, signal=0, reason="cancel"))
        done = await ctl.expect("done", lambda m: m.job_id == 6)
        assert done.outcome == "cancelled"

    run(body, tmp_path)


def test_bad_signature_runs_nothing(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        forged = pb.ControllerMessage(launch=setup.launch(7, "echo pwned > pwned\n"))
        forged.cred.CopyFrom(ctl.seal(pb.ControllerMessage(launch=forged.launch)).cred)
        forged.cred.signature = b"\0" * 32
        ctl.send_raw(forged)
        done = await ctl.expect("done", lambda m: m.job_id == 7)
        assert done.outcome == "launch_failed"
        assert done.message == "Invalid authentication credential"
        assert done.exit_status == 1 << 8
        assert not setup.jobdir(7).exists()
        assert not (setup.work / "pwned").exists()
        ctl.send(ack_done=pb.AckDone(job_id=7))

    run(body, tmp_path)


def test_cancel_and_signals(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        ctl.send(launch=setup.launch(8, "sleep 30\n"))
        await ctl.expect("running", lambda m: m.job_id == 8)
        ctl.send(signal=pb.SignalJob(job_id=8, signal=0, reason="cancel"))
        done = await ctl.expect("done", lambda m: m.job_id == 8)
        assert (done.outcome, done.exit_status) == ("cancelled", signal.SIGTERM)

        trap = "trap 'exit 7' USR1\nwhile true; do sleep 0.05; done\n"
        ctl.send(launch=setup.launch(9, trap))
        await ctl.expect("running", lambda m: m.job_id == 9)
        await asyncio.sleep(0.3)  # let bash install its trap
        ctl.send(signal=pb.SignalJob(job_id=9, signal=signal.SIGUSR1, batch_only=True))
        done = await ctl.expect("done", lambda m: m.job_id == 9)
        assert (done.outcome, done.exit_status) == ("exited", 7 << 8)

        ctl.send(launch=setup.launch(10, "sleep 30\n"))
        await ctl.expect("running", lambda m: m.job_id == 10)
        ctl.send(update=pb.UpdateJob(job_id=10, time_limit=0))
        done = await ctl.expect("done", lambda m: m.job_id == 10)
        assert done.outcome == "timeout"

    run(body, tmp_path)


def test_jobs_survive_an_agent_killed_mid_job(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        ctl.send(launch=setup.launch(11, "sleep 0.2\nexit 3\n"))
        # Job 12 runs until the agent is back (a restart can take seconds under load).
        back = setup.work / "agent-back"
        waits = f"while [ ! -e {back} ]; do sleep 0.1; done\necho finished\nexit 4\n"
        ctl.send(launch=setup.launch(12, waits, node="n2"))
        await ctl.expect("running", lambda m: m.job_id == 11)
        long_running = await ctl.expect("running", lambda m: m.job_id == 12)
        setup.kill_agent()
        # Job 11 ends while no agent is there to see it.
        await wait_until(lambda: (setup.jobdir(11) / "result").exists(), "job 11 result")

        setup.start_agent()
        hello = await ctl.expect("hello")
        assert [(r.job_id, r.pid) for r in hello.running] == [(12, long_running.pid)]
        back.touch()
        done = await ctl.expect("done", lambda m: m.job_id == 11)
        assert (done.outcome, done.exit_status) == ("exited", 3 << 8)
        done = await ctl.expect("done", lambda m: m.job_id == 12)
        assert (done.outcome, done.exit_status) == ("exited", 4 << 8)
        assert (setup.work / "12.out").read_text() == "finished\n"
        assert ctl.streams == 2

    run(body, tmp_path)


def zygotes_of(pid: int) -> list[int]:
    """The agent's zygote (one, except for a moment while it is replaced)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                args = cmdline.read().split(b"\0")
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"--zygote-fd" in args:
            found.append(int(entry))
    return found


def test_jobs_survive_a_killed_zygote_and_launches_go_on(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        assert setup.agent is not None
        agent = setup.agent.pid
        await wait_until(lambda: len(zygotes_of(agent)) == 1, "the agent started a zygote")
        [zygote] = zygotes_of(agent)
        # The agent finds the zygote ready at a launch; launches before that are spawned.
        for warm_up in range(100, 200):
            ctl.send(launch=setup.launch(warm_up, "exit 0\n"))
            await ctl.expect("done", lambda m, job_id=warm_up: m.job_id == job_id)
            if f"zygote {zygote} ready" in setup.agent_log():
                break
            await asyncio.sleep(0.05)
        ctl.send(launch=setup.launch(21, "sleep 1\necho finished\nexit 4\n"))
        await ctl.expect("running", lambda m: m.job_id == 21)
        supervisor = int((setup.jobdir(21) / "supervisor.pid").read_text())
        with open(f"/proc/{supervisor}/stat") as stat:
            assert int(stat.read().rsplit(")", 1)[1].split()[1]) == zygote
        os.kill(zygote, signal.SIGKILL)
        ctl.send(launch=setup.launch(22, "exit 5\n", node="n2"))
        done = await ctl.expect("done", lambda m: m.job_id == 22)
        assert (done.outcome, done.exit_status) == ("exited", 5 << 8)
        done = await ctl.expect("done", lambda m: m.job_id == 21)
        assert (done.outcome, done.exit_status) == ("exited", 4 << 8)
        assert (setup.work / "21.out").read_text() == "finished\n"
        # A launch after the restart delay brings a new zygote.
        await asyncio.sleep(1.2)
        ctl.send(launch=setup.launch(23, "exit 6\n"))
        done = await ctl.expect("done", lambda m: m.job_id == 23)
        assert done.exit_status == 6 << 8
        await wait_until(lambda: zygotes_of(agent) not in ([], [zygote]), "a new zygote")

    run(body, tmp_path)


def test_unacknowledged_done_is_resent_on_reconnect(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        ctl.send(launch=setup.launch(13, "exit 0\n"))
        await ctl.expect("done", lambda m: m.job_id == 13)
        # Drop the stream from the controller's side; the agent comes back.
        ctl.hang_up()
        await ctl.expect("hello")
        done = await ctl.expect("done", lambda m: m.job_id == 13)
        assert done.outcome == "exited"
        ctl.send(ack_done=pb.AckDone(job_id=13))
        await wait_until(lambda: not setup.jobdir(13).exists(), "job directory removed")

    run(body, tmp_path)


def test_agent_started_first_attaches_when_the_controller_appears(tmp_path: Path) -> None:
    async def main() -> None:
        _, server, port = await serve_controller()
        await server.stop(None)  # the port is known but nobody listens
        setup = Setup(tmp_path, port)
        setup.start_agent()
        try:
            await asyncio.sleep(1.0)  # several failed attempts, backing off
            assert setup.agent is not None and setup.agent.poll() is None
            controller, server, _ = await serve_controller(port)
            controller.keys = setup.keys
            try:
                hello = await controller.expect("hello", timeout=4)
                assert [n.name for n in hello.nodes] == ["n1", "n2"]
            finally:
                await server.stop(None)
        finally:
            setup.stop()

    asyncio.run(main())


def test_the_hello_carries_an_agent_credential_for_this_controller(tmp_path: Path) -> None:
    async def body(ctl: FakeController, setup: Setup) -> None:
        hello = await ctl.expect("hello")
        verifier = credentials.Verifier(setup.keys.credential, auth.controller_receiver("test"))
        cred = verifier.check(hello, credentials.ATTACH)
        assert (cred.uid, cred.expires - cred.issued) == (os.getuid(), auth.DEFAULT_TTL)

    run(body, tmp_path)


def test_messages_without_a_fresh_credential_for_this_agent_are_not_acted_on(
    tmp_path: Path,
) -> None:
    """Unsigned, replayed, moved to another job, made for another agent or expired: the
    job is neither signalled nor launched again."""

    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        launch = ctl.seal(pb.ControllerMessage(launch=setup.launch(30, "echo x >> count\n")))
        ctl.send_raw(launch)
        await ctl.expect("done", lambda m: m.job_id == 30)
        ctl.send(launch=setup.launch(31, "sleep 30\n"))
        await ctl.expect("running", lambda m: m.job_id == 31)

        cancel = pb.SignalJob(job_id=31, signal=0, reason="cancel")
        unsigned = pb.ControllerMessage(signal=cancel)
        unsigned.cred.SetInParent()
        ctl.send_raw(unsigned)
        moved = pb.ControllerMessage(signal=cancel)
        moved.cred.CopyFrom(ctl.seal(pb.ControllerMessage(signal=pb.SignalJob(job_id=32))).cred)
        ctl.send_raw(moved)
        for receiver, now in ((auth.agent_receiver("test", "n2"), None), (None, 1000)):
            other = pb.ControllerMessage(signal=cancel)
            credentials.stamp(
                other,
                setup.keys.seal,
                uid=os.getuid(),
                gid=os.getgid(),
                method=credentials.agent_message_method("signal"),
                receiver=receiver or auth.agent_receiver("test", "n1"),
                now=now,
            )
            ctl.send_raw(other)
        ctl.send_raw(launch)  # replayed: the job is not run again, nor answered
        await wait_until(lambda: setup.agent_log().count("refused") >= 5, "five refusals")
        log = setup.agent_log()
        assert "controller message signal (job_id=31) refused: Invalid" in log
        assert "expired" in log and "replayed" in log
        await asyncio.sleep(0.5)
        assert setup.jobdir(31).exists() and not (setup.jobdir(31) / "result").exists()
        assert (setup.work / "count").read_text() == "x\n"
        ctl.send(signal=cancel)  # the controller's own, fresh: taken
        done = await ctl.expect("done", lambda m: m.job_id == 31)
        assert done.outcome == "cancelled"

    run(body, tmp_path)


def test_a_hook_result_is_kept_until_acknowledged_and_a_forged_hook_runs_nothing(
    tmp_path: Path,
) -> None:
    """A JobHook's Epilog fails: its HookDone outlives an agent restart (sent again,
    not run again) until the AckHook; a JobHook with a bad signature runs nothing."""

    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        ran = setup.tmp / "epilog.log"
        epilog = setup.tmp / "epilog"
        epilog.write_text(f"#!/bin/sh\necho $SLURMD_NODENAME $SLURM_JOB_ID >> {ran}\nexit 3\n")
        epilog.chmod(0o755)
        setup.kill_agent()
        with open(setup.conf, "a") as conf:
            conf.write(f"Epilog={epilog}\n")
        setup.start_agent()
        await ctl.expect("hello")
        hook = pb.JobHook(job_id=40, node="n2", epilog=True, environment={"SLURM_JOB_ID": "40"})
        forged = pb.ControllerMessage(hook=hook)
        forged.cred.CopyFrom(ctl.seal(pb.ControllerMessage(hook=hook)).cred)
        forged.cred.signature = b"\0" * 32
        ctl.send_raw(forged)
        await wait_until(
            lambda: "controller message hook (job_id=40) refused: Invalid" in setup.agent_log(),
            "the forged hook refused",
        )
        ctl.send(hook=hook)
        done = await ctl.expect("hook_done", lambda m: m.job_id == 40)
        assert (done.node, done.epilog, done.ok, done.message) == ("n2", True, False, "rc:3")
        assert ran.read_text() == "n2 40\n"  # once: the forged one ran nothing
        setup.kill_agent()
        setup.start_agent()
        await ctl.expect("hello")
        assert await ctl.expect("hook_done", lambda m: m.job_id == 40) == done
        ctl.send(hook=hook)  # repeated: answered from the record, not run again
        assert await ctl.expect("hook_done", lambda m: m.job_id == 40) == done
        ctl.send(ack_hook=pb.AckHook(job_id=40, node="n2", epilog=True))
        records = setup.spool / "hookresults"
        await wait_until(lambda: not list(records.iterdir()), "the record dropped")
        assert ran.read_text() == "n2 40\n"

    run(body, tmp_path)


def test_a_touched_checkpoint_file_is_reported_on_every_stream_and_goes_with_its_run(
    tmp_path: Path,
) -> None:
    """The batch script touches the file CORRAL_CHECKPOINT_FILE names, in its run's
    directory: the agent reports the file's time for the run's node, again on the next
    stream, and removes the file's directory with the run's."""

    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        script = (
            'echo "$CORRAL_CHECKPOINT_FILE" > where\n'
            'touch "$CORRAL_CHECKPOINT_FILE"\n'
            "while [ ! -e go ]; do sleep 0.1; done\n"
        )
        ctl.send(launch=setup.launch(50, script, node="n2"))
        await ctl.expect("running", lambda m: m.job_id == 50)
        mark = await ctl.expect("checkpoints")
        saved = setup.jobdir(50, node="n2") / "checkpoint" / "saved"
        assert (setup.work / "where").read_text() == f"{saved}\n"
        touched = os.lstat(saved).st_mtime_ns // 1_000_000_000
        assert list(mark.checkpoints) == [pb.Checkpoint(job_id=50, node="n2", time=touched)]
        ctl.hang_up()  # the next stream is told again: the last one may have lost it
        await ctl.expect("hello")
        again = await ctl.expect("checkpoints")
        assert list(again.checkpoints) == list(mark.checkpoints)
        (setup.work / "go").touch()
        done = await ctl.expect("done", lambda m: m.job_id == 50)
        assert done.outcome == "exited"
        ctl.send(ack_done=pb.AckDone(job_id=50, restarts=0))
        await wait_until(lambda: not setup.jobdir(50, node="n2").exists(), "run removed")

    run(body, tmp_path)


def test_a_resize_is_acted_on_only_with_the_controllers_credential(tmp_path: Path) -> None:
    """A ResizeJob made with another key, or for another agent, writes no resize file
    and signals nothing; the controller's own does both (issue 18, point 3)."""

    async def body(ctl: FakeController, setup: Setup) -> None:
        await ctl.expect("hello")
        trap = "trap 'echo told >> told' WINCH\nwhile :; do sleep 0.05; done\n"
        ctl.send(launch=setup.launch(50, trap))
        await ctl.expect("running", lambda m: m.job_id == 50)
        await asyncio.sleep(0.3)  # its trap is set
        resize = pb.ResizeJob(
            job_id=50, nodes=["n1"], nodelist="n1", cpus_per_node="4", signal=signal.SIGWINCH
        )
        forged = pb.ControllerMessage(resize=resize)
        forged.cred.CopyFrom(ctl.seal(pb.ControllerMessage(resize=resize)).cred)
        forged.cred.signature = b"\0" * 32
        ctl.send_raw(forged)
        elsewhere = pb.ControllerMessage(resize=resize)
        credentials.stamp(
            elsewhere,
            setup.keys.seal,
            uid=os.getuid(),
            gid=os.getgid(),
            method=credentials.agent_message_method("resize"),
            receiver=auth.agent_receiver("test", "n2"),
        )
        ctl.send_raw(elsewhere)
        await wait_until(
            lambda: setup.agent_log().count("controller message resize (job_id=50) refused") == 2,
            "both refused",
        )
        resize_file = setup.jobdir(50) / "checkpoint" / "resize"
        assert not resize_file.exists() and not (setup.work / "told").exists()
        ctl.send(resize=resize)
        await wait_until(lambda: (setup.work / "told").exists(), "the job was told")
        assert "export SLURM_NNODES=1\n" in resize_file.read_text()
        ctl.send(signal=pb.SignalJob(job_id=50, signal=0, reason="cancel"))
        await ctl.expect("done", lambda m: m.job_id == 50)

    run(body, tmp_path)
