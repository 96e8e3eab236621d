"""sbcast's blocks on a node: the controller's FileBlock written, and answered.

A FileBlock reaches the agent on its AgentLink stream with the controller's
credential (``nodeagent/signing.py`` checked it), so it is the controller's word
that the job's user may have this block written on these nodes. Each block is
written by a child process that becomes that user (``nodeagent/bcastwrite.py``),
once per distinct path: ``%n`` in the destination is each node's name, which is
how the several nodes one agent emulates on one host keep apart copies (a real
node is one host and one path). The FileBlockDone names every node written and
every failure, with the errno and its text, as slurmd answers sbcast.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sys
from collections.abc import Callable

from corral.wire import corral_pb2 as pb
from nodeagent.bcastwrite import unpack
from nodeagent.process import supervisor_environment

log = logging.getLogger(__name__)

Send = Callable[[pb.AgentMessage], None]
#: Seconds between looks at a writer that closed its pipe but has not exited yet.
REAP_POLL = 0.005


def node_path(dest: str, node: str) -> str:
    """Where ``node``'s copy goes: ``dest`` with each ``%n`` its name."""
    return dest.replace("%n", node)


def writer_argv(
    block: pb.BroadcastRequest, paths: list[str], uid: int, gid: int, user: str
) -> list[str]:
    """The command line of ``nodeagent.bcastwrite`` for one block at ``paths``."""
    preserve = block.preserve and block.last
    return [
        sys.executable,
        "-S",  # the standard library and this package only: one starts per block
        "-m",
        "nodeagent.bcastwrite",
        str(block.offset),
        str(block.size),
        block.compress or "-",
        "1" if block.offset == 0 else "0",
        "1" if block.force else "0",
        "1" if block.last else "0",
        "1" if block.library and block.offset == 0 else "0",
        str(block.mode),
        str(block.atime if preserve else -1),
        str(block.mtime if preserve else -1),
        str(uid),
        str(gid),
        user,
        *paths,
    ]


async def write(
    block: pb.BroadcastRequest, paths: list[str], uid: int, gid: int, user: str
) -> dict[int, OSError]:
    """Write ``block`` at each of ``paths`` as the user, by one child; the failures,
    by the index of their path (-1: all of them), as OSError (errno, text).

    The child is started with posix_spawn (vfork underneath), as supervisors are
    (``nodeagent/process.py``): a fork of this multithreaded gRPC process is what
    the agent never does. The block reaches the child's standard input from a
    memory file, its complaint comes back on a pipe. An lz4 block is unpacked here:
    the child runs without site-packages (-S), where python-lz4 lives."""
    if block.compress == "lz4":
        try:
            raw = unpack(block.data, "lz4", block.size)
        except ValueError as exc:
            return {-1: OSError(errno.EINVAL, str(exc))}
        plain = pb.BroadcastRequest()
        plain.CopyFrom(block)
        plain.data, plain.compress = raw, ""
        block = plain
    data = os.memfd_create("sbcast-block", os.MFD_CLOEXEC)
    said_r, said_w = os.pipe()
    try:
        view = memoryview(block.data)
        while view:
            view = view[os.write(data, view) :]
        os.lseek(data, 0, os.SEEK_SET)
        pid = os.posix_spawn(
            sys.executable,
            writer_argv(block, paths, uid, gid, user),
            supervisor_environment(),
            file_actions=[
                (os.POSIX_SPAWN_DUP2, data, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_DUP2, said_w, 2),
            ],
        )
    except BaseException:
        os.close(said_r)
        raise
    finally:
        os.close(data)
        os.close(said_w)
    said = await _read_to_end(said_r)
    status = await _reaped(pid)
    failed: dict[int, OSError] = {}
    for line in said.decode(errors="replace").splitlines():
        index, code, text = [*line.split(" ", 2), "", ""][:3]
        if index.lstrip("-").isdigit() and code.isdigit():
            failed[int(index)] = OSError(int(code), text)
    if status != 0 and not failed:
        failed[-1] = OSError(errno.EIO, f"the writer ended with status {status}")
    return failed


async def _read_to_end(fd: int) -> bytes:
    """Everything a child writes on the pipe ``fd`` until it closes it (fd closed)."""
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        return await reader.read()
    finally:
        transport.close()


async def _reaped(pid: int) -> int:
    """The exit status of the child ``pid``, once it has gone (polled: it is ending)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        await asyncio.sleep(REAP_POLL)


class FileBlocks:
    """The blocks being written here; each answered on the stream it came on."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def receive(self, block: pb.FileBlock, send: Send) -> None:
        task = asyncio.create_task(self._write(block, send))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, message: pb.FileBlock, send: Send) -> None:
        by_path: dict[str, list[str]] = {}
        for node in message.nodes:
            by_path.setdefault(node_path(message.block.dest, node), []).append(node)
        paths = list(by_path)
        done = pb.FileBlockDone(transfer=message.transfer)
        try:
            failed = await write(message.block, paths, message.uid, message.gid, message.user)
        except (OSError, ValueError) as exc:  # ValueError: a NUL in a path
            failed = {-1: exc if isinstance(exc, OSError) else OSError(errno.EINVAL, str(exc))}
        for index, path in enumerate(paths):
            failure = failed.get(index, failed.get(-1))
            if failure is None:
                done.nodes.extend(by_path[path])
                continue
            log.warning("job_id=%d sbcast to %s failed: %s", message.job_id, path, failure)
            code = failure.errno or errno.EIO
            text = failure.strerror or str(failure)
            done.failures.extend(
                pb.NodeFailure(node=node, code=code, message=text) for node in by_path[path]
            )
        send(pb.AgentMessage(file_block_done=done))
