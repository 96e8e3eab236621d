"""SlurmctldAddr: the address of whichever controller serves (docs/ha.md).

Sites with a backup controller often give the serving one a virtual IP address,
moved by SlurmctldPrimaryOnProg/OffProg (or keepalived), and name it in
SlurmctldAddr; node agents and restd then reach the controller there alone
(``SlurmConfig.active_targets``). The serving controller listens on that address
beside its own line's, with a second gRPC server: it cannot bind it before the
address is on its host, which the site's program may bring only after serving
began, so it tries once a second until it can. The listener is its own (no
SO_REUSEPORT): while a controller that stopped serving still holds the address's
port, the next cannot take it, as only one host can hold a virtual address.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

import grpc

from corral import grpctls
from corral.tlsconf import TlsConfig

log = logging.getLogger("corral.controller")

#: Seconds between tries to listen on the address while it cannot be bound.
RETRY_S = 1.0


def _host_port(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return host.strip("[]"), int(port)


def bindable(target: str) -> bool:
    """Whether this host can listen on ``target`` (``host:port``) now: the address is
    one of its own and nothing else listens on that port there."""
    host, port = _host_port(target)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError:
        return False
    return True


async def listen(target: str, tls: TlsConfig, build: Callable[[], grpc.aio.Server]) -> None:
    """Serve ``build()``'s services on ``target`` until cancelled, waiting for the
    address first; the server stops when the task is cancelled."""
    said = False
    server: grpc.aio.Server | None = None
    try:
        while server is None:
            if bindable(target):
                candidate = build()
                try:
                    grpctls.add_port(candidate, target, tls, "ctld")
                except RuntimeError:  # taken between the probe and the bind
                    pass
                else:
                    await candidate.start()
                    server = candidate
                    log.info("SlurmctldAddr: listening on %s", target)
                    break
            if not said:
                log.info("SlurmctldAddr: %s not bound yet; trying each second", target)
                said = True
            await asyncio.sleep(RETRY_S)
        await asyncio.Event().wait()
    finally:
        if server is not None:
            await server.stop(grace=0.2)
            log.info("SlurmctldAddr: no longer listening on %s", target)
