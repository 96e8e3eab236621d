"""salloc: get an allocation, run a command (or a shell) in it, give it back.

The command runs here, on the submitting host, as Slurm's salloc does, with
the allocation's SLURM_* variables added to salloc's environment; ``srun``
inside it then runs steps on the allocated nodes. The exit status is the
command's. If the allocation ends under it (scancel, time limit), salloc
says so and ends the command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from cli import allocation, boundary
from cli.allocation import release, submit, wait_for_start
from cli.halt import Halt
from cli.options import (
    HONOURED,
    NO_ARGUMENT,
    OPTIONAL,
    REFUSED,
    REQUIRED,
    WARNED,
    Option,
    OptionError,
    OptionTable,
    put_last,
)
from cli.options import parse as parse_options
from cli.sbatch.hintopts import DROPPED
from cli.sbatch.options import TOPOLOGY_LEVEL
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from typing import Any

    from cli import sallocresize

PROG = "salloc"
#: What -M does for an allocation (docs/federation.md).
CLUSTERS = "to the cluster named; of several, the one that would start it first"
#: How often salloc checks its allocation still stands while the command runs.
CHECK_EVERY = 2.0

USAGE = """\
Usage: salloc [-N numnodes] [-n ntasks] [-c ncpus] [-t time] [-p partition] [-A account]
              [-w hosts] [-x hosts] [-J jobname] [--mem=MB] [command [args...]]
"""


def _row(
    long: str, short: str = "", arg: int = REQUIRED, use: str = HONOURED, note: str = ""
) -> Option:
    return Option(long, short, long, arg, use, note)


TABLE = OptionTable(
    [
        _row("account", "A"),
        _row("chdir", "D"),
        _row("clusters", "M", note=CLUSTERS),
        Option("clusters", "", "cluster", REQUIRED, HONOURED, CLUSTERS),
        _row("constraint", "C"),
        _row("container", note="the allocation's: shown and in SLURM_CONTAINER (steps: srun's)"),
        _row("container-id", note="Slurm 24.11's: shown and in SLURM_CONTAINER_ID"),
        _row(
            "cores-per-socket",
            note="at least that many free cores on each socket the job uses; without -n on a fixed "
            "node count, a task per core (Slurm's); a --hint that holds drops it",
        ),
        _row("cpus-per-gpu"),
        _row("cpus-per-task", "c"),
        _row("dependency", "d", note="as sbatch's; expand:JOBID grows a running job (Slurm's)"),
        _row(
            "elastic",
            arg=OPTIONAL,
            note="Corral's: with -N min-max the allocation grows and shrinks; salloc tells "
            "its command by SIG (default WINCH) and $CORRAL_RESIZE_FILE",
        ),
        _row("exclude", "x"),
        _row("exclusive", arg=OPTIONAL, note="=user, =mcs and =topo are refused"),
        _row(
            "extra-node-info",
            "B",
            note="S[:C[:T]], each a count, MIN-MAX (the minimum) or *: as --sockets-per-node, "
            "--cores-per-socket and --threads-per-core; drops --hint",
        ),
        _row("gpu-bind", note="the allocation's steps bind their tasks by it (SLURM_GPU_BIND)"),
        _row("gpus", "G"),
        _row("gpus-per-node"),
        _row("gpus-per-socket", note="with --sockets-per-node"),
        _row("gpus-per-task"),
        _row("gres", note="A|B: alternatives, in order of preference (Corral's own)"),
        _row("gres-flags", note="enforce-binding (CPUs near the GPUs only) or disable-binding"),
        _row("help", "h", NO_ARGUMENT),
        _row(
            "hint",
            note="nomultithread, compute_bound, memory_bound: a thread of each whole core; "
            "SLURM_HINT for the steps",
        ),
        _row("immediate", "I", OPTIONAL, REFUSED, "immediate allocation is not implemented"),
        _row("job-name", "J"),
        _row("licenses", "L", note="names of slurm.conf's Licenses=, each :count (default 1)"),
        _row("mail-type", note="by slurm.conf's MailProg, with Slurm's subject lines"),
        _row("mail-user"),
        _row("mem"),
        _row("mem-per-cpu"),
        _row("mem-per-gpu"),
        _row("nodefile", "F"),
        _row("nodelist", "w"),
        _row("nodes", "N"),
        _row("ntasks", "n"),
        _row("ntasks-per-gpu"),
        _row("ntasks-per-node"),
        _row("ntasks-per-socket", note="at most N tasks on each socket of a node"),
        _row("partition", "p"),
        _row("prefer", note="tried first, then --constraint, as Slurm 22.05 does"),
        _row("qos", "q"),
        _row("quiet", "Q", NO_ARGUMENT),
        _row("reservation"),
        _row("segment", note="with TopologyPlugin=topology/block"),
        _row("switches", note="with TopologyPlugin=topology/tree"),
        _row(
            "sockets-per-node",
            note="nodes with at least that many sockets; without -n on a fixed node count, "
            "a task per socket (Slurm's)",
        ),
        _row("threads-per-core", note="that many threads of each whole core; drops --hint"),
        _row("time", "t"),
        _row("topology-level", note=TOPOLOGY_LEVEL),
        _row("usage", arg=NO_ARGUMENT),
        _row(
            "verbose",
            "v",
            NO_ARGUMENT,
            WARNED,
            "salloc prints no progress, only Slurm's line on a --hint that --threads-per-core "
            "drops",
        ),
        _row("version", "V", NO_ARGUMENT),
    ],
    prog="salloc",
)


def _command(positional: list[str]) -> list[str]:
    if positional:
        return positional
    return [os.environ.get("SHELL") or "/bin/sh"]


def salloc(argv: list[str]) -> int:
    try:
        found, positional = parse_options(TABLE, argv)
    except OptionError as exc:
        return Halt(1, f"{PROG}: {exc}", f'Try "{PROG} --help" for more information').report()
    options: dict[str, str | None] = {}
    for option, value in found:
        if option.key in ("help", "usage"):
            print(USAGE, end="")
            return 0
        if option.key == "version":
            print(boundary.version_line())
            return 0
        put_last(options, option.key, value)
    het: list[dict[str, str | None]] = []
    while positional[:1] == [":"]:  # the next component of a heterogeneous job
        try:
            more, positional = parse_options(TABLE, positional[1:])
        except OptionError as exc:
            return Halt(1, f"{PROG}: {exc}", f'Try "{PROG} --help" for more information').report()
        component: dict[str, str | None] = {}
        for option, value in more:
            put_last(component, option.key, value)
        het.append(component)
    quiet = "quiet" in options
    dropper = "threads-per-core" in options or "extra-node-info" in options
    if "verbose" in options and "hint" in options and dropper:
        print(f"{PROG}: {DROPPED}", file=sys.stderr)
    command = _command(positional)
    try:
        if options.get("clusters"):
            allocation.choose_cluster(PROG, options, os.path.basename(command[0]), argv, het)
        client = boundary.connect()
        job_id = submit(client, PROG, options, os.path.basename(command[0]), argv, het)
        env = wait_for_start(client, PROG, job_id, quiet)
    except Halt as halt:
        return halt.report()
    if not quiet:
        print(f"{PROG}: Granted job allocation {job_id}", file=sys.stderr)
    status = 0
    elastic = allocation.elastic_signal(options)
    resizes = None
    if elastic:  # imported only then: every other salloc starts without it
        from cli.sallocresize import Resizes

        resizes = Resizes(job_id, elastic, 0)
    halt_notices = allocation.print_notices(client, PROG, job_id)
    try:
        env.update(allocation.gpu_environment(options))
        if resizes:
            env.update(resizes.environment())
        env.update(allocation.hint_environment(options))
        status = _run(client, job_id, command, {**os.environ, **env}, resizes)
    finally:
        halt_notices()
        if not quiet:
            print(f"{PROG}: Relinquishing job allocation {job_id}", file=sys.stderr)
        release(client, job_id, status)
        if resizes:
            resizes.close()
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _run(
    client: Any,
    job_id: int,
    command: list[str],
    env: dict[str, str],
    resizes: sallocresize.Resizes | None,
) -> int:
    """Run the command to its end (or the allocation's); its wait status. An elastic
    allocation's resizes are told to the command as they are seen (``resizes``)."""
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        print(f"{PROG}: error: {command[0]}: {exc.strerror}", file=sys.stderr)
        return 1 << 8
    # The command owns the terminal's signals, as with Slurm's salloc.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        checked = time.monotonic()
        given = False  # its nodes went to the job it expands: nothing more to watch
        while True:
            try:
                child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if not given and time.monotonic() - checked >= CHECK_EVERY:
                checked = time.monotonic()
                state = _state(client, job_id, resizes, child)
                # COMPLETED under it: only NumNodes=0 of an expansion ends an allocation
                # so (salloc's own release comes after); Slurm's salloc goes on too.
                given = state == "COMPLETED"
                if state not in ("RUNNING", "COMPLETED"):
                    print(f"{PROG}: Job allocation {job_id} has been revoked.", file=sys.stderr)
                    child.send_signal(signal.SIGHUP)
                    try:
                        child.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                    break
    finally:
        signal.signal(signal.SIGINT, previous)
    code = child.returncode
    return (-code & 0x7F) if code < 0 else (code & 0xFF) << 8


def _state(
    client: Any, job_id: int, resizes: sallocresize.Resizes | None, child: subprocess.Popen[bytes]
) -> str:
    """The allocation's state ("" if it cannot be had); an elastic one's new size told
    to the command."""
    try:
        reply = client.call("Allocation", {"job_id": job_id})
    except SlurmError:
        return ""
    if resizes and reply["state"] == "RUNNING":
        resizes.heard(reply, child)
    state: str = reply["state"]
    return state


def main() -> None:
    boundary.run(PROG, salloc)
