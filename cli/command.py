"""What squeue, sinfo, scancel and scontrol do alike around their own work.

Each of them parses its arguments with getopt semantics (options may follow
positionals), stops with glibc's message and Slurm's ``Try ... --help`` hint
on a bad option, answers ``--help``, ``--usage`` and ``--version`` where they
stand on the command line, and checks some option values the same way (host
lists, user names, comma separated lists). squeue and sinfo also repeat their
report with ``-i``. A ``Command`` holds a command's name, option table and
texts; the early ends are ``Halt`` exceptions, which the command reports.
"""

from __future__ import annotations

import pwd
import sys
import time

from cli import boundary, options
from cli.halt import Halt
from corral.hostlist import expand

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable

    from cli.options import OptionTable, Parsed


class Command:
    """A client command: its name, its option table and what ``--help``/``--usage`` print."""

    __slots__ = ("help", "prog", "table", "usage")

    def __init__(self, prog: str, table: OptionTable, usage: str, help: str | None = None) -> None:
        self.prog = prog
        self.table = table
        self.usage = usage
        self.help = usage if help is None else help

    def parse(self, argv: list[str]) -> Parsed:
        """``argv`` as getopt splits it, options after positionals too; ``Halt(1)`` if bad."""
        try:
            return options.parse(self.table, argv, permute=True)
        except options.OptionError as exc:
            options.print_error(self.prog, exc)
            raise Halt(1) from None

    def answer(self, key: str) -> None:
        """Print the help, usage or version for those options and ``Halt(0)``; else nothing."""
        if key == "help":
            sys.stdout.write(self.help)
            raise Halt(0)
        if key == "usage":
            sys.stdout.write(self.usage)
            raise Halt(0)
        if key == "version":
            print(boundary.version_line())
            raise Halt(0)

    def check_format_and_long(self, fmt: str | None, long: bool) -> None:
        """``-o`` and ``-l`` together are fatal, as in Slurm's squeue and sinfo."""
        if long and fmt is not None:
            raise Halt(
                1,
                f"{self.prog}: fatal: Options -o(--format) and -l(--long) are mutually "
                "exclusive. Please remove one and retry.",
            )

    def hostlist(self, text: str, option: str) -> list[str]:
        """The host names of a ``--option`` host list; ``Halt(1)`` if it is malformed."""
        try:
            return expand(text)
        except ValueError:
            raise Halt(1, f"{self.prog}: error: '{text}' invalid entry for --{option}") from None


#: The note of ``-M``/``--clusters`` for a command that talks to one controller.
THIS_CLUSTER = "this cluster's name only; another is refused"


def only_this_cluster(prog: str, text: str) -> None:
    """``-M``/``--clusters`` of a command that reaches this cluster alone: ``Halt(1)``
    unless the list names it (its ClusterName), rather than act here on a request
    meant for another cluster."""
    from corral.clientconf import client_settings

    names = [name.lower() for name in split_list(text)]
    if client_settings().cluster_name.lower() not in names:
        raise Halt(
            1,
            f"{prog}: error: '{text}' can't be reached now, or it is an invalid entry for "
            "--cluster.  Use 'sacctmgr list clusters' to see available clusters.",
        )


def split_list(text: str) -> list[str]:
    """A comma separated option value, empty items dropped (``strtok``)."""
    return [item for item in text.split(",") if item]


def known_user(name: str) -> bool:
    """Whether ``name`` is a numeric uid or a user the password database knows."""
    if name.isdigit():
        return True
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def repeat(report: Callable[[], int], iterate: int, stamp: bool) -> int:
    """Run ``report`` once, or every ``iterate`` seconds for ever; 1 if any run failed.

    With ``stamp`` each report starts with the time (``-l``, ``-i``); reports are
    separated by an empty line.
    """
    status = 0
    while True:
        if stamp:
            print(time.ctime())
        if report():
            status = 1
        if not iterate:
            return status
        print()
        sys.stdout.flush()
        time.sleep(iterate)
