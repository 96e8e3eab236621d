"""srun --bcast[=DEST]: the executable copied to every node of the step before it runs.

As Slurm 22.05's srun (measured there): the step is created, the file goes to each of
its nodes, then the tasks start and run the copy, whose path they see as ``$0``. The
copy is ``DEST`` when that is absolute, else (no DEST, or a relative one)
``slurm_bcast_JOB.STEP_NODE`` in BcastParameters' ``DestDir``, else in srun's current
directory. ``--compress[=lib]`` and ``--send-libs[=yes|no]`` are sbcast's, with
BcastParameters' ``Compression`` and ``send_libs`` as their defaults; the shared
objects go to ``COPY_libs``, which starts the tasks' LD_LIBRARY_PATH.

The blocks travel as sbcast's do (``cli/sbcast.py``, ``Broadcast`` naming the step):
the controller checks the caller against the step and hands them to the agents of its
nodes. The runners, told to wait (``StepCreateRequest.bcast_dir``), start no task
before srun's GO (``corral/stepio.py``); a failed copy is srun's error and exit 1, and
the runners, whose srun hung up, start nothing.
"""

from __future__ import annotations

import os
import sys

from cli import sbcast
from cli.halt import Halt

TYPE_CHECKING = False  # typing costs milliseconds of a client's start-up budget
if TYPE_CHECKING:
    from collections.abc import Mapping

    from corral.client import Client
    from corral.clientconf import ClientSettings

PROG = "srun"
#: The options that only mean something with --bcast.
WITH_BCAST = ("compress", "send-libs")


def check(options: Mapping[str, str | None]) -> None:
    """--compress and --send-libs apply to --bcast's copy alone: without --bcast they
    are refused (Slurm's srun accepts them and does nothing)."""
    if "bcast" in options:
        return
    for key in WITH_BCAST:
        if key in options:
            raise Halt(1, f"{PROG}: error: --{key} needs --bcast")


def executable(command: str) -> str:
    """The file srun sends: ``command`` as given when it holds a slash (relative to the
    current directory), else the first match on PATH; Halt in Slurm's words when there
    is none that may be executed."""
    if "/" in command:
        path = command if command.startswith("/") else os.path.join(os.getcwd(), command)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    else:
        for directory in os.environ.get("PATH", "").split(os.pathsep):
            path = os.path.join(directory or ".", command)
            if os.access(path, os.X_OK) and not os.path.isdir(path):
                return path if path.startswith("/") else os.path.join(os.getcwd(), path)
    raise Halt(1, f"{PROG}: fatal: Can not execute {command}")


class Copy:
    """What --bcast sends where, read from srun's options and slurm.conf's
    BcastParameters (``conf``)."""

    def __init__(self, options: Mapping[str, str | None], command: str, conf: ClientSettings):
        params = sbcast.Params()
        params.source = executable(command)
        params.force = True  # Slurm's srun replaces an older copy (measured)
        params.exclude = conf.bcast_exclude
        params.send_libs = conf.bcast.send_libs
        if conf.bcast.compression:
            params.compress = sbcast.compression(conf.bcast.compression, PROG)
        if "compress" in options:
            params.compress = sbcast.compression(options["compress"], PROG)
        if "send-libs" in options:
            params.send_libs = sbcast.send_libs(options["send-libs"], params.send_libs, PROG)
        dest = options.get("bcast") or ""
        self.dest = dest if dest.startswith("/") else ""  # relative: the default name
        self.dir = conf.bcast.dest_dir or os.getcwd()
        self.params = params

    def fields(self) -> dict[str, object]:
        """The step request's --bcast fields (the runners wait for GO)."""
        return {
            "bcast_dir": self.dir,
            "bcast_dest": self.dest,
            "bcast_libs": self.params.send_libs,
        }

    def send(self, client: Client, job_id: int, step_id: int) -> int:
        """Copy the executable (and with --send-libs its shared objects) to the step's
        nodes: 0, or 1 once Slurm's error lines are said."""
        params = self.params
        params.job_id, params.step = job_id, str(step_id)
        # the default name carries each node's: its writer expands %n (cli/sbcast.py)
        params.dest = self.dest or f"{self.dir.rstrip('/')}/slurm_bcast_{job_id}.{step_id}_%n"
        status = self._send(client, params.source, params.dest, library=False)
        if not status and params.send_libs:
            from cli.sharedobjects import shared_objects

            for path in shared_objects(params.source, params.exclude):
                dest = f"{params.dest}_libs/{os.path.basename(path)}"
                status = self._send(client, path, dest, library=True)
                if status:
                    break
        if status:
            print(
                f"{PROG}: fatal: Failed to broadcast '{params.source}'. Step launch aborted.",
                file=sys.stderr,
            )
        return status

    def _send(self, client: Client, path: str, dest: str, *, library: bool) -> int:
        try:
            source = sbcast.open_source(path)
        except Halt as halt:
            return halt.report()
        with source:
            return sbcast.send_file(client, self.params, source, dest, library=library, prog=PROG)
