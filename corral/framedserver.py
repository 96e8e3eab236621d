"""The server side of the clients' framed protocol (docs/wire.md), for the daemons.

One request per connection: a 4-byte big-endian length and a ``Frame``; the
answer is one ``Frame``. The caller's uid and gid come from the kernel
(SO_PEERCRED). The controller answers on its own socket
(controller/framed.py); a node agent carries the calls on to the controller
(nodeagent/clientproxy.py).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Awaitable, Callable

from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)

MAX_FRAME = 64 << 20
_PEERCRED = struct.Struct("3i")

#: What answers one request: (frame, uid, gid) -> the reply frame.
Answer = Callable[[pb.Frame, int, int], Awaitable[pb.Frame]]


async def serve_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: Answer
) -> None:
    """Read one frame from a connection, answer it, close the connection."""
    try:
        sock = writer.get_extra_info("socket")
        _, uid, gid = _PEERCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
        )
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        if size > MAX_FRAME:
            return
        frame = pb.Frame.FromString(await reader.readexactly(size))
        reply = await answer(frame, uid, gid)
        data = reply.SerializeToString()
        writer.write(struct.pack(">I", len(data)) + data)
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    except Exception:
        log.exception("client request failed")
    finally:
        writer.close()
