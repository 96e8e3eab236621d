"""Become a trigger's owner and exec its program: ``python -I asowner.py UID GID USER
PROGRAM [ARG...]``, run by a root controller (``controller/triggerrun.py``).

Why a separate program: the controller serves gRPC, and gRPC's fork handlers
abort a child that forks in a threaded gRPC process without exec'ing at once.
Python's subprocess forks (rather than vforks) whenever it is asked to switch
user or groups, so the controller never asks it to: it spawns this script
as itself (vfork and exec), and the switch happens here, in a fresh process.
Standard library only, and run by path with ``-I``, so that it needs neither
the controller's packages nor its environment to start.
"""

from __future__ import annotations

import os
import sys


def become(uid: int, gid: int, user: str) -> None:
    """Take ``uid``, ``gid`` and ``user``'s groups for good, and check they took:
    a trigger's program must never run as root by accident."""
    try:
        groups = os.getgrouplist(user, gid)
    except OSError:
        groups = [gid]
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)
    if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid):
        raise OSError(f"ids not taken: uid {os.geteuid()}, gid {os.getegid()}")


def main(argv: list[str]) -> int:
    if len(argv) < 4 or not argv[0].isdigit() or not argv[1].isdigit():
        print("usage: asowner.py UID GID USER PROGRAM [ARG...]", file=sys.stderr)
        return 2
    uid, gid, user, program = int(argv[0]), int(argv[1]), argv[2], argv[3]
    try:
        become(uid, gid, user)
        os.execv(program, [program, *argv[4:]])
    except OSError as exc:
        print(f"cannot run {program} as {user} (uid {uid}, gid {gid}): {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
