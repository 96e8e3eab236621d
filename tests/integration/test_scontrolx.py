"""scontrol's remaining commands (issue 19, point 6) on a real cluster of two emulated
nodes (whose RebootProgram's success is their reboot): top, notify, reboot,
listpids, node features; and (point 4) licenses kept by reservations. One cluster
serves the module."""

from __future__ import annotations

import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cli.demo import client_command
from corral import grpctls
from corral.client import Client, agent_socket_path
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.forkuser import call_as
from tests.integration.cluster import Cluster
from tests.security.rogue import controller_target, stamp_for_controller


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Under /tmp, open to all: a user other than root reaches the agent's socket.
    directory = Path(tempfile.mkdtemp(prefix="corral-scontrolx-", dir="/tmp"))
    directory.chmod(0o755)
    reboot = directory / "reboot"
    reboot.write_text(f'#!/bin/sh\necho "$SLURMD_NODENAME $1" >> {directory}/reboots\nsleep 3\n')
    reboot.chmod(0o755)
    settings = ("KillWait=2", f'RebootProgram="{reboot} --now"', "Licenses=foo:3")
    c = Cluster(directory, nodes=2, settings=settings)
    try:
        yield c.start()
    finally:
        c.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _as_stranger(cluster: Cluster, method: str, request: Any) -> Any:
    """``method`` called over gRPC as uid 4242, who owns nothing and is no operator."""
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        stranger = stamp_for_controller(cluster, request, method, uid=4242, gid=4242)
        return getattr(stub, method)(stranger, timeout=10)


def _priorities(cluster: Cluster, *ids: int) -> list[int]:
    out = cluster.run("squeue", "-h", "-o", "%i %Q", "-j", ",".join(map(str, ids))).stdout
    by_id = dict(line.split() for line in out.splitlines())
    return [int(by_id[str(i)]) for i in ids]


def test_top_moves_a_job_first_among_its_users_pending_ones(cluster: Cluster) -> None:
    ids = [cluster.sbatch("-o", "/dev/null", "--begin=now+1hour", "--wrap", "true") for _ in "abc"]
    cluster.run("scontrol", "top", str(ids[2]))
    first, second, third = _priorities(cluster, *ids)
    assert third > first > second
    assert f"Nice={-2}" in cluster.run("scontrol", "show", "job", str(ids[2])).stdout
    running = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 30")
    cluster.wait_state(running, {"RUNNING"})
    refused = cluster.run("scontrol", "top", f"{running},{ids[1]}", check=False)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"Job is no longer pending execution for job {running},{ids[1]}\n",
    )
    assert _priorities(cluster, *ids)[1] > _priorities(cluster, *ids)[0]  # ids[1] still moved
    with pytest.raises(grpc.RpcError) as refused_rpc:
        _as_stranger(cluster, "TopJob", pb.TopJobRequest(job_ids=[str(ids[0])]))
    assert refused_rpc.value.details() == "2002: Access/permission denied"
    cluster.run("scancel", *map(str, [*ids, running]))


def test_notify_reaches_salloc_and_is_refused_where_nothing_listens(cluster: Cluster) -> None:
    salloc = subprocess.Popen(
        [*client_command("salloc"), "sleep", "30"],
        env=cluster.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert salloc.stderr is not None
        granted = salloc.stderr.readline()
        assert granted.startswith("salloc: Granted job allocation ")
        job_id = int(granted.split()[-1])
        cluster.run("scontrol", "notify", str(job_id), "disk", "quota", "reached")
        assert salloc.stderr.readline() == "salloc: disk quota reached\n"
        with pytest.raises(grpc.RpcError) as refused:
            _as_stranger(cluster, "Notify", pb.NotifyRequest(job_id=job_id, message="hi"))
        assert refused.value.details() == "2002: Access/permission denied"
        cluster.run("scancel", str(job_id))
    finally:
        salloc.wait(timeout=30)
    batch = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 30")
    cluster.wait_state(batch, {"RUNNING"})
    told = cluster.run("scontrol", "notify", str(batch), "hello", check=False)
    assert (told.returncode, told.stderr) == (
        1,
        f"job notify failure: job {batch} is a batch job: "
        "no salloc or srun listens for its messages\n",
    )
    cluster.run("scancel", str(batch))
    gone = cluster.run("scontrol", "notify", "999999", "hello", check=False)
    assert (gone.returncode, gone.stderr) == (1, "job notify failure: Invalid job id specified\n")
    bad = cluster.run("scontrol", "notify", "abc", "hello", check=False)
    assert (bad.returncode, bad.stderr) == (1, "Invalid job_id abc\n")


def _node(cluster: Cluster) -> tuple[str, str]:
    """The node's State= and Reason= (without who set it when) as scontrol shows them."""
    line = cluster.run("scontrol", "-o", "show", "node", "node1").stdout
    state = line.split("State=", 1)[1].split()[0]
    reason = line.split("Reason=", 1)[1].split(" [")[0] if "Reason=" in line else ""
    return state, reason.strip()


def _idle(cluster: Cluster) -> None:
    cluster.wait_for(lambda: _node(cluster) == ("IDLE", ""), 15, "node1 not idle")


def test_reboot_waits_for_the_node_to_be_idle_and_runs_reboot_program(cluster: Cluster) -> None:
    _idle(cluster)
    job = cluster.sbatch("-o", "/dev/null", "-w", "node1", "--wrap", "sleep 30")
    cluster.wait_state(job, {"RUNNING"})
    cluster.run("scontrol", "reboot", "ASAP", "nextstate=RESUME", "node1")
    assert _node(cluster) == ("MIXED+DRAIN+REBOOT_REQUESTED", "Reboot ASAP")
    assert cluster.run("sinfo", "-h", "-n", "node1", "-o", "%t").stdout == "drng@\n"
    with pytest.raises(grpc.RpcError) as refused:
        _as_stranger(cluster, "NodeReboot", pb.NodeRebootRequest(nodes="node1", cancel=True))
    assert refused.value.details() == "2002: Access/permission denied"
    cluster.run("scancel", str(job))
    # The reboot program takes 3 s: sinfo shows the reboot issued meanwhile.
    shown = lambda: cluster.run("sinfo", "-h", "-n", "node1", "-o", "%t").stdout  # noqa: E731
    cluster.wait_for(lambda: shown() == "boot^\n", 15, "no reboot issued")
    assert _node(cluster)[0].endswith("REBOOT_ISSUED")
    _idle(cluster)
    assert (cluster.dir / "reboots").read_text() == "node1 --now\n"


def test_a_reboot_not_yet_issued_can_be_cancelled(cluster: Cluster) -> None:
    _idle(cluster)
    job = cluster.sbatch("-o", "/dev/null", "-w", "node1", "--wrap", "sleep 30")
    cluster.wait_state(job, {"RUNNING"})
    cluster.run("scontrol", "reboot", "reason=firmware", "node1")
    assert _node(cluster) == ("MIXED+REBOOT_REQUESTED", "firmware")
    cluster.run("scontrol", "cancel_reboot", "node1")
    assert _node(cluster)[0] == "MIXED"
    cluster.run("scontrol", "reboot", "node1")
    cluster.run("scontrol", "update", "NodeName=node1", "State=CANCEL_REBOOT")
    assert _node(cluster)[0] == "MIXED"
    cluster.run("scancel", str(job))
    for words, stderr in (
        (("ASAP",), "Missing node list. Specify ALL|<NodeList>\n"),
        (("nextstate=UP", "node1"), "Invalid state: UP\nValid states: DOWN, RESUME\n"),
        (("node1", "node2"), "too many arguments for keyword:reboot\n"),
        (("nodeX",), "scontrol_reboot_nodes error: Invalid node name specified\n"),
    ):
        bad = cluster.run("scontrol", "reboot", *words, check=False)
        assert (bad.returncode, bad.stderr) == (1, stderr)


def test_node_features_set_by_scontrol_steer_constraint_and_show(cluster: Cluster) -> None:
    cluster.run("scontrol", "update", "NodeName=node1", "Features=fast,big")
    shown = cluster.run("scontrol", "show", "node", "node1").stdout
    assert "AvailableFeatures=fast,big" in shown and "ActiveFeatures=fast,big" in shown
    cluster.run("scontrol", "update", "NodeName=node1", "ActiveFeatures=fast")
    line = cluster.run("sinfo", "-h", "-n", "node1", "-o", "%f %b").stdout
    assert line == "fast,big fast\n"
    job = cluster.sbatch("-o", "/dev/null", "-C", "fast", "--wrap", "true")
    assert cluster.wait_done(job)["nodes"] == "node1"
    big = cluster.run("sbatch", "-C", "big", "--wrap", "true", check=False)
    assert big.stderr.endswith("Batch job submission failed: Invalid feature specification\n")
    bad = cluster.run("scontrol", "update", "NodeName=node1", "ActiveFeatures=huge", check=False)
    assert (bad.returncode, bad.stderr) == (
        1,
        "slurm_update error: Active features not subset of available\n",
    )
    request = pb.NodeUpdateRequest(nodes="node1", available_features="", set_available=True)
    with pytest.raises(grpc.RpcError) as refused:
        _as_stranger(cluster, "NodeUpdate", request)
    assert refused.value.details() == "2002: Access/permission denied"
    cluster.run("scontrol", "update", "NodeName=node1", "Features=")
    assert "AvailableFeatures=(null)" in cluster.run("scontrol", "show", "node", "node1").stdout


def test_listpids_names_a_jobs_processes_on_this_host_for_its_owner(cluster: Cluster) -> None:
    job = cluster.sbatch("-o", "/dev/null", "-w", "node1", "--wrap", "sleep 30; true")
    cluster.wait_state(job, {"RUNNING"})
    lines: list[str] = []

    def listed() -> bool:  # the agent knows the run once its supervisor has started it
        lines[:] = cluster.run("scontrol", "listpids", str(job), check=False).stdout.splitlines()
        return len(lines) == 3

    cluster.wait_for(listed, 10, "the script and its sleep not listed")
    assert lines[0].split() == ["PID", "JOBID", "STEPID", "LOCALID", "GLOBALID"]
    rows = sorted(line.split()[1:] for line in lines[1:])
    assert rows == [[str(job), "batch", "-", "-"], [str(job), "batch", "0", "0"]]
    assert cluster.run("scontrol", "listpids", f"{job}.batch", "node1").stdout.count("\n") == 3
    for words, stderr in (
        ((f"{job}.0",), f"Job step {job}.0 does not exist on this node.\n"),
        ((str(job), "node2"), f"Job {job} does not exist on node node2.\n"),
        (("x1",), '"x1" does not look like a jobid\n'),
    ):
        told = cluster.run("scontrol", "listpids", *words, check=False)
        assert (told.returncode, told.stderr) == (1, stderr)
    # The agent names the caller by its socket (SO_PEERCRED): uid 4242 owns no job.
    agent = Client(agent_socket_path(load(cluster.conf).slurmd_spool_dir))
    stranger = pwd.struct_passwd(("stranger", "x", 4242, 4242, "", "/", "/bin/sh"))
    seen = call_as(stranger, lambda: dict(agent.call("ListPids", {"job_id": job})))
    assert (seen["runs"], seen["rows"]) == (0, [])
    cluster.run("scancel", str(job))


def test_a_reservation_keeps_its_licenses_for_its_jobs(cluster: Cluster) -> None:
    cluster.run(
        "scontrol", "create", "reservation", "ReservationName=lic", "Users=root",
        "Nodes=node2", "StartTime=now", "Duration=60", "Licenses=foo:2",
    )  # fmt: skip
    shown = cluster.run("scontrol", "show", "reservation", "lic").stdout
    assert "Licenses=foo:2 State=ACTIVE" in shown
    assert cluster.run("scontrol", "-o", "show", "licenses").stdout == (
        "LicenseName=foo Total=3 Used=0 Free=3 Reserved=2 Remote=no\n"
    )
    outside = cluster.sbatch("-o", "/dev/null", "-L", "foo:2", "--wrap", "sleep 30")
    cluster.wait_for(lambda: cluster.job(outside)["reason"] == "Licenses", 10, "not Licenses")
    inside = cluster.sbatch(
        "-o", "/dev/null", "-L", "foo:3", "--reservation=lic", "--wrap", "sleep 30"
    )
    assert cluster.wait_state(inside, {"RUNNING"})["nodes"] == "node2"
    more = cluster.run(
        "scontrol", "create", "reservation", "Users=root", "Nodes=node1",
        "StartTime=now", "Duration=60", "Licenses=foo:2", check=False,
    )  # fmt: skip
    assert more.stderr == "Error creating the reservation: Invalid license specification\n"
    cluster.run("scancel", str(inside), str(outside))

    def deleted() -> bool:  # once its job has left its node
        return cluster.run("scontrol", "delete", "Res=lic", check=False).returncode == 0

    cluster.wait_for(deleted, 15, "reservation lic still in use")
