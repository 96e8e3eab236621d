"""srun: run a job step's tasks on an allocation's nodes and bring their I/O home.

``launch`` runs the command (the step request, srun's end of the I/O stream,
signals, exit codes), ``step_options`` says what a step does with the options
that shape a new job, and ``values`` checks the option values that take a
word. Outside an allocation srun first gets one through ``cli/allocation.py``,
which salloc shares. Like the other commands' packages, this module imports
nothing until ``main`` runs (``os`` and ``sys`` are loaded at every start).
"""

import os
import sys


def main() -> None:
    """The ``srun`` client script (``bin/srun``)."""
    from cli import boundary
    from cli.srun.launch import PROG, srun

    try:
        boundary.run(PROG, srun)
    except SystemExit as done:
        # Skip the interpreter's teardown (a few ms of srun's latency); nothing is
        # left to clean up once the output is flushed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(done.code if isinstance(done.code, int) else 1)
