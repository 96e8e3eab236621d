"""Two controllers (SlurmctldHost lines) sharing a state in MariaDB (docs/ha.md): the
backup in standby refuses requests, takes over once the primary is killed, and the
node agents, the agents' client proxy and the clients follow it; scontrol ping
shows both; scontrol takeover hands control over, for SuperUser only.

MariaDB is the one at 127.0.0.1:3306 (tests/databases.py): skipped where it cannot be
reached, except under CI, where the tests fail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from corral import errors, grpctls
from corral.config import load
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.databases import fresh_state_database
from tests.integration.cluster import Cluster
from tests.integration.hapair import Controllers, ha_settings
from tests.integration.rest import Rest
from tests.integration.test_restd import token_for
from tests.security.rogue import stamp_for_controller


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Controllers]:
    """A 2-node cluster with both controllers up, the first serving."""
    with fresh_state_database(tmp_path) as storage:
        cluster = Cluster(tmp_path / "c", nodes=2, settings=ha_settings(storage), tls=False)
        both = Controllers(cluster)
        try:
            both.start_cluster()
            yield both
        finally:
            cluster.stop()
            both.stop()


def test_a_backup_takes_over_from_a_killed_primary(pair: Controllers, tmp_path: Path) -> None:
    c = pair.cluster
    primary, backup = pair.names
    assert c.run("scontrol", "ping").stdout == (
        f"Slurmctld(primary) at {primary} is UP\nSlurmctld(backup) at {backup} is UP\n"
    )
    with pytest.raises(SlurmError) as refused:
        type(pair.client)(pair.sockets[1], timeout=5).call("Jobs", {})
    assert (refused.value.code, str(refused.value)) == (
        errors.ESLURM_IN_STANDBY_MODE,
        "Slurm backup controller in standby mode",
    )
    assert "standby on 127.0.0.2:" in pair.log(1).read_text()
    shown = c.run("scontrol", "show", "config").stdout
    shown_hosts = [line.split() for line in shown.splitlines() if line.startswith("SlurmctldHost")]
    assert shown_hosts[1] == ["SlurmctldHost[1]", "=", f"{backup}(127.0.0.2)"]

    out = tmp_path / "long.out"
    rest = Rest(c.start_restd(), token_for(c, "root"))
    running = c.sbatch(f"--output={out}", "--wrap", "sleep 3; echo survived")
    c.wait_state(running, {"RUNNING"})
    pair.kill(0)
    began = time.monotonic()
    assert pair.wait_serving(30) == 1
    print(f"takeover after a kill -9: {time.monotonic() - began:.2f} s")

    # The agent re-registered with the backup, and the job that ran through the
    # takeover is reported to it; a client on this host reaches it by itself.
    assert c.wait_done(running, timeout=30)["state"] == "COMPLETED"
    assert out.read_text() == "survived\n"
    after = c.sbatch("--output=/dev/null", "--wrap", "true")
    assert c.wait_done(after, timeout=30)["state"] == "COMPLETED"
    status, listed = rest.call("GET", f"/slurm/v0.0.42/job/{after}")  # restd follows too
    assert status == 200 and [job["job_id"] for job in listed["jobs"]] == [after]
    pinged = c.run("scontrol", "ping", check=False)
    assert pinged.returncode == 1
    assert pinged.stdout.startswith(
        f"Slurmctld(primary) at {primary} is DOWN\nSlurmctld(backup) at {backup} is UP\n"
    )
    # Through the node agent's client proxy too (a host without a controller).
    hidden = c.dir / "state" / "hidden"
    hidden.mkdir()
    for path in pair.sockets:  # no controller socket on "this host": the agent's serves
        if os.path.exists(path):
            os.rename(path, hidden / os.path.basename(path))
    listed = c.run("squeue", "-h", "-j", str(after), "-t", "all", "-o", "%T")
    assert listed.stdout == "COMPLETED\n"
    for moved in hidden.iterdir():
        os.rename(moved, c.dir / "state" / moved.name)

    # The primary started again asks the backup for control back, as slurmctld's does.
    pair.start(0)
    pair.cluster.wait_for(lambda: pair.serving() == 0, 30, "the primary did not take over")
    assert "takeover: 127.0.0.2:" in pair.log(0).read_text()
    back = c.sbatch("--output=/dev/null", "--wrap", "true")
    assert c.wait_done(back, timeout=30)["state"] == "COMPLETED"
    assert c.run("scontrol", "ping").stdout == (
        f"Slurmctld(primary) at {primary} is UP\nSlurmctld(backup) at {backup} is UP\n"
    )


def test_takeover_hands_control_over_for_superuser_only(pair: Controllers) -> None:
    c = pair.cluster
    conf = load(c.conf)
    with grpctls.sync_channel(conf.controller_targets[0], conf.tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        for request in (
            stamp_for_controller(c, pb.TakeoverRequest(index=1), "Takeover", uid=4242, gid=4242),
            pb.TakeoverRequest(index=1),  # no credential at all
        ):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Takeover(request, timeout=10)
            assert refused.value.details().startswith("2002: ")
    assert pair.serving() == 0

    began = time.monotonic()
    assert c.run("scontrol", "takeover").returncode == 0
    assert pair.wait_serving(30) == 1
    print(f"takeover on request: {time.monotonic() - began:.2f} s")
    assert "lease: handed to ctl2" in pair.log(0).read_text()
    assert pair.procs[0].poll() is None, "the old primary waits in standby"
    done = c.sbatch("--output=/dev/null", "--wrap", "true")
    assert c.wait_done(done, timeout=30)["state"] == "COMPLETED"
    assert pair.answers(0) and pair.serving() == 1


VIP = "127.0.0.3"  # SlurmctldAddr: on loopback, as a virtual address would be on one host


def _at_vip(conf_path: str) -> str:
    """The host of the controller that answers at SlurmctldAddr; "" for none."""
    conf = load(conf_path)
    assert conf.ctld_addr_target is not None
    with grpctls.sync_channel(conf.ctld_addr_target, conf.tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        try:
            reply: pb.PingReply = stub.Ping(pb.PingRequest(), timeout=5)
        except grpc.RpcError:
            return ""
        return reply.host


def test_agents_and_restd_follow_slurmctldaddr_to_the_serving_controller(
    tmp_path: Path,
) -> None:
    """With SlurmctldAddr, agents and restd know that address alone; only the
    controller that serves listens there, so they follow it through a takeover."""
    with fresh_state_database(tmp_path) as storage:
        settings = (*ha_settings(storage), f"SlurmctldAddr={VIP}")
        cluster = Cluster(tmp_path / "c", nodes=2, settings=settings, tls=False)
        pair = Controllers(cluster)
        try:
            pair.start_cluster()
            c = pair.cluster
            primary, backup = pair.names
            target = load(c.conf).ctld_addr_target
            assert f"controller {target}\n" in c.log("nodeagent")
            c.wait_for(lambda: _at_vip(c.conf) == primary, 30, "no controller at the VIP")
            assert f"listening on {target}" not in pair.log(1).read_text()
            rest = Rest(c.start_restd(), token_for(c, "root"))

            out = tmp_path / "long.out"
            running = c.sbatch(f"--output={out}", "--wrap", "sleep 3; echo survived")
            c.wait_state(running, {"RUNNING"})
            pair.kill(0)
            assert pair.wait_serving(30) == 1
            c.wait_for(lambda: _at_vip(c.conf) == backup, 30, "the VIP did not follow")
            assert c.wait_done(running, timeout=30)["state"] == "COMPLETED"
            assert out.read_text() == "survived\n"
            after = c.sbatch("--output=/dev/null", "--wrap", "true")
            assert c.wait_done(after, timeout=30)["state"] == "COMPLETED"
            status, listed = rest.call("GET", f"/slurm/v0.0.42/job/{after}")
            assert status == 200 and [job["job_id"] for job in listed["jobs"]] == [after]

            # The primary back takes control back: the backup lets the address go.
            pair.start(0)
            c.wait_for(lambda: pair.serving() == 0, 30, "the primary did not take over")
            c.wait_for(lambda: _at_vip(c.conf) == primary, 30, "the VIP did not return")
            assert f"no longer listening on {target}" in pair.log(1).read_text()
            back = c.sbatch("--output=/dev/null", "--wrap", "true")
            assert c.wait_done(back, timeout=30)["state"] == "COMPLETED"
        finally:
            cluster.stop()
            pair.stop()
