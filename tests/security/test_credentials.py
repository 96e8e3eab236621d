"""Credentials that cannot be reused, and keys that must be kept: attacks on the real
controller's gRPC API and corral-dbd, and daemons started on an insecure key.

A credential captured from one call (on the wire, or in a log) is replayed, or
moved to another method, another request or another receiver; each is refused
while the same credential, used once for what it was made for, is taken.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from cli.corral import restd_env
from corral import auth, credentials, grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from dbd.config import load as load_dbd_config
from tests.integration.cluster import Cluster
from tests.security.rogue import controller_target, keys_of, stamp_for_controller


def _spec(cluster: Cluster, name: str) -> pb.JobSpec:
    return pb.JobSpec(
        name=name,
        script="#!/bin/sh\ntrue\n",
        work_dir=str(cluster.dir),
        submit_dir=str(cluster.dir),
        hold=True,
        environment={"PATH": "/usr/bin:/bin"},
    )


def _refusal(call: Any, request: Any) -> str:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)
    assert refused.value.code() in (
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    )
    return str(refused.value.details())


def test_a_captured_credential_serves_no_other_call(cluster: Cluster) -> None:
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        submit = stamp_for_controller(
            cluster, pb.SubmitRequest(spec=_spec(cluster, "first")), "Submit"
        )
        job = stub.Submit(submit, timeout=10).job_id
        # Replayed as it was captured.
        assert _refusal(stub.Submit, submit).endswith("replayed")
        # Moved to another request body of the same method.
        other = pb.SubmitRequest(spec=_spec(cluster, "second"))
        other.cred.CopyFrom(stamp_for_controller(cluster, pb.SubmitRequest(), "Submit").cred)
        assert _refusal(stub.Submit, other) == "2002: Invalid authentication credential"
        # Moved to another method: a listing's credential on a cancel of the job.
        listing = stamp_for_controller(cluster, pb.JobsRequest(), "Jobs")
        cancel = pb.SignalRequest(filter=pb.JobFilter(job_ids=[str(job)]))
        cancel.cred.CopyFrom(listing.cred)
        assert _refusal(stub.Signal, cancel) == "2002: Invalid authentication credential"
        # Made for another receiver: dbd, or the controller of another cluster.
        for receiver in (auth.DBD_RECEIVER, auth.controller_receiver("elsewhere")):
            request = pb.SignalRequest(filter=pb.JobFilter(job_ids=[str(job)]))
            stamped = stamp_for_controller(cluster, request, "Signal", receiver=receiver)
            assert _refusal(stub.Signal, stamped) == "2002: Invalid authentication credential"
        # Expired, or issued for longer than AuthInfo's ttl.
        late = stamp_for_controller(cluster, cancel, "Signal", now=int(time.time()) - 120)
        assert _refusal(stub.Signal, late).endswith("expired")
        long = stamp_for_controller(cluster, cancel, "Signal", ttl=3600)
        assert _refusal(stub.Signal, long).endswith("lifetime longer than AuthInfo ttl")
    jobs = cluster.jobs()
    assert [(j["job_id"], j["name"], j["state"]) for j in jobs] == [(job, "first", "PENDING")]


@pytest.fixture
def accounted(tmp_path: Path) -> Any:
    cluster = Cluster(tmp_path / "c", 1, ("KillWait=2",), accounting=True)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def test_dbd_takes_records_and_answers_associations_only_from_daemons(
    accounted: Cluster, users: tuple[str, ...]
) -> None:
    cluster = accounted
    user = pwd.getpwnam(users[0])
    dbd = load_dbd_config(str(cluster.dir / "slurmdbd.conf"))
    key = keys_of(cluster).credential

    def signed(method: str, request: Any, uid: int) -> Any:
        return credentials.stamp(
            request,
            key,
            uid=uid,
            gid=uid,
            method=credentials.accounting_method(method),
            receiver=auth.DBD_RECEIVER,
        )

    forged = pb.JobInfo(job_id=777777, name="forged", uid=user.pw_uid, state="COMPLETED")

    async def attack() -> dict[str, grpc.StatusCode]:
        target = f"{dbd.dbd_addr}:{dbd.dbd_port}"
        tls = load(cluster.conf).tls  # the controller's certificate: dbd asks for one
        async with grpctls.channel(target, tls, role="ctld") as channel:
            stub = pb_grpc.AccountingStub(channel)  # type: ignore[no-untyped-call]
            record = pb.RecordJobsRequest(cluster="corral", jobs=[forged], seqs=[1 << 40])
            register = pb.RegisterClusterRequest(cluster="forged", control_host="127.0.0.1")
            enforced = pb.AssociationsRequest(cluster="corral")
            codes = {}
            for name, call, request in (
                ("RecordJobs", stub.RecordJobs, record),
                ("RegisterCluster", stub.RegisterCluster, register),
                ("Associations", stub.Associations, enforced),
            ):
                try:
                    await call(signed(name, request, user.pw_uid), timeout=10)
                    codes[name] = grpc.StatusCode.OK
                except grpc.aio.AioRpcError as exc:
                    codes[name] = exc.code()
            # The user's own query still goes through, as them.
            query = pb.HistoryRequest(filter=pb.HistoryFilter(clusters=["all"]))
            await stub.History(signed("History", query, user.pw_uid), timeout=10)
            return codes

    codes = asyncio.run(attack())
    assert codes == {
        "RecordJobs": grpc.StatusCode.PERMISSION_DENIED,
        "RegisterCluster": grpc.StatusCode.PERMISSION_DENIED,
        "Associations": grpc.StatusCode.PERMISSION_DENIED,
    }
    sacct = cluster.run("sacct", "-X", "-n", "-a", "-P", "-o", "JobID,JobName", "-M", "all")
    assert "777777" not in sacct.stdout
    clusters = cluster.run("sacctmgr", "-n", "-P", "show", "clusters", "format=cluster")
    assert "forged" not in clusters.stdout.split()
    assert "not root or SlurmUser" in cluster.log("dbd")


def _start(module: str, conf: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, "-f", conf],
        env={**os.environ, **restd_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_daemons_refuse_an_insecure_key(tmp_path: Path, users: tuple[str, ...]) -> None:
    cluster = Cluster(tmp_path / "c", 1, accounting=True)
    key = auth.key_path(cluster.conf)
    daemons = {
        "controller.main": cluster.conf,
        "nodeagent.main": cluster.conf,
        "restd.main": cluster.conf,
        "dbd.main": str(cluster.dir / "slurmdbd.conf"),
    }
    os.chmod(key, 0o640)
    for module, conf in daemons.items():
        started = _start(module, conf)
        assert started.returncode == 1, (module, started.stderr)
        assert (
            f"cluster key {key} is insecure: mode 0640 lets group or others read or write it"
        ) in started.stderr, (module, started.stderr)
    os.chmod(key, 0o600)
    user = pwd.getpwnam(users[0])
    os.chown(key, user.pw_uid, user.pw_gid)
    started = _start("controller.main", cluster.conf)
    assert started.returncode == 1
    assert (
        f"corral-controller: fatal: cluster key {key} is insecure: owned by {users[0]} "
        f"(uid {user.pw_uid}), not by root or SlurmUser"
    ) in started.stderr
