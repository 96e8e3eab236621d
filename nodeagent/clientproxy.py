"""Client commands away from the controller's host: the node agent carries them.

On the controller's host the clients (sbatch, squeue, srun in a job, ...)
use its Unix socket, which learns who they are from the kernel. Anywhere
else they use the same framed protocol on the node agent's socket
(``corral.client.agent_socket_path``): the agent learns the caller's uid and
gid the same way (SO_PEERCRED), signs a credential for them and for that one
call (``corral.credentials``), and makes the call on the controller's gRPC
API. This is MUNGE's part in Slurm: the controller takes a node's word for
who is asking, and only hosts holding the key can give it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

import grpc

from corral import auth, credentials, errors, grpctls
from corral.framedserver import serve_one
from corral.munge import Munge
from corral.ratelimit import Gate, Limits
from corral.rpcerror import slurm_error
from corral.tlsconf import TlsConfig
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 120.0


class ClientProxy:
    """A Unix socket for local clients whose calls go to the controller's gRPC API."""

    def __init__(
        self,
        path: str,
        target: str,
        key: bytes | Munge,
        receiver: str,
        limits: Limits,
        tls: TlsConfig,
        ttl: int = auth.DEFAULT_TTL,
    ) -> None:
        self.path = path
        self.target = target
        self.tls = tls
        self.key = key  # the credential key (or munged)
        self.receiver = receiver  # the controller's name in credentials
        self.ttl = ttl
        self.gate = Gate(limits)
        self.server: asyncio.AbstractServer | None = None
        self.channel: grpc.aio.Channel | None = None
        self.stub: Any = None
        # Methods the agent answers itself, by name: (request, caller's uid) -> reply
        # (scontrol listpids: nodeagent/listpids.py).
        self.local: dict[str, Callable[[Any, int], Any]] = {}

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.channel = grpctls.channel(self.target, self.tls)
        self.stub = pb_grpc.ControllerStub(self.channel)  # type: ignore[no-untyped-call]
        self.server = await asyncio.start_unix_server(self._serve, path=self.path)
        os.chmod(self.path, 0o666)
        log.info("clients on this host: %s, to %s", self.path, self.target)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        if self.channel is not None:
            await self.channel.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_one(reader, writer, self._forward, self.gate)

    async def _forward(self, frame: pb.Frame, uid: int, gid: int) -> pb.Frame:
        local = self.local.get(frame.method)
        request_type = getattr(pb, f"{frame.method}Request", None)
        call = getattr(self.stub, frame.method, None)
        if request_type is None or (call is None and local is None):
            return _error(errors.SLURM_UNEXPECTED_MSG_ERROR, "unknown request")
        try:
            request = request_type.FromString(frame.body)
        except Exception:
            return _error(errors.ESLURM_PROTOCOL_ERROR, "malformed request")
        if local is not None or call is None:  # the agent's own answer (scontrol listpids)
            assert local is not None
            return pb.Frame(method=frame.method, body=local(request, uid).SerializeToString())
        if "cred" in request_type.DESCRIPTOR.fields_by_name:
            request.ClearField("cred")
            credentials.stamp(
                request,
                self.key,
                uid=uid,
                gid=gid,
                method=credentials.controller_method(frame.method),
                receiver=self.receiver,
                ttl=self.ttl,
            )
        try:
            reply = await call(request, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            return _from_status(exc)
        return pb.Frame(method=frame.method, body=reply.SerializeToString())


def _error(code: int, message: str) -> pb.Frame:
    return pb.Frame(code=code, error=message)


def _from_status(exc: grpc.aio.AioRpcError) -> pb.Frame:
    """The controller's refusal back as the Slurm error it was."""
    refused = slurm_error(exc)
    return _error(refused.code, refused.message)
