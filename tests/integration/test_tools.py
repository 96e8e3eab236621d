"""Issue 19's remaining tools on a real two-node cluster: --mail-type through MailProg,
--nodefile, squeue's and sinfo's --json/--yaml. One cluster serves the module (each
test's jobs are its own)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml

from corral import grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from restd.jobs import JOB_INFO
from tests.integration.cluster import Cluster
from tests.security.rogue import controller_target, stamp_for_controller


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("tools")
    mailprog = directory / "mailprog"
    # MailProg's arguments and variables, one line a mail.
    mailprog.write_text(
        f'#!/bin/sh\necho "$1|$2|$3|$SLURM_JOB_MAIL_TYPE|$SLURM_JOB_ID" >> {directory}/mails\n'
    )
    mailprog.chmod(0o755)
    c = Cluster(directory, nodes=2, settings=("KillWait=2", f"MailProg={mailprog}"))
    try:
        yield c.start()
    finally:
        c.stop()


def _mails(cluster: Cluster) -> list[str]:
    path = cluster.dir / "mails"
    return path.read_text().splitlines() if path.exists() else []


def test_mail_on_begin_and_end_by_mailprog(cluster: Cluster) -> None:
    job_id = cluster.sbatch(
        "--mail-type=BEGIN,FAIL", "--mail-user=ops@example.org", "-J", "mailed",
        "-o", "/dev/null", "--wrap", "exit 3",
    )  # fmt: skip
    assert cluster.wait_done(job_id)["state"] == "FAILED"
    shown = cluster.run("scontrol", "show", "job", str(job_id)).stdout
    assert "MailUser=ops@example.org MailType=BEGIN,FAIL" in shown
    cluster.wait_for(lambda: len(_mails(cluster)) >= 2, 15, "two mails were not sent")
    began, failed = sorted(_mails(cluster), key=lambda line: "Failed" in line)
    assert began.startswith(f"-s|Slurm Job_id={job_id} Name=mailed Began, Queued time 00:00:")
    assert began.endswith(f"|ops@example.org|Began|{job_id}")
    assert failed.startswith(f"-s|Slurm Job_id={job_id} Name=mailed Failed, Run time 00:00:")
    assert failed.endswith(f", FAILED, ExitCode 3|ops@example.org|Failed|{job_id}")
    bad = cluster.run("sbatch", "--mail-type=SOMETIMES", "--wrap", "true", check=False)
    assert (bad.returncode, bad.stderr) == (
        255,
        "sbatch: error: Invalid --mail-type specification\n",
    )


def test_nodefile_places_the_job_as_nodelist_would(cluster: Cluster, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# the second node only\nnode2\n")
    job_id = cluster.sbatch("-F", str(hosts), "-o", "/dev/null", "--wrap", "true")
    assert cluster.wait_done(job_id)["nodes"] == "node2"
    step = cluster.run("srun", f"--nodefile={hosts}", "printenv", "SLURMD_NODENAME")
    assert step.stdout == "node2\n"
    missing = cluster.run("srun", "-F", str(tmp_path / "none"), "true", check=False)
    assert missing.returncode == 255
    assert missing.stderr.endswith("srun: error: Invalid --nodefile node file\n"), missing.stderr


def test_squeue_and_sinfo_json_and_yaml_print_restds_records(cluster: Cluster) -> None:
    job_id = cluster.sbatch("--hold", "-J", "dumped: yes", "--mail-type=END", "--wrap", "true")
    shown = json.loads(cluster.run("squeue", "--json").stdout)
    assert shown["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.42"
    assert shown["meta"]["command"] == ["squeue", "--json"]
    (record,) = [j for j in shown["jobs"] if j["job_id"] == job_id]
    assert set(record) == set(JOB_INFO["properties"])
    assert (record["name"], record["job_state"], record["mail_type"]) == (
        "dumped: yes", ["PENDING"], ["END"],
    )  # fmt: skip
    as_yaml = yaml.safe_load(cluster.run("squeue", "--yaml", "-j", str(job_id)).stdout)
    assert as_yaml["jobs"] == [record]
    nodes = json.loads(cluster.run("sinfo", "--json", "-n", "node1").stdout)
    assert [n["name"] for n in nodes["nodes"]] == ["node1"]
    assert {p["name"] for p in nodes["partitions"]} == {"debug"}
    assert (
        yaml.safe_load(cluster.run("sinfo", "--yaml").stdout)["partitions"] == (nodes["partitions"])
    )
    bad = cluster.run("squeue", "--json=v0.0.39", check=False)
    assert bad.returncode == 1
    assert bad.stderr == (
        "squeue: error: --json=v0.0.39 is not supported: only data_parser v0.0.42 is\n"
    )
    cluster.run("scancel", str(job_id))


def test_write_batch_script_for_its_owner_only(cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH -J written\necho hi\n")
    job_id = cluster.sbatch("--hold", str(script))
    shown = cluster.run("scontrol", "write", "batch_script", str(job_id), "-")
    assert shown.stdout == script.read_text()
    written = cluster.run("scontrol", "write", "batch", str(job_id), cwd=tmp_path)
    assert written.stdout == f"batch script for job {job_id} written to slurm-{job_id}.sh\n"
    assert (tmp_path / f"slurm-{job_id}.sh").read_text() == script.read_text()
    missing = cluster.run("scontrol", "write", "batch_script", "999999", check=False)
    assert (missing.returncode, missing.stderr) == (
        1, "job script retrieval failed: Invalid job id specified\n",
    )  # fmt: skip
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.BatchScriptRequest(job_id=str(job_id))
        with pytest.raises(grpc.RpcError) as unsigned:
            stub.BatchScript(request, timeout=10)
        assert unsigned.value.code() in (
            grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
        )  # fmt: skip
        stranger = stamp_for_controller(cluster, request, "BatchScript", uid=4242, gid=4242)
        with pytest.raises(grpc.RpcError) as refused:
            stub.BatchScript(stranger, timeout=10)
        assert refused.value.details() == "2002: Access/permission denied"
        owner = stub.BatchScript(stamp_for_controller(cluster, request, "BatchScript"), timeout=10)
        assert owner.script == script.read_text()
    cluster.run("scancel", str(job_id))


def test_partition_state_updates_by_administrators(cluster: Cluster) -> None:
    cluster.run("scontrol", "update", "PartitionName=debug", "State=DOWN")
    assert "State=DOWN" in cluster.run("scontrol", "show", "partition", "debug").stdout
    job_id = cluster.sbatch("-o", "/dev/null", "--wrap", "true")
    cluster.wait_for(
        lambda: cluster.job(job_id)["reason"] == "PartitionDown", 10, "no PartitionDown"
    )
    cluster.run("scontrol", "update", "PartitionName=debug", "State=DRAIN")
    drained = cluster.run("sbatch", "--wrap", "true", check=False)
    assert drained.stderr == (
        "sbatch: error: Batch job submission failed: "
        "Required partition not available (inactive or drain)\n"
    )
    assert cluster.wait_done(job_id)["state"] == "COMPLETED"  # DRAIN starts what waits
    bad = cluster.run("scontrol", "update", "PartitionName=debug", "State=SOON", check=False)
    assert bad.stderr == (
        "scontrol: error: Invalid input: State=SOON\n"
        "scontrol: error: Acceptable State values are UP, DOWN, DRAIN and INACTIVE\n"
    )
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.PartitionUpdateRequest(name="debug", state="UP")
        with pytest.raises(grpc.RpcError) as unsigned:
            stub.PartitionUpdate(request, timeout=10)
        assert unsigned.value.code() in (
            grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
        )  # fmt: skip
        stranger = stamp_for_controller(cluster, request, "PartitionUpdate", uid=4242, gid=4242)
        with pytest.raises(grpc.RpcError) as refused:
            stub.PartitionUpdate(stranger, timeout=10)
        assert refused.value.details() == "2002: Access/permission denied"
    cluster.run("scontrol", "update", "PartitionName=debug", "State=UP")
    assert "State=UP" in cluster.run("scontrol", "show", "partition", "debug").stdout


def test_shutdown_is_for_administrators_and_names_the_controller(cluster: Cluster) -> None:
    plain = cluster.run("scontrol", "shutdown", check=False)
    assert plain.returncode == 1
    assert plain.stderr.startswith("slurm_shutdown error: shutting down the node agents")
    bad = cluster.run("scontrol", "shutdown", "everything", check=False)
    assert (bad.returncode, bad.stderr) == (1, "invalid shutdown argument:everything\n")
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.ShutdownRequest()
        stranger = stamp_for_controller(cluster, request, "Shutdown", uid=4242, gid=4242)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Shutdown(stranger, timeout=10)
        assert refused.value.details() == "2002: Access/permission denied"
    assert cluster.run("scontrol", "ping").stdout.endswith("is UP\n")
    # Last in the module: root's shutdown ends the controller.
    assert cluster.run("scontrol", "shutdown", "slurmctld").returncode == 0
    assert cluster.controller is not None
    assert cluster.controller.wait(timeout=30) == 0
