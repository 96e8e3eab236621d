"""``corral-nodeagent``: the node daemon (slurmd's role).

    corral-nodeagent [-f SLURM_CONF] [-N HOSTLIST] [-D] [-v]

Without ``-N`` it serves the slurm.conf nodes whose NodeHostname (or
NodeName) is this host's short name; with ``-N`` it serves the named nodes,
emulating them all in one process. It always stays in the foreground
and logs to stderr, since what starts it (systemd, ``corral up``, a test
harness) also watches it and keeps its log; ``-D`` is accepted so that
slurmd's usual command line works unchanged.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import uvloop

from corral import __version__, hostlist, oomscore, ratelimit
from corral.config import ConfigError, default_path, load
from corral.sdnotify import Notifier
from nodeagent.agent import AgentError, serve

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="corral-nodeagent", description="Corral node agent")
    parser.add_argument("-f", dest="conf", metavar="SLURM_CONF", help="slurm.conf to read")
    parser.add_argument(
        "-N",
        "--nodes",
        metavar="HOSTLIST",
        help="serve these nodes (a hostlist such as n[1-4] or n1,n2)",
    )
    parser.add_argument(
        "-D", "--foreground", action="store_true", help="stay in the foreground (always the case)"
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log debug messages too")
    parser.add_argument("-V", "--version", action="version", version=f"corral {__version__}")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format=LOG_FORMAT,
    )
    oomscore.protect("corral-nodeagent")
    notifier = Notifier.from_environment()  # before the zygote and jobs inherit it
    try:
        conf = load(os.path.abspath(args.conf or default_path()))
        requested = hostlist.expand(args.nodes) if args.nodes else None
        ratelimit.from_config(conf)  # a malformed SlurmctldParameters number stops us here
    except (ConfigError, ValueError) as exc:
        print(f"corral-nodeagent: error: {exc}", file=sys.stderr)
        return 1
    try:
        uvloop.run(serve(conf, requested, notifier))
    except AgentError as exc:
        log.error("%s", exc)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
