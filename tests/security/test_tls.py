"""Internal traffic under TLS: what a client without the cluster's trust, and a reader of the
wire, get from a real cluster (corral up's configuration: TLS on, dbd asking for client
certificates, srun's I/O sealed).

The capture reads every packet on the loopback interface through an AF_PACKET socket (root
only), rebuilds each TCP direction's byte stream, and looks in them for what must never travel
in clear: the cluster key, a minted JWT, a credential's signature, a job script's text and a
task's output. A marker sent in clear over loopback during the same capture proves the capture
would have seen them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from corral import auth, certs
from corral import credentials as credentials_module
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from dbd.config import load as load_dbd
from tests.integration.cluster import Cluster
from tests.integration.rest import Rest
from tests.security.rogue import keys_of, stamp_for_controller

ETH_P_ALL = 0x0003
PACKET_HOST = 0  # each loopback packet shows twice, outgoing and incoming: keep one


@pytest.fixture
def secure(tmp_path: Path) -> Iterator[Cluster]:
    """Two nodes with accounting, TLS on (the default of corral up's configuration)."""
    c = Cluster(tmp_path, nodes=2, settings=("KillWait=2",), accounting=True)
    try:
        yield c.start()
    finally:
        c.stop()


def other_ca(tmp_path: Path) -> Path:
    """A CA that is not the cluster's, with a certificate for 127.0.0.1."""
    where = tmp_path / "other-ca"
    where.mkdir()
    certs.create_ca(str(where / "ca_cert.pem"), str(where / "ca_key.pem"))
    certs.issue(
        str(where / "ca_cert.pem"),
        str(where / "ca_key.pem"),
        "ctld",
        ["127.0.0.1"],
        str(where / "cert.pem"),
        str(where / "key.pem"),
    )
    return where


def jobs_request(cluster: Cluster) -> pb.JobsRequest:
    """A Jobs request with a root credential made for this cluster's controller."""
    request: pb.JobsRequest = stamp_for_controller(cluster, pb.JobsRequest(), "Jobs")
    return request


def channel(target: str, credentials: grpc.ChannelCredentials | None) -> grpc.aio.Channel:
    """A channel to ``target``: TLS with ``credentials``, else plaintext (in a running loop)."""
    if credentials is None:
        return grpc.aio.insecure_channel(target)
    return grpc.aio.secure_channel(target, credentials)


def jobs(
    target: str, credentials: grpc.ChannelCredentials | None, request: pb.JobsRequest
) -> grpc.StatusCode:
    """A Jobs ``request`` to the controller: how it ended.

    Anything but UNAVAILABLE means the call reached the controller's code, whatever
    the controller then thought of the credential.
    """

    async def call() -> grpc.StatusCode:
        async with channel(target, credentials) as opened:
            stub = pb_grpc.ControllerStub(opened)  # type: ignore[no-untyped-call]
            try:
                await stub.Jobs(request, timeout=5)
            except grpc.aio.AioRpcError as exc:
                return exc.code()
            return grpc.StatusCode.OK

    return asyncio.run(call())


def register(
    target: str, credentials: grpc.ChannelCredentials | None, key: bytes
) -> grpc.StatusCode:
    """A RegisterCluster call to dbd with a root credential: how it ended."""

    async def call() -> grpc.StatusCode:
        async with channel(target, credentials) as opened:
            stub = pb_grpc.AccountingStub(opened)  # type: ignore[no-untyped-call]
            request = credentials_module.stamp(
                pb.RegisterClusterRequest(cluster="intruder"),
                key,
                uid=0,
                gid=0,
                method=credentials_module.accounting_method("RegisterCluster"),
                receiver=auth.DBD_RECEIVER,
            )
            try:
                await stub.RegisterCluster(request, timeout=5)
            except grpc.aio.AioRpcError as exc:
                return exc.code()
            return grpc.StatusCode.OK

    return asyncio.run(call())


UNAVAILABLE = grpc.StatusCode.UNAVAILABLE  # what a failed TLS handshake looks like to a client


def test_a_plaintext_client_is_refused_by_the_controller_and_by_dbd(secure: Cluster) -> None:
    conf = load(secure.conf)
    key = keys_of(secure).credential
    dbd = load_dbd(str(secure.dir / "slurmdbd.conf"))
    ca = Path(conf.tls.ca_cert_file).read_bytes()
    ctld = conf.controller_target
    # The right CA gets through: the refusals below are TLS's doing, not a dead daemon.
    assert jobs(ctld, grpc.ssl_channel_credentials(ca), jobs_request(secure)) != UNAVAILABLE
    assert jobs(ctld, None, jobs_request(secure)) == UNAVAILABLE
    assert register(f"127.0.0.1:{dbd.dbd_port}", None, key) == UNAVAILABLE


def test_a_client_trusting_another_ca_is_refused(secure: Cluster, tmp_path: Path) -> None:
    conf = load(secure.conf)
    theirs = other_ca(tmp_path)
    wrong = grpc.ssl_channel_credentials((theirs / "ca_cert.pem").read_bytes())
    assert jobs(conf.controller_target, wrong, jobs_request(secure)) == UNAVAILABLE


def test_dbd_refuses_a_client_without_a_certificate_of_the_cluster_ca(
    secure: Cluster, tmp_path: Path
) -> None:
    """Mutual TLS: the cluster's CA and key are not enough; a certificate it signed is."""
    conf = load(secure.conf)
    key = keys_of(secure).credential
    target = f"127.0.0.1:{load_dbd(str(secure.dir / 'slurmdbd.conf')).dbd_port}"
    ca = Path(conf.tls.ca_cert_file).read_bytes()
    theirs = other_ca(tmp_path)
    no_cert = grpc.ssl_channel_credentials(ca)
    assert register(target, no_cert, key) == UNAVAILABLE
    foreign = grpc.ssl_channel_credentials(
        ca, (theirs / "key.pem").read_bytes(), (theirs / "cert.pem").read_bytes()
    )
    assert register(target, foreign, key) == UNAVAILABLE
    cert, cert_key = conf.tls.cert_pair("ctld")
    ours = grpc.ssl_channel_credentials(ca, Path(cert_key).read_bytes(), Path(cert).read_bytes())
    assert register(target, ours, key) != UNAVAILABLE


class Capture:
    """Every TCP payload on lo while running, as byte streams by (src, sport, dst, dport)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.2)
        self.flows: dict[tuple[str, int, str, int], bytearray] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                packet, address = self.sock.recvfrom(1 << 17)
            except TimeoutError:
                continue
            if address[2] == PACKET_HOST:
                self._take(packet[14:])  # after the (zeroed) Ethernet header of lo

    def _take(self, ip: bytes) -> None:
        version = ip[0] >> 4
        if version == 4 and ip[9] == socket.IPPROTO_TCP:
            start = (ip[0] & 0x0F) * 4
            src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
            end = struct.unpack("!H", ip[2:4])[0]
        elif version == 6 and ip[6] == socket.IPPROTO_TCP:
            start = 40
            src = socket.inet_ntop(socket.AF_INET6, ip[8:24])
            dst = socket.inet_ntop(socket.AF_INET6, ip[24:40])
            end = 40 + struct.unpack("!H", ip[4:6])[0]
        else:
            return
        tcp = ip[start:end]
        sport, dport = struct.unpack("!HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if payload:
            self.flows.setdefault((src, sport, dst, dport), bytearray()).extend(payload)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.sock.close()

    def holding(self, secret: bytes) -> list[tuple[str, int, str, int]]:
        """The flows whose bytes contain ``secret``."""
        return [flow for flow, data in self.flows.items() if secret in data]

    def port_bytes(self, port: int) -> int:
        flows = self.flows.items()
        return sum(len(data) for (_, sport, _, dport), data in flows if port in (sport, dport))


def remote_conf(cluster: Cluster) -> str:
    """slurm.conf as a compute node sees it: no controller socket, so the clients go
    through the node agent, which carries their calls on gRPC."""
    elsewhere = cluster.dir / "elsewhere"
    elsewhere.mkdir()
    lines = [
        f"StateSaveLocation={elsewhere}" if line.startswith("StateSaveLocation=") else line
        for line in Path(cluster.conf).read_text().splitlines()
    ]
    path = cluster.dir / "remote.conf"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="an AF_PACKET capture needs root")
def test_a_captured_workload_shows_no_reusable_secret(secure: Cluster) -> None:
    conf = load(secure.conf)
    key = auth.load_key(auth.key_path(secure.conf))
    restd_cert, restd_key = conf.tls.cert_pair("restd")
    marker = os.urandom(6).hex()
    script_secret = f"SCRIPT-{marker}".encode()
    output_secret = f"OUTPUT-{marker}".encode()
    name = f"name-{marker}"
    token = secure.run("scontrol", "token").stdout.strip().split("=", 1)[1]
    remote = {"SLURM_CONF": remote_conf(secure)}  # through the agent's gRPC proxy
    capture = Capture()
    try:
        base = secure.start_restd("--tls-cert", restd_cert, "--tls-key", restd_key)
        script = secure.dir / "job.sh"
        script.write_text(
            f"#!/bin/bash\n# {script_secret.decode()}\n"
            "srun -n2 -l sh -c 'echo OUTPUT-$0' " + marker + "\n"
        )
        out = secure.run(
            "sbatch", "--parsable", "-n2", "-J", name, "-o", "job-%j.out", str(script), env=remote
        )
        job_id = int(out.stdout.strip())
        assert secure.wait_done(job_id)["state"] == "COMPLETED"
        output = (secure.dir / f"job-{job_id}.out").read_bytes()
        assert output.count(output_secret) == 2, output  # srun got it, over its I/O stream
        secure.wait_for(
            lambda: name in secure.run("sacct", "-n", "-X", "-o", "jobname%40", env=remote).stdout,
            30,
            "the job's record never reached dbd",
        )
        context = ssl.create_default_context(cafile=conf.tls.ca_cert_file)
        status, listing = Rest(base, token, context=context).call("GET", "/slurm/v0.0.42/jobs")
        assert status == 200 and name in str(listing)
        signed = jobs_request(secure)
        trusted = grpc.ssl_channel_credentials(Path(conf.tls.ca_cert_file).read_bytes())
        assert jobs(conf.controller_target, trusted, signed) != UNAVAILABLE
        server = socket.create_server(("127.0.0.1", 0))  # the capture's control
        with server, socket.create_connection(server.getsockname()) as client:
            client.sendall(f"CONTROL-{marker}".encode())
            server.accept()[0].close()
        time.sleep(0.5)
    finally:
        capture.stop()
    assert capture.holding(f"CONTROL-{marker}".encode()), "the capture sees loopback TCP"
    assert capture.port_bytes(conf.slurmctld_port) > 10_000
    assert capture.port_bytes(conf.accounting.port) > 1_000
    secrets = {
        "the cluster key": key,
        "a minted JWT": token.encode(),
        "a JWT's signature": token.rsplit(".", 1)[1].encode(),
        "a credential's signature": signed.cred.signature,
        "the job script": script_secret,
        "the tasks' output": output_secret,
        "the job's name": name.encode(),
    }
    leaks = {what: capture.holding(secret) for what, secret in secrets.items()}
    assert not any(leaks.values()), leaks
