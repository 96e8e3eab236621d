"""What each Ray step's task runs on its node: ``ray start`` with that node's resources.

``python -m cli.ray.node --cpus NODES=N[;NODES=N...] RAY start ...`` finds its node
(``SLURMD_NODENAME``, set in every task), takes its CPUs from ``--cpus`` (the
allocation's, which corral ray read where the whole job's list is) and its GPUs
from its own environment, and runs ``RAY start ... --num-cpus=C --num-gpus=G
--node-name=NODE`` until it exits.

The teardown's SIGTERM reaches every process of the step (srun passes it on, and
the step's processes are signalled as one): Ray's ``--block`` process then ends
the node's Ray and exits 1. That was asked for, so this exits 0 after a SIGTERM
(or SIGHUP or SIGINT, which reach it the same way when salloc's allocation is
revoked or a terminal is interrupted) and the step ends COMPLETED; otherwise it
exits with Ray's status, and a Ray that failed on its own leaves a FAILED step.
Ray's SIGTERM drain (Ray 2.60 waits up to 30 s for the node to drain through the
GCS, which the same SIGTERM ends) is off unless the job's environment sets
``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S``.

One step runs this on every worker node, and the nodes of an allocation may
have different CPU counts (``-n3 -N2`` gives ``2,1``): one command line has to
serve them all, so the count is looked up here rather than written into it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from cli.ray.plan import launch_options, node_cpus

PROG = "corral ray"
DRAIN = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"


def command(argv: list[str], env: dict[str, str]) -> list[str]:
    """The ``ray start`` command line for this node; SystemExit with a message if the
    arguments or the environment do not say what it is."""
    node = env.get("SLURMD_NODENAME", "")
    if len(argv) < 3 or argv[0] != "--cpus" or not node:
        raise SystemExit(f"{PROG}: error: usage: {__name__} --cpus NODES=N;... RAY start ...")
    try:
        cpus = node_cpus(argv[1], node)
    except (KeyError, ValueError):
        raise SystemExit(f"{PROG}: error: no CPU count for node {node} in {argv[1]!r}") from None
    return [*argv[2:], *launch_options(node, cpus, env)]


def main() -> None:
    env = dict(os.environ)
    argv = command(sys.argv[1:], env)
    env.setdefault(DRAIN, "0")
    stopped: list[int] = []
    for stop in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(stop, lambda signum, frame: stopped.append(signum))
    try:
        ray = subprocess.Popen(argv, env=env)
    except OSError as exc:
        raise SystemExit(f"{PROG}: error: cannot run {argv[0]}: {exc.strerror}") from None
    status = ray.wait()
    sys.exit(0 if stopped else 128 - status if status < 0 else status)


if __name__ == "__main__":
    main()
