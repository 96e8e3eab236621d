"""The byte protocol between srun and the step runners of its step.

srun listens on a TCP socket and puts its address and a random key in the
step request; on each node of the step a runner (``nodeagent/steprunner.py``)
connects to it, opens a session keyed by it (``corral/stepcipher.py``: every
frame after the opening travels sealed with AES-GCM, so the key itself never
crosses this connection and a peer without it is refused at its first record),
and from then on both sides exchange frames. This mirrors Slurm's srun <->
slurmstepd I/O connection: output comes back to srun as it is written, stdin
and signals go out, and each task's end is reported as it happens.

A frame is a 9-byte header ``!BII`` (kind, task or number, payload length)
and the payload. Kinds:

========  =========  ====================================================
kind      direction  meaning
========  =========  ====================================================
HELLO     runner →   in clear, the session's 16-byte salt; then, as the first
                     sealed frame, node id and task count (``!II``)
OUT, ERR  runner →   a task's stdout/stderr bytes (``task`` = global id)
IN        → runner   stdin bytes for task ``task`` (a global id), or for every
                     task whose stdin is fed (``ALL_TASKS``); an empty
                     payload is that input's EOF
SIGNAL    → runner   deliver signal ``task`` (the number) to every task;
                     ``TERM_KILL``: CONT and TERM now, KILL after KillWait
EXIT      runner →   task ``task`` ended; payload ``!i`` wait status
DONE      runner →   every task of this node has ended (EXITs all sent)
FAILED    runner →   no task of node ``task`` could be launched; payload: why
                     (UTF-8); the runner hangs up after it
WINSIZE   → runner   srun --pty: the size of srun's terminal, for task 0's;
                     payload ``!HH`` rows and columns
KVS       both       ``--mpi=pmi2``: key-value pairs (``pairs_payload``) put
                     by this node's tasks since the last fence (runner →), or
                     by the whole step's (→ runner), in pieces of at most
                     ``MAX_PAYLOAD``
FENCE     both       every task of node ``task`` entered the fence (runner →,
                     after its KVS frames); every node did (→ runner, after
                     the union of their KVS frames): the tasks go on
ABORT     runner →   a task (``task``: its rank) called PMI abort; payload
                     ``!i`` exit code then the message (UTF-8)
GO        → runner   srun --bcast: the executable is on every node, start
                     the tasks (a runner told to wait starts none before)
ABORTED   runner →   the step is being ended (cancel, time limit): its tasks
                     get KILL within ``task`` seconds (KillWait)
FORCED    runner →   ``scancel -s KILL`` of the step: its tasks were killed
IO_FAILED runner →   no task of node ``task`` could be launched, as a per-task
                     input file could not be opened there (Slurm's
                     ESLURMD_IO_ERROR); the runner hangs up after it
========  =========  ====================================================

A fence is a gather and a broadcast through srun, as Slurm's PMI-2 plugin makes
one through its tree of step daemons: srun forwards each KVS frame it received
to every runner once all FENCE frames are in, then FENCE. It never reads the
pairs.

IN frames name their task because srun's ``-i N`` feeds task N alone and sattach's
``--input-filter=N`` one task of many; a runner writes what is named to each of its
tasks whose stdin it feeds (``corral/stepinput.py`` says which), each at its own pace.

Under ``--pty`` task 0's stdin, stdout and stderr are one pseudo-terminal on
its node: IN frames are what srun's terminal reads in raw mode (Ctrl-C, Ctrl-Z
and Ctrl-D travel as bytes, and the remote terminal turns them into signals
for its foreground job), OUT frames all the task writes. WINSIZE is sealed
like every frame after the opening: only a holder of the step key can resize
the terminal or type into it.

Sizes are bounded (``MAX_PAYLOAD``) so a confused peer cannot make the
other allocate without limit.
"""

from __future__ import annotations

import struct

TYPE_CHECKING = False  # ``socket`` imports ``enum``; srun uses ``_socket``
if TYPE_CHECKING:
    from _socket import socket
    from typing import Protocol

    class Frames(Protocol):
        """What turns received bytes into frames: a ``Reader``, or a sealed session."""

        def feed(self, data: bytes) -> list[tuple[int, int, bytes]]: ...


HELLO, OUT, ERR, IN, SIGNAL, EXIT, DONE, FAILED, WINSIZE, KVS, FENCE, ABORT = range(1, 13)
GO, ABORTED, FORCED, IO_FAILED = range(13, 17)
#: Not a signal: end the tasks as a cancel does (Slurm's SIG_TERM_KILL, for -K).
TERM_KILL = 997
#: An IN frame's number for input to every task (srun's default ``--input=all``).
ALL_TASKS = 0xFFFFFFFF
HEADER = struct.Struct("!BII")
NODE = struct.Struct("!II")
STATUS = struct.Struct("!i")
WINDOW = struct.Struct("!HH")
KEY_BYTES = 32
MAX_PAYLOAD = 1 << 20


class ProtocolError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def frame(kind: int, number: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, number, len(payload)) + payload


def read_hello(payload: bytes) -> tuple[int, int]:
    """(node id, task count) of a sealed HELLO's payload."""
    if len(payload) != NODE.size:
        raise ProtocolError("bad hello")
    node_id, ntasks = NODE.unpack(payload)
    return node_id, ntasks


def input_frame(data: bytes, task: int = ALL_TASKS) -> bytes:
    """An IN frame: ``data`` for ``task`` (empty: its end of input)."""
    return frame(IN, task, data)


def exit_frame(task: int, status: int) -> bytes:
    return frame(EXIT, task, STATUS.pack(status))


def read_status(payload: bytes) -> int:
    if len(payload) != STATUS.size:
        raise ProtocolError("bad exit status")
    (status,) = STATUS.unpack(payload)
    return int(status)


def winsize_frame(rows: int, cols: int) -> bytes:
    return frame(WINSIZE, 0, WINDOW.pack(rows, cols))


def read_winsize(payload: bytes) -> tuple[int, int]:
    """(rows, columns) of a WINSIZE frame's payload."""
    if len(payload) != WINDOW.size:
        raise ProtocolError("bad window size")
    rows, cols = WINDOW.unpack(payload)
    return rows, cols


PAIR = struct.Struct("!II")


def kvs_frames(node_id: int, pairs: dict[bytes, bytes]) -> list[bytes]:
    """KVS frames carrying ``pairs``, each under ``MAX_PAYLOAD`` and each to be sealed
    on its own (a pair too large for one frame is the caller's to refuse: PMI bounds
    keys and values far below it)."""
    frames, piece = [], bytearray()
    for key, value in pairs.items():
        entry = PAIR.pack(len(key), len(value)) + key + value
        if piece and len(piece) + len(entry) > MAX_PAYLOAD:
            frames.append(frame(KVS, node_id, bytes(piece)))
            piece.clear()
        piece += entry
    if piece:
        frames.append(frame(KVS, node_id, bytes(piece)))
    return frames


def read_pairs(payload: bytes) -> dict[bytes, bytes]:
    """The pairs of a KVS frame's payload."""
    pairs, at = {}, 0
    while at < len(payload):
        if at + PAIR.size > len(payload):
            raise ProtocolError("bad key-value pair")
        klen, vlen = PAIR.unpack_from(payload, at)
        at += PAIR.size
        if at + klen + vlen > len(payload):
            raise ProtocolError("bad key-value pair")
        pairs[payload[at : at + klen]] = payload[at + klen : at + klen + vlen]
        at += klen + vlen
    return pairs


def abort_frame(rank: int, code: int, message: str) -> bytes:
    return frame(ABORT, rank, STATUS.pack(code) + message.encode()[: MAX_PAYLOAD - STATUS.size])


def read_abort(payload: bytes) -> tuple[int, str]:
    """(exit code, message) of an ABORT frame's payload."""
    if len(payload) < STATUS.size:
        raise ProtocolError("bad abort")
    (code,) = STATUS.unpack_from(payload)
    return int(code), payload[STATUS.size :].decode(errors="replace")


class Reader:
    """Frames out of a byte stream that arrives in arbitrary pieces."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """The frames completed by ``data``: (kind, number, payload) each."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= HEADER.size:
            kind, number, length = HEADER.unpack_from(self._buffer)
            if not HELLO <= kind <= IO_FAILED or length > MAX_PAYLOAD:
                raise ProtocolError(f"bad frame header (kind {kind}, length {length})")
            end = HEADER.size + length
            if len(self._buffer) < end:
                break
            frames.append((kind, number, bytes(self._buffer[HEADER.size : end])))
            del self._buffer[:end]
        return frames


def recv_frames(sock: socket, reader: Frames) -> list[tuple[int, int, bytes]] | None:
    """Frames from one ``recv`` on a blocking or ready socket; None once the peer closed."""
    data = sock.recv(65536)
    if not data:
        return None
    return reader.feed(data)
