"""The command line a supervisor or step runner is started with (argparse costs too much).

``PATH [--lock-fd N] [--notify-fd N]``, or ``SPOOL --zygote-fd N`` for the zygote.
"""

from __future__ import annotations


def parse_args(argv: list[str], usage: str) -> tuple[str, int | None, int | None, int | None]:
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
