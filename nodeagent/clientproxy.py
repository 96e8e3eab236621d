"""Client commands away from the controller's host: the node agent carries them.

On the controller's host the clients (sbatch, squeue, srun in a job, ...)
use its Unix socket, which learns who they are from the kernel. Anywhere
else they use the same framed protocol on the node agent's socket
(``corral.client.agent_socket_path``): the agent learns the caller's uid and
gid the same way (SO_PEERCRED), signs a credential for them and for that one
call (``corral.credentials``), and makes the call on the controller's gRPC
API (``corral.clusterroute``), or on another cluster's for a frame that names
one (``-M``). This is MUNGE's part in Slurm: the controller takes a node's word
for who is asking, and only hosts holding the key can give it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from corral import auth, errors
from corral.clusterroute import ClusterRoutes, ControllerCalls, frame_error, via_controller
from corral.framedserver import serve_one
from corral.munge import Munge
from corral.ratelimit import Gate, Limits
from corral.tlsconf import TlsConfig
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)


class ClientProxy:
    """A Unix socket for local clients whose calls go to the controller's gRPC API."""

    def __init__(
        self,
        path: str,
        targets: Sequence[str],
        key: bytes | Munge,
        receiver: str,
        limits: Limits,
        tls: TlsConfig,
        ttl: int = auth.DEFAULT_TTL,
        cluster: str = "",
    ) -> None:
        self.path = path
        self.targets = list(targets)  # SlurmctldHost order: calls go to whichever serves
        self.receiver = receiver  # the controller's name in credentials
        self.gate = Gate(limits)
        self.server: asyncio.AbstractServer | None = None
        self.socket_id: tuple[int, int] | None = None  # our socket's (st_dev, st_ino)
        self.calls = ControllerCalls(key, tls, ttl)
        lookup = via_controller(self.calls, self.targets, receiver)
        self.routes = ClusterRoutes(cluster, lookup, self.calls)
        # Methods the agent answers itself, by name: (request, caller's uid) -> reply
        # (scontrol listpids: nodeagent/listpids.py).
        self.local: dict[str, Callable[[Any, int], Any]] = {}

    async def start(self) -> None:
        """Listen at ``path``, in place of whatever socket is there.

        Several agents of one host (emulated nodes, cloud nodes resumed together)
        share the path: each binds a name of its own beside it (no longer than the
        path: a Unix socket's path has a limit) and renames it over the path
        (atomic), so that two starting at once never find the path taken or gone
        between the other's unlink and bind. The last one started serves the
        host's clients; any of them would do, each calls the same controller.
        """
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        own = os.path.join(os.path.dirname(self.path), _own_name())
        with contextlib.suppress(FileNotFoundError):
            os.unlink(own)  # a dead process's that had our pid
        self.server = await asyncio.start_unix_server(self._serve, path=own)
        os.chmod(own, 0o666)
        self.socket_id = _file_id(own)
        os.rename(own, self.path)
        log.info("clients on this host: %s, to %s", self.path, ", ".join(self.targets))

    async def close(self) -> None:
        """Stop listening; the path is removed unless another agent's socket has
        taken it since."""
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        await self.calls.close()
        with contextlib.suppress(FileNotFoundError):
            if self.socket_id is not None and _file_id(self.path) == self.socket_id:
                os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_one(reader, writer, self._forward, self.gate)

    async def _forward(self, frame: pb.Frame, uid: int, gid: int) -> pb.Frame:
        if self.routes.elsewhere(frame):
            return await self.routes.call(frame, uid, gid)
        local = self.local.get(frame.method)
        if local is None:
            return await self.calls.call_serving(self.targets, self.receiver, frame, uid, gid)
        request_type = getattr(pb, f"{frame.method}Request")
        try:
            request = request_type.FromString(frame.body)
        except Exception:
            return frame_error(errors.ESLURM_PROTOCOL_ERROR, "malformed request")
        # The agent's own answer (scontrol listpids).
        return pb.Frame(method=frame.method, body=local(request, uid).SerializeToString())


def _own_name() -> str:
    """This process's socket's name before it takes the shared path (shorter than
    ``corral-agent.sock`` for any pid)."""
    return f".agent{os.getpid()}"


def _file_id(path: str) -> tuple[int, int]:
    found = os.stat(path)
    return found.st_dev, found.st_ino
