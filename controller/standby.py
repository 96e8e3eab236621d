"""A controller that does not hold the lease: what it answers while it waits.

A backup controller listens at its own SlurmctldHost line's address from the
start, so that clients, node agents and the other controllers can tell it is
alive, but it serves nothing: every request is refused with Slurm's
ESLURM_IN_STANDBY_MODE, which sends clients and agents on to the next
SlurmctldHost (corral/client.py, corral/clusterroute.py, nodeagent/link.py),
except Ping, which says "standby" (``scontrol ping``). Once the lease is taken
these servers stop and the serving ones start in their place (controller/main.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import grpc

from controller.framed import FramedServer
from controller.grpcface import GrpcController
from controller.pingall import controllers
from controller.principal import Principal
from corral import auth, errors, grpcservice, grpctls
from corral.clusterroute import ControllerCalls
from corral.config import SlurmConfig
from corral.credentials import Verifier
from corral.errors import SlurmError
from corral.munge import Munge
from corral.ratelimit import Gate, Limits
from corral.wire import corral_pb2 as pb

log = logging.getLogger("corral.controller")


def refusal() -> SlurmError:
    return SlurmError(errors.ESLURM_IN_STANDBY_MODE)


class StandbyHandlers:
    """``Handlers``' place while the lease is another's: Ping only."""

    def __init__(self, conf: SlurmConfig, index: int) -> None:
        self.conf = conf
        self.index = index

    async def dispatch(self, method: str, request: Any, who: Principal) -> Any:
        if method != "Ping":
            raise refusal()
        reply = pb.PingReply(
            host=self.conf.slurmctld_hosts[self.index][0],
            cluster=self.conf.cluster_name,
            standby=True,
        )
        if request.all:
            reply.controllers.extend(await controllers(self.conf, self.index, standby=True))
        return reply


class StandbyLink:
    """The AgentLink service of a standby: an agent's stream is refused at once, so
    the agent tries the next SlurmctldHost."""

    async def Attach(
        self, messages: AsyncIterator[pb.AgentMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ControllerMessage]:
        exc = refusal()
        await context.abort(grpc.StatusCode.UNAVAILABLE, f"{exc.code}: {exc.message}")
        yield pb.ControllerMessage()  # never reached: abort raises


async def reclaim(conf: SlurmConfig, key: bytes | Munge, ttl: int) -> None:
    """The primary (SlurmctldHost line 0), started while a backup serves, asks it to
    hand control back, as slurmctld's primary does at start: the backup saves its
    state, hands the lease to line 0 and waits in standby again."""
    calls = ControllerCalls(key, conf.tls, ttl)
    ask = pb.Frame(method="Takeover", body=pb.TakeoverRequest(index=0).SerializeToString())
    receiver = auth.controller_receiver(conf.cluster_name)
    try:
        for target in conf.controller_targets[1:]:
            reply = await calls.call(target, receiver, ask, os.getuid(), os.getgid())
            if not reply.code:
                log.info("takeover: %s hands control back to the primary", target)
                return
    finally:
        await calls.close()


class Standby:
    """The gRPC port and clients' socket of a controller in standby."""

    def __init__(
        self, conf: SlurmConfig, index: int, verifier: Verifier, limits: Limits, socket: str
    ) -> None:
        handlers = StandbyHandlers(conf, index)
        self.server = grpc.aio.server()
        grpcservice.add_service(
            self.server, "Controller", GrpcController(handlers, verifier, Gate(limits))
        )
        grpcservice.add_service(self.server, "AgentLink", StandbyLink())
        self.address = conf.controller_targets[index]
        self.port = grpctls.add_port(self.server, self.address, conf.tls, "ctld")
        self.framed = FramedServer(handlers, socket, limits)

    async def start(self) -> None:
        if self.port == 0:
            raise SystemExit(f"corral-controller: fatal: cannot listen on {self.address}")
        await self.server.start()
        await self.framed.start()
        log.info(
            "standby on %s: clients and agents are sent to the serving controller", self.address
        )

    async def stop(self) -> None:
        await self.framed.close()
        await self.server.stop(grace=0)
