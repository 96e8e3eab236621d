"""One sbcast block written as the job's user: a short-lived child of the agent.

The agent stays root and multithreaded (gRPC), where switching ids even for a
moment would change them for every thread; so each block is written by this
process, which becomes the job's user for good first (``runas.become_user``, as a
job's processes do) and only then opens the destination. A user can therefore
write only where the user may, and the file is the user's (owner and group).

Command line: ``OFFSET SIZE COMPRESS FIRST FORCE LAST MKDIR MODE ATIME MTIME UID GID
USER PATH...``; the block's bytes on standard input, compressed as COMPRESS says, go
to every PATH (the agent's emulated nodes' own copies; one for a real node). The
first block creates the file (``O_EXCL`` unless forced, as slurmd refuses an
existing file without sbcast -f), after making the file's directory if MKDIR is 1
(sbcast --send-libs' ``<executable>_libs``, the user's alone); the last sets its
mode, and with ATIME/MTIME other than -1 its times (-p). Each path that fails is a
line ``INDEX ERRNO MESSAGE`` on standard error (INDEX -1: all of them) and the exit status is 1.

Standard library only: one of these starts per block and node path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import zlib

from nodeagent.runas import LaunchError, become_user


def write_block(
    path: str,
    offset: int,
    data: bytes,
    *,
    first: bool,
    force: bool,
    mkdir: bool = False,
    last: bool,
    mode: int,
    times: tuple[int, int] | None,
) -> None:
    """Put ``data`` at ``offset`` in ``path``, as this process's user; ``mkdir``: its
    directory made first unless it is there."""
    if mkdir:
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.dirname(path), 0o700)
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    if first:
        flags |= os.O_CREAT | os.O_TRUNC | (0 if force else os.O_EXCL)
    fd = os.open(path, flags, 0o600)
    try:
        if first and force:
            # A file replaced is one this user owns, or may write: make it the user's
            # new file rather than keep another mode on it meanwhile.
            os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view = view[written:]
            offset += written
        if last:
            os.fchmod(fd, mode & 0o777)  # as slurmd: no set-id bits
            if times is not None:
                os.utime(fd, times)
    finally:
        os.close(fd)


def unpack(data: bytes, compress: str, size: int) -> bytes:
    """The block as it was before the client compressed it; ValueError if it is not
    ``size`` bytes long then."""
    if compress == "lz4":
        import lz4.frame

        try:
            data = lz4.frame.decompress(data)
        except RuntimeError as exc:  # python-lz4's word for a frame it cannot read
            raise ValueError(f"not an LZ4 frame: {exc}") from None
    elif compress == "zlib":
        try:
            data = zlib.decompress(data)
        except zlib.error as exc:
            raise ValueError(f"not zlib data: {exc}") from None
    elif compress:
        raise ValueError(f"compression type {compress!r} not supported")
    if len(data) != size:
        raise ValueError(f"block of {len(data)} bytes, {size} announced")
    return data


def main(argv: list[str]) -> int:
    offset, size, compress, first, force, last, mkdir, mode, atime, mtime = argv[:10]
    uid, gid, user = argv[10:13]
    paths = argv[13:]
    try:
        become_user(int(uid), int(gid), user)
        data = unpack(sys.stdin.buffer.read(), compress if compress != "-" else "", int(size))
    except OSError as exc:
        print(-1, exc.errno or errno.EIO, exc.strerror or str(exc), file=sys.stderr)
        return 1
    except (LaunchError, ValueError, zlib.error) as exc:
        print(-1, errno.EINVAL, exc, file=sys.stderr)
        return 1
    status = 0
    for index, path in enumerate(paths):
        try:
            write_block(
                path,
                int(offset),
                data,
                first=first == "1",
                force=force == "1",
                mkdir=mkdir == "1",
                last=last == "1",
                mode=int(mode),
                times=(int(atime), int(mtime)) if int(atime) >= 0 else None,
            )
        except OSError as exc:
            print(index, exc.errno or errno.EIO, exc.strerror or str(exc), file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
