"""The ``corral`` command's subcommands and their options, as option tables.

``corral up``, ``down``, ``cert issue``, ``sim``, ``why``, ``queues``, ``install-units`` and
``ray`` parse their arguments with these tables (``cli.options.parse``, getopt's rules), so an
option not listed is refused as unrecognized and docs/compatibility.md, written
from the same tables, lists exactly what each subcommand accepts. None of them
is a Slurm command, so every row is honoured; the note says what it does.
"""

from __future__ import annotations

from cli.options import HONOURED, NO_ARGUMENT, REQUIRED, Option, OptionTable

__all__ = [
    "CERT_ISSUE",
    "DOWN",
    "INSTALL_UNITS",
    "QUEUES",
    "RAY",
    "SIM",
    "SUBCOMMANDS",
    "UP",
    "WHY",
]


def _row(long: str, note: str, short: str = "", arg: int = NO_ARGUMENT) -> Option:
    return Option(long, short, long, arg, HONOURED, note)


_VERBOSE = _row("verbose", "a traceback with an error", "v")

UP = OptionTable(
    [
        _row("nodes", "emulated nodes (default 4)", "n", REQUIRED),
        _row("dir", "the cluster's directory (default ~/.corral/cluster)", arg=REQUIRED),
        _row("detach", "return once the cluster answers"),
        _row("demo", "run a short workload through the clients, then stop"),
        _row("set", "a slurm.conf Key=Value line (checked as slurm.conf is)", arg=REQUIRED),
        _row("database", "accounting in this SQLAlchemy URL (default SQLite)", arg=REQUIRED),
        _row("no-accounting", "no corral-dbd"),
        _row("no-restd", "no corral-restd"),
        _row("no-tls", "plaintext gRPC and HTTP"),
        _VERBOSE,
    ],
    prog="corral up",
)

DOWN = OptionTable(
    [_row("dir", "the cluster's directory (default ~/.corral/cluster)", arg=REQUIRED), _VERBOSE],
    prog="corral down",
)

CERT_ISSUE = OptionTable(
    [
        _row("ca", "the directory of the CA `corral cert ca` made (required)", arg=REQUIRED),
        _row("host", "a host name or address the certificate names (one or more)", arg=REQUIRED),
        _row("out", "where the certificate and key go (default .)", arg=REQUIRED),
        _VERBOSE,
    ],
    prog="corral cert issue",
)

SIM = OptionTable(
    [
        _row("nodes", "nodes (default: the trace header's MaxNodes)", arg=REQUIRED),
        _row("cpus-per-node", "CPUs per node (default: MaxProcs / MaxNodes)", arg=REQUIRED),
        _row(
            "policy",
            "fcfs, easy or conservative, or several comma-separated to compare (default fcfs)",
            arg=REQUIRED,
        ),
        _row("config", "replay on this slurm.conf's cluster and priorities", "f", REQUIRED),
        _row("set", "a slurm.conf Key=Value line after -f's (repeatable)", arg=REQUIRED),
        _row("accounts", "accounts, users and limits: a sacctmgr dump file", arg=REQUIRED),
        _row("map", "trace users and groups to accounts, partitions, QOS", arg=REQUIRED),
        _row("jobs", "job records A:B of the trace, as a Python slice", arg=REQUIRED),
        _row("sched-params", "bf_* SchedulerParameters for backfill (docs/sim.md)", arg=REQUIRED),
        _row("csv", "one row per job to this file", arg=REQUIRED),
        _row("png", "queue and utilization plot (needs matplotlib)", arg=REQUIRED),
        _row("queues", "a queues.conf: jobs land in its queues (needs --queue-map)", arg=REQUIRED),
        _row("queue-map", "trace users and groups to accounts (docs/queues.md)", arg=REQUIRED),
        _row("suspend-time", "power down nodes idle this many seconds", arg=REQUIRED),
        _row("resume-time", "seconds a job waits for powered-down nodes", arg=REQUIRED),
        _row("json", "the summary as one JSON object"),
        _row("quiet", "no progress on stderr"),
        _row("help", "the usage", "h"),
        _VERBOSE,
    ],
    prog="corral sim",
)

WHY = OptionTable(
    [_row("json", "the answer as JSON"), _row("help", "the usage", "h"), _VERBOSE],
    prog="corral why",
)

QUEUES = OptionTable(
    [
        _row("parsable", "'|' after every field", "p"),
        _row("parsable2", "'|' between fields", "P"),
        _row("noheader", "no header line", "n"),
        _row("json", "the queues as one JSON document"),
        _row("help", "the usage", "h"),
        _VERBOSE,
    ],
    prog="corral queues",
)

INSTALL_UNITS = OptionTable(
    [
        _row("root", "install under DIR/etc/systemd/system (default /)", arg=REQUIRED),
        _row(
            "bindir", "where the daemons are installed (default: beside this Python)", arg=REQUIRED
        ),
        _row(
            "user",
            "SlurmUser, whom corral-dbd and corral-restd run as (default slurm)",
            arg=REQUIRED,
        ),
        _row("force", "replace a unit already there that differs"),
        _VERBOSE,
    ],
    prog="corral install-units",
)

RAY = OptionTable(
    [
        _row(
            "timeout",
            "seconds to wait for every node's Ray to join (default 120)",
            arg=REQUIRED,
        ),
        _row("ray-args", "more `ray start` options, for every node (shell words)", arg=REQUIRED),
        _row("head-args", "more `ray start` options, for the head only", arg=REQUIRED),
        _row("help", "the usage", "h"),
        _VERBOSE,
    ],
    prog="corral ray",
)

#: (subcommand, table), in the order docs/compatibility.md lists them.
SUBCOMMANDS = (
    ("up", UP),
    ("down", DOWN),
    ("cert issue", CERT_ISSUE),
    ("sim", SIM),
    ("why", WHY),
    ("queues", QUEUES),
    ("install-units", INSTALL_UNITS),
    ("ray", RAY),
)
