"""The one error boundary every client command runs inside.

``run("sbatch", main)`` calls ``main(argv)`` and turns failures into Slurm's
output: ``sbatch: error: <message>`` on stderr and exit status 1, followed by
``sbatch: fatal: Unable to process configuration file`` when slurm.conf is
the problem. A traceback is shown only with ``-v`` (or ``CORRAL_DEBUG=1``).
"""

from __future__ import annotations

import os
import sys

from corral import SLURM_VERSION
from corral.confsyntax import ConfigError
from corral.errors import CorralError, SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

    from corral.client import Client
    from corral.clientconf import ClientSettings


class UsageError(CorralError):
    """Bad command-line input; the message is printed after ``prog: error: ``."""


class Exit(CorralError):
    """Stop with ``status`` after the command has printed what it had to."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def version_line() -> str:
    """What ``--version`` prints for every Slurm-compatible client."""
    return f"slurm {SLURM_VERSION}"


def connect(settings: ClientSettings | None = None) -> Client:
    """A ``Client`` for the controller named by ``settings`` (the active slurm.conf's
    unless a command that reads more of it passes them); in a job or allocation of
    another cluster (SLURM_WORKING_CLUSTER, set by ``-M``), that cluster's controller,
    reached through this host's daemon (docs/federation.md)."""
    from corral.client import Client, local_sockets
    from corral.clientconf import client_settings

    settings = settings or client_settings()
    working = os.environ.get("SLURM_WORKING_CLUSTER", "").partition(":")[0]
    elsewhere = working if working.lower() != settings.cluster_name.lower() else ""
    where = local_sockets(
        settings.state_save_location,
        settings.slurmd_spool_dir,
        len(settings.controller_hosts),
    )
    return Client(where, cluster=elsewhere, failover_s=settings.failover_s)


def run(prog: str, main: Callable[[list[str]], int]) -> NoReturn:
    """Run ``main(sys.argv[1:])`` and exit with its status, printing errors Slurm's way."""
    argv = sys.argv[1:]
    debug = os.environ.get("CORRAL_DEBUG") == "1" or "-v" in argv or "--verbose" in argv
    try:
        status = main(argv)
    except Exit as stop:
        status = stop.status
    except (SlurmError, UsageError) as exc:
        if debug:
            import traceback

            traceback.print_exc()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        status = int(os.environ.get("SLURM_EXIT_ERROR", "1") or 1)
    except ConfigError as exc:
        # Slurm's clients follow the parser's complaint with this fatal line.
        print(f"{prog}: error: {exc}", file=sys.stderr)
        print(f"{prog}: fatal: Unable to process configuration file", file=sys.stderr)
        status = 1
    except CorralError as exc:  # the cluster key and the like
        print(f"{prog}: error: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        status = 130
    except BrokenPipeError:
        # `squeue | head`: stop quietly, like a C program killed by SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 141
    sys.stdout.flush()
    sys.exit(status)
