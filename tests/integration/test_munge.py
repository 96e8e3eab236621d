"""AuthType=auth/munge against a real munged (started here on its own socket and key):
agents attach, callers' credentials are MUNGE's, and MUNGE's refusals are Corral's."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from corral import auth, credentials, grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.integration.test_remote_clients import remote_conf


@pytest.fixture
def munged() -> Iterator[str]:
    """A munged of its own; its socket's path."""
    if shutil.which("munged") is None or shutil.which("munge") is None:
        pytest.skip("MUNGE is not installed")
    if os.geteuid() != 0:
        pytest.skip("munged's files must be root's here")
    home = Path(tempfile.mkdtemp(prefix="corral-munge-"))
    home.chmod(0o755)  # every user reaches the socket
    key = home / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    socket = home / "munge.socket"
    daemon = subprocess.Popen(
        [
            "munged",
            "--foreground",
            "--force",
            f"--socket={socket}",
            f"--key-file={key}",
            f"--log-file={home / 'munged.log'}",
            f"--pid-file={home / 'munged.pid'}",
            f"--seed-file={home / 'munged.seed'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not socket.exists():
            assert time.monotonic() < deadline and daemon.poll() is None, "munged did not start"
            time.sleep(0.05)
        yield str(socket)
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def _refusal(stub: pb_grpc.ControllerStub, request: pb.JobsRequest) -> str:
    with pytest.raises(grpc.RpcError) as refused:
        stub.Jobs(request, timeout=10)
    return str(refused.value.details())


def test_munge_credentials(
    make_cluster: Callable[..., Cluster], munged: str, users: tuple[str, ...]
) -> None:
    # The agents attach through MUNGE: start() waits for their nodes.
    cluster = make_cluster(settings=("AuthType=auth/munge", f"AuthInfo=socket={munged},ttl=30"))
    conf = load(cluster.conf)
    receiver = auth.controller_receiver(conf.cluster_name)
    keys, _ = auth.settings_keys(cluster.conf, dict(conf.settings))
    assert keys.munge is not None
    method = credentials.controller_method("Jobs")
    user = pwd.getpwnam(users[0])

    def stamped(key: object, uid: int = 0) -> pb.JobsRequest:
        request = pb.JobsRequest()
        credentials.stamp(
            request,
            key,  # type: ignore[arg-type]
            uid=uid,
            gid=uid,
            method=method,
            receiver=receiver,
            ttl=30,
        )
        return request

    def by_user(claimed_uid: int) -> pb.JobsRequest:
        """A credential the ordinary user makes with munge(1), naming ``claimed_uid``."""
        request = pb.JobsRequest()
        cred = pb.Credential(
            uid=claimed_uid, gid=user.pw_gid, issued=int(time.time()), nonce=os.urandom(16)
        )
        cred.expires = cred.issued + 30
        payload = auth.seal_payload(
            method,
            receiver,
            credentials.digest(request),
            cred.SerializeToString(deterministic=True),
        )
        made = subprocess.run(
            ["munge", f"--socket={munged}"],
            input=payload,
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=[],
            capture_output=True,
            check=True,
        )
        cred.signature = made.stdout.strip()
        request.cred.CopyFrom(cred)
        return request

    with grpctls.sync_channel(conf.controller_target, conf.tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        taken = stamped(keys.munge)
        stub.Jobs(taken, timeout=10)
        assert _refusal(stub, taken).endswith("Replayed credential")
        hmac_made = _refusal(stub, stamped(keys.credential))
        assert hmac_made.startswith("2002: Invalid authentication credential: MUNGE:")
        stub.Jobs(by_user(user.pw_uid), timeout=10)  # a user's own credential: as them
        forged = _refusal(stub, by_user(0))
        assert (
            forged
            == f"2002: Invalid authentication credential: uid {user.pw_uid} made it for uid 0"
        )
    # Client commands on other hosts go through the agent, which vouches through MUNGE.
    remote = {"SLURM_CONF": remote_conf(cluster)}
    out = cluster.run("sbatch", "--parsable", "--wrap", "srun true", env=remote).stdout
    assert cluster.wait_done(int(out.strip()))["state"] == "COMPLETED"
    assert "root" in cluster.run("squeue", "-h", "-t", "all", "-o", "%u", env=remote).stdout
