"""The server side of the clients' framed protocol (docs/wire.md), for the daemons.

One request per connection: a 4-byte big-endian length and a ``Frame``; the
answer is one ``Frame``. The caller's uid and gid come from the kernel
(SO_PEERCRED). The controller answers on its own socket
(controller/framed.py); a node agent carries the calls on to the controller
(nodeagent/clientproxy.py).

Every connection costs bounded work (``corral.ratelimit``): it is refused at
once past the connection ceilings, its request must arrive within the read
timeout, its length is checked against ``max_frame`` before a byte of the
body is read, and a user past the rate limit is answered without the request
being run. Each refusal is a Slurm error the client can print.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable

from corral import errors
from corral.ratelimit import Gate
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)

_PEERCRED = struct.Struct("3i")

#: What answers one request: (frame, uid, gid) -> the reply frame.
Answer = Callable[[pb.Frame, int, int], Awaitable[pb.Frame]]


def refusal(code: int) -> pb.Frame:
    return pb.Frame(code=code, error=errors.MESSAGES[code])


async def serve_one(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    answer: Answer,
    gate: Gate,
) -> None:
    """Read one frame from a connection, answer it, close the connection."""
    entered = False
    uid = -1
    try:
        sock = writer.get_extra_info("socket")
        _, uid, gid = _PEERCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
        )
        entered = gate.enter(uid)
        if not entered:
            await _reply(writer, refusal(errors.SLURMCTLD_COMMUNICATIONS_BACKOFF))
            return
        async with asyncio.timeout(gate.limits.read_timeout):
            (size,) = struct.unpack(">I", await reader.readexactly(4))
            if size > gate.limits.max_frame:
                await _reply(writer, refusal(errors.SLURM_PROTOCOL_INSANE_MSG_LENGTH))
                return
            data = await reader.readexactly(size)
        if not gate.allow(uid, time.monotonic()):
            await _reply(writer, refusal(errors.SLURMCTLD_COMMUNICATIONS_BACKOFF))
            return
        try:
            frame = pb.Frame.FromString(data)
        except Exception:
            await _reply(writer, refusal(errors.ESLURM_PROTOCOL_ERROR))
            return
        reply = await answer(frame, uid, gid)
        async with asyncio.timeout(gate.limits.read_timeout):  # a client that never reads
            await _reply(writer, reply)
    except TimeoutError:
        log.info("client uid=%d sent no complete request in time: dropped", uid)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    except Exception:
        log.exception("client request failed")
    finally:
        if entered:
            gate.leave(uid)
        writer.close()


async def _reply(writer: asyncio.StreamWriter, frame: pb.Frame) -> None:
    data = frame.SerializeToString()
    writer.write(struct.pack(">I", len(data)) + data)
    await writer.drain()
