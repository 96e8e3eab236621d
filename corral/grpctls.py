"""gRPC channels and listening ports as the configuration's TLS settings say.

Every gRPC endpoint of the cluster is made here, so that "is this connection
encrypted, and whom does it trust" has one answer: with TLS on
(``corral.tlsconf``) a client verifies the server's certificate against the
cluster CA and the name it dialled, and a server presents its role's
certificate. A server may also require its clients' certificates (mutual TLS):
corral-dbd does, since only controllers connect to it, so a stolen credential is
useless from a host without a certificate of the cluster's CA. The controller's
port does not: restd, node agents and API programs reach it with the CA alone
and prove who they are with cluster-key credentials, as Slurm's clients do.
With ``TLSType=tls/none`` everything is plaintext, as asked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import Any

import grpc

from corral.errors import CorralError
from corral.tlsconf import TlsConfig

Options = Sequence[tuple[str, Any]]


class TlsError(CorralError):
    """TLS material that is missing, unreadable or unsafe."""


#: What to do about a missing file, said with every such error.
_HINT = "create it with `corral cert`, name it in TLSParameters, or set TLSType=tls/none"


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as src:
            return src.read()
    except OSError as exc:
        raise TlsError(f"cannot read {what} {path}: {exc.strerror} ({_HINT})") from None


def _read_key(path: str) -> bytes:
    """A private key, refused when others may read it (as sshd refuses such keys)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise TlsError(f"cannot read TLS key {path}: {exc.strerror} ({_HINT})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TlsError(
            f"TLS key {path} is readable by others (mode {stat.S_IMODE(mode):04o}); "
            "it must be 0600 or 0400"
        )
    return _read(path, "TLS key")


def _pair(tls: TlsConfig, role: str) -> tuple[bytes, bytes]:
    cert_file, key_file = tls.cert_pair(role)
    return _read_key(key_file), _read(cert_file, f"TLS certificate of {role}")


def channel_credentials(tls: TlsConfig, role: str | None = None) -> grpc.ChannelCredentials:
    """Trust the cluster CA; present ``role``'s certificate too when given."""
    ca = _read(tls.ca_cert_file, "TLS CA certificate")
    if role is None:
        return grpc.ssl_channel_credentials(root_certificates=ca)
    key, cert = _pair(tls, role)
    return grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=cert
    )


def channel(
    target: str, tls: TlsConfig, *, role: str | None = None, options: Options = ()
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target``: TLS unless the configuration says plaintext."""
    if not tls.enabled:
        return grpc.aio.insecure_channel(target, options=list(options))
    return grpc.aio.secure_channel(target, channel_credentials(tls, role), options=list(options))


def sync_channel(target: str, tls: TlsConfig, *, options: Options = ()) -> grpc.Channel:
    """The same as a blocking channel (benchmarks and scripts)."""
    if not tls.enabled:
        return grpc.insecure_channel(target, options=list(options))
    return grpc.secure_channel(target, channel_credentials(tls), options=list(options))


def add_port(
    server: grpc.aio.Server,
    address: str,
    tls: TlsConfig,
    role: str,
    *,
    require_client_cert: bool = False,
) -> int:
    """Listen on ``address`` with ``role``'s certificate (TLS on); the port, 0 on failure."""
    if not tls.enabled:
        return int(server.add_insecure_port(address))
    key, cert = _pair(tls, role)
    ca = _read(tls.ca_cert_file, "TLS CA certificate") if require_client_cert else None
    credentials = grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=require_client_cert
    )
    return int(server.add_secure_port(address, credentials))
