"""The command line a supervisor or step runner is started with (argparse costs too much).

``PATH [--lock-fd N] [--notify-fd N]``, or ``SPOOL --zygote-fd N`` for the zygote.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterable

from corral import oomscore

Args = tuple[str, int | None, int | None, int | None]


def start(argv: list[str] | None, usage: str, watched: Iterable[int], name: str) -> Args:
    """A supervisor's or step runner's (the program ``name``'s) start: its arguments
    (``parse_args``), the ``watched`` signals blocked before anything can arrive, log
    lines to stderr, and itself kept from the OOM killer (the zygote's children,
    which never come here, inherit that)."""
    args = parse_args(sys.argv[1:] if argv is None else argv, usage)
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    oomscore.protect(name)
    return args


def parse_args(argv: list[str], usage: str) -> Args:
    """PATH and the inherited descriptors: lock and notify, or the zygote's socket;
    SystemExit with ``usage`` for anything else."""
    path: str | None = None
    fds: dict[str, int | None] = {"--lock-fd": None, "--notify-fd": None, "--zygote-fd": None}
    args = iter(argv)
    for arg in args:
        if arg in fds:
            value = next(args, "")
            if not value.isdigit():
                raise SystemExit(usage)
            fds[arg] = int(value)
        elif path is None and not arg.startswith("-"):
            path = arg
        else:
            raise SystemExit(usage)
    lock_fd, notify_fd, zygote_fd = fds["--lock-fd"], fds["--notify-fd"], fds["--zygote-fd"]
    if path is None or (zygote_fd is not None and (lock_fd, notify_fd) != (None, None)):
        raise SystemExit(usage)
    return path, lock_fd, notify_fd, zygote_fd
