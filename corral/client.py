"""The CLI's connection to the controller: protobuf frames over a Unix socket.

One request per connection: a 4-byte big-endian length, then a ``Frame``
(method name + request bytes); the reply is a ``Frame`` with the reply bytes or
a Slurm errno and message. The controller learns the caller's uid and gid from
the socket itself (SO_PEERCRED), so a client cannot claim to be someone else.

This module must stay import-light: it is on every client command's start-up
path (see docs/wire.md for the budget).
"""

from __future__ import annotations

# The C module directly: ``socket`` would pull in enum and selectors (~6 ms).
import _socket
import os
import struct

from corral.errors import ControllerUnreachable, SlurmError
from corral.wire import codec
from corral.wire.codec import Message

#: Largest reply frame a client accepts (a 10,000-job squeue is ~3 MiB). The daemons
#: bound requests much lower (corral/framedserver.py).
MAX_FRAME = 256 << 20
#: How often a call rate-limited by the controller (SLURMCTLD_COMMUNICATIONS_BACKOFF)
#: is made again, a second apart, as Slurm's clients wait and retry, before the
#: error is the answer.
BACKOFF_RETRIES = 5
_BACKOFF = 1804
_STANDBY = 2027  # ESLURM_IN_STANDBY_MODE: a backup controller; the next one may serve


def socket_path(state_save_location: str, index: int = 0) -> str:
    """Where the controller of SlurmctldHost line ``index`` listens for local clients
    (several controllers may share a host and its StateSaveLocation: docs/ha.md)."""
    name = "corral-ctld.sock" if index == 0 else f"corral-ctld{index}.sock"
    return os.path.join(state_save_location, name)


def agent_socket_path(slurmd_spool_dir: str) -> str:
    """Where a host's node agent listens for local clients (nodeagent/clientproxy.py):
    in SlurmdSpoolDir, above any per-node ``%n``/``%h`` part of it."""
    base = slurmd_spool_dir
    if "%" in base:
        base = base.split("%", 1)[0]
        base = base if base.endswith("/") else os.path.dirname(base)
    return os.path.join(base, "corral-agent.sock")


def local_socket(state_save_location: str, slurmd_spool_dir: str) -> str:
    """The controller's socket on its own host, else this host's node agent's."""
    return local_sockets(state_save_location, slurmd_spool_dir)[0]


def local_sockets(
    state_save_location: str, slurmd_spool_dir: str, controllers: int = 1
) -> list[str]:
    """Where a client on this host may be answered, in the order to try: the sockets
    of the controllers on this host in SlurmctldHost order, then the node agent's
    (which itself reaches whichever controller serves); the first controller's
    socket when neither exists (the error then names it)."""
    here = [socket_path(state_save_location, i) for i in range(max(controllers, 1))]
    found = [path for path in here if os.path.exists(path)]
    agent = agent_socket_path(slurmd_spool_dir)
    if os.path.exists(agent):
        found.append(agent)
    return found or here[:1]


def recv_exact(sock: _socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes or raise ``ConnectionError``."""
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by peer")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class Client:
    """Calls Controller methods by name with dict messages.

    ``socket_path`` may list several sockets (``local_sockets``): a call goes to the
    first that answers other than "standby" (a backup controller's refusal). A
    socket that cannot be connected to, or a standby, sends the call on to the
    next; when none serves, the round is tried again every second for
    ``failover_s`` (a backup taking over). A call whose connection broke after it
    was sent is not made again: it may have been carried out.
    """

    def __init__(
        self,
        socket_path: str | list[str],
        timeout: float = 60.0,
        cluster: str = "",
        failover_s: float = 0.0,
    ) -> None:
        self.paths = [socket_path] if isinstance(socket_path, str) else list(socket_path)
        self.socket_path = self.paths[0]
        self.timeout = timeout
        self.cluster = cluster  # -M: the cluster whose controller answers ("" this one)
        self.failover_s = failover_s

    def call(
        self, method: str, request: Message | None = None, narrow: codec.Narrowing = ()
    ) -> Message:
        """Call ``method`` (e.g. ``"Submit"``); raise ``SlurmError`` on failure.

        ``narrow``: the reply's messages of which only some fields are read
        (``codec.decode``), e.g. squeue's job records.
        """
        body = codec.encode(f"{method}Request", request or {})
        frame = codec.encode("Frame", {"method": method, "body": body, "cluster": self.cluster})
        for _ in range(BACKOFF_RETRIES):
            try:
                return self._serving(method, frame, narrow)
            except SlurmError as exc:
                if exc.code != _BACKOFF:
                    raise
            import time  # only when rate-limited: off the start-up path

            time.sleep(1)
        return self._serving(method, frame, narrow)

    def _serving(self, method: str, frame: bytes, narrow: codec.Narrowing = ()) -> Message:
        """The answer of the first socket whose daemon serves, waiting ``failover_s``
        for one while every one is away or in standby."""
        deadline = None
        while True:
            refused: SlurmError = ControllerUnreachable()
            for path in self.paths:
                try:
                    return self._once(path, method, frame, narrow)
                except _NotSent:
                    continue
                except SlurmError as exc:
                    if exc.code != _STANDBY:
                        raise
                    refused = exc
            import time  # only while no controller serves: off the start-up path

            now = time.monotonic()
            deadline = now + self.failover_s if deadline is None else deadline
            if now >= deadline:
                raise refused
            time.sleep(min(1.0, deadline - now))

    def _once(self, path: str, method: str, frame: bytes, narrow: codec.Narrowing = ()) -> Message:
        try:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                try:
                    sock.connect(path)
                except OSError as exc:
                    raise _NotSent() from exc
                try:  # noqa: SIM105 - contextlib is not imported on the start-up path
                    sock.sendall(struct.pack(">I", len(frame)) + frame)
                except BrokenPipeError:
                    pass  # refused unread (too many connections): its answer is waiting
                (size,) = struct.unpack(">I", recv_exact(sock, 4))
                if size > MAX_FRAME:
                    raise ConnectionError("reply too large")
                reply = codec.decode("Frame", recv_exact(sock, size))
            finally:
                sock.close()
        except _NotSent:
            raise
        except (OSError, ConnectionError, struct.error) as exc:
            raise ControllerUnreachable() from exc
        if reply["code"]:
            raise SlurmError(reply["code"], reply["error"] or None, reply.get("detail", ""))
        return codec.decode(f"{method}Reply", reply["body"], narrow)


class _NotSent(Exception):
    """No connection: the call was not made, and may go to the next socket."""
