"""``scontrol ping``'s view: every SlurmctldHost line's controller, up or down,
serving or in standby, as the answering controller finds them (docs/ha.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from corral import grpctls
from corral.config import SlurmConfig
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc

#: How long a controller waits for another's Ping answer.
PING_TIMEOUT_S = 2.0


async def controllers(conf: SlurmConfig, own: int, standby: bool) -> list[pb.ControllerPing]:
    """Every SlurmctldHost line's controller as ``scontrol ping`` shows it: this one
    as it is, the others as their own Ping answers (Ping needs no credential)."""

    async def one(index: int, target: str) -> pb.ControllerPing:
        name = conf.slurmctld_hosts[index][0]
        if index == own:
            return pb.ControllerPing(host=name, up=True, standby=standby)
        async with grpctls.channel(target, conf.tls) as channel:
            stub: Any = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
            try:
                reply = await stub.Ping(pb.PingRequest(), timeout=PING_TIMEOUT_S)
            except grpc.aio.AioRpcError:
                return pb.ControllerPing(host=name, up=False)
        return pb.ControllerPing(host=name, up=True, standby=reply.standby)

    return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(conf.controller_targets))))
