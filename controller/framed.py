"""The CLI's socket: protobuf frames over a Unix socket (see docs/wire.md).

Each connection carries one request: a 4-byte big-endian length and a
``Frame`` naming the method, answered by a ``Frame`` with the reply bytes or a
Slurm errno and message. The caller's identity comes from the kernel
(SO_PEERCRED), so no credential travels on this path. A frame that names
another cluster (``-M``) is carried to that cluster's controller, signed for
the caller (corral/clusterroute.py).
"""

from __future__ import annotations

import asyncio
import logging
import os

from controller.principal import principal_for
from controller.service import METHODS, Dispatcher, Encoded, Handlers
from corral import errors
from corral.clusterroute import ClusterRoutes, Lookup, targets_of
from corral.errors import SlurmError
from corral.framedserver import serve_one
from corral.ratelimit import Gate, Limits
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)


class FramedServer:
    def __init__(
        self, handlers: Dispatcher, path: str, limits: Limits, routes: ClusterRoutes | None = None
    ) -> None:
        self.handlers = handlers
        self.path = path
        self.routes = routes
        self.gate = Gate(limits)
        self.server: asyncio.AbstractServer | None = None
        self._requests = {m: getattr(pb, f"{m}Request") for m in METHODS}

    async def start(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.server = await asyncio.start_unix_server(self._serve, path=self.path)
        os.chmod(self.path, 0o666)
        log.info("clients: listening on %s", self.path)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_one(reader, writer, self._dispatch, self.gate)

    async def _dispatch(self, frame: pb.Frame, uid: int, gid: int) -> pb.Frame:
        if self.routes is not None and self.routes.elsewhere(frame):
            return await self.routes.call(frame, uid, gid)
        request_type = self._requests.get(frame.method)
        if request_type is None:
            return _error(SlurmError(errors.SLURM_UNEXPECTED_MSG_ERROR))
        try:
            request = request_type.FromString(frame.body)
        except Exception:
            return _error(SlurmError(errors.ESLURM_PROTOCOL_ERROR))
        try:
            reply = await self.handlers.dispatch(frame.method, request, principal_for(uid, gid))
        except SlurmError as exc:
            return _error(exc)
        except Exception:
            log.exception("method %s failed for uid=%d", frame.method, uid)
            return _error(
                SlurmError(errors.SLURM_UNEXPECTED_MSG_ERROR, "Unexpected error in the controller")
            )
        body = bytes(reply) if isinstance(reply, Encoded) else reply.SerializeToString()
        return pb.Frame(method=frame.method, body=body)


def cluster_lookup(handlers: Handlers) -> Lookup:
    """Where the other clusters' controllers are, from this controller's own answer
    to ``Clusters``, asked as itself."""

    async def lookup() -> dict[str, str]:
        me = principal_for(os.getuid(), os.getgid())
        return targets_of(await handlers.Clusters(pb.ClustersRequest(), me))

    return lookup


def _error(exc: SlurmError) -> pb.Frame:
    return pb.Frame(code=exc.code, error=exc.message, detail=exc.detail)
