"""An attacker's tools against real daemons: credentials made (or misused) by hand,
and a node agent impersonated on the AgentLink stream."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import grpc

from corral import auth, credentials, grpctls
from corral.config import load
from corral.tlsconf import TlsConfig
from corral.wire import corral_pb2 as pb
from tests.integration.cluster import Cluster


def keys_of(cluster: Cluster) -> auth.Keys:
    """The cluster's keys, as a key holder (a daemon, root) has them."""
    return auth.Keys.derive(auth.load_key(auth.key_path(cluster.conf)))


def controller_target(cluster: Cluster) -> str:
    return load(cluster.conf).controller_target


def stamp_for_controller(
    cluster: Cluster, request: Any, method: str, uid: int = 0, gid: int = 0, **over: Any
) -> Any:
    """``request`` with a credential for ``method`` on this cluster's controller."""
    fields: dict[str, Any] = {
        "uid": uid,
        "gid": gid,
        "method": credentials.controller_method(method),
        "receiver": auth.controller_receiver(load(cluster.conf).cluster_name),
    }
    fields.update(over)
    return credentials.stamp(request, keys_of(cluster).credential, **fields)


def agent_hello(cluster: Cluster, node: str, uid: int | None = 0) -> pb.AgentHello:
    """A hello for ``node``; with a credential of ``uid`` unless ``uid`` is None."""
    hello = pb.AgentHello(
        nodes=[pb.NodeRegistration(name=node, cpus=os.cpu_count() or 1, real_memory=100)],
        version="rogue",
    )
    if uid is None:
        return hello
    receiver = auth.controller_receiver(load(cluster.conf).cluster_name)
    stamped: pb.AgentHello = credentials.stamp(
        hello,
        keys_of(cluster).credential,
        uid=uid,
        gid=uid,
        method=credentials.ATTACH,
        receiver=receiver,
    )
    return stamped


def _serialized(message: pb.AgentMessage | bytes) -> bytes:
    """Messages as the protocol encodes them; bytes as they are (what a fuzzer sends)."""
    return message if isinstance(message, bytes) else message.SerializeToString()


class RogueAgent:
    """One AgentLink stream opened by hand: send what you like, see what comes back.

    ``tls``: the cluster's TLS settings (``load(cluster.conf).tls``), which trust its
    CA as any client may; without them the stream is plaintext."""

    def __init__(self, target: str, tls: TlsConfig | None = None) -> None:
        if tls is None:
            self.channel = grpc.aio.insecure_channel(target)
        else:
            self.channel = grpctls.channel(target, tls)
        self.outbox: asyncio.Queue[pb.AgentMessage | bytes | None] = asyncio.Queue()
        self.replies: list[pb.ControllerMessage] = []
        self.error: grpc.aio.AioRpcError | None = None
        self._reader: asyncio.Task[None] | None = None

    async def attach(self, hello: pb.AgentHello) -> None:
        attach = self.channel.stream_stream(
            credentials.ATTACH,
            request_serializer=_serialized,
            response_deserializer=pb.ControllerMessage.FromString,
        )
        self.outbox.put_nowait(pb.AgentMessage(hello=hello))
        call = attach(self._outgoing())
        self._reader = asyncio.create_task(self._read(call))

    async def _outgoing(self) -> AsyncIterator[pb.AgentMessage | bytes]:
        while (message := await self.outbox.get()) is not None:
            yield message

    async def _read(self, call: Any) -> None:
        try:
            async for reply in call:
                self.replies.append(reply)
        except grpc.aio.AioRpcError as exc:
            self.error = exc

    def send(self, **body: Any) -> None:
        self.outbox.put_nowait(pb.AgentMessage(**body))

    def send_raw(self, data: bytes | pb.AgentMessage) -> None:
        """``data`` on the stream as it is: bytes need not be a message at all."""
        self.outbox.put_nowait(data)

    async def outcome(self, timeout: float = 10.0) -> str:
        """ "welcome" once welcomed, else the refusal's details when the stream ends."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if any(r.WhichOneof("body") == "welcome" for r in self.replies):
                return "welcome"
            if self._reader is not None and self._reader.done():
                return self.error.details() if self.error is not None else "closed"
            await asyncio.sleep(0.02)
        raise AssertionError("no answer to the hello")

    async def close(self) -> None:
        self.outbox.put_nowait(None)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self.channel.close()
