"""sdiag: the controller's counters, laid out as Slurm 24.11's sdiag prints them.

Tools scrape these lines (``DBD Agent queue size:`` is how sites watch the
accounting backlog), so the labels, tabs and spacing are Slurm's. Corral's
pass runs the main scheduler and backfill in one call: a backfill cycle's
time includes its main pass. Lines Slurm prints for machinery Corral does
not have (RPC queueing, agent threads, het jobs) show 0.
"""

from __future__ import annotations

import sys
import time

from cli import boundary
from cli.command import Command
from cli.halt import Halt
from cli.options import REQUIRED, Option, OptionTable
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs milliseconds of a client's start-up budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

PROG = "sdiag"

USAGE = "Usage: sdiag [-M cluster] [-aritT]\n"

HELP = """\
Usage: sdiag [OPTIONS]
  -a, --all             all statistics
  -M, --cluster=NAME    cluster to issue commands to (only this one)
  -r, --reset           reset statistics (operators only)
  -i, --sort-by-id      sort RPCs by id
  -t, --sort-by-time    sort RPCs by total time
  -T, --sort-by-time2   sort RPCs by average time
  -V, --version         output version information and exit

Help options:
  --help                show this help message
  --usage               display brief usage message
"""

TABLE = OptionTable(
    [
        Option("all", "a", "all", note="the default: every figure"),
        Option("cluster", "M", "cluster", REQUIRED),
        Option("reset", "r", "reset"),
        Option("by_id", "i", "sort-by-id"),
        Option("by_time", "t", "sort-by-time"),
        Option("by_time2", "T", "sort-by-time2"),
        Option("version", "V", "version"),
        Option("help", "", "help"),
        Option("usage", "", "usage"),
    ],
    prog="sdiag",
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

SCHEDULE_EXITS = (
    "End of job queue",
    "Hit default_queue_depth",
    "Hit sched_max_job_start",
    "Blocked on licenses",
    "Hit max_rpc_cnt",
    "Timeout (max_sched_time)",
)
BACKFILL_EXITS = (
    "End of job queue",
    "Hit bf_max_job_start",
    "Hit bf_max_job_test",
    "System state changed",
    "Hit table size limit (bf_node_space_size)",
    "Timeout (bf_max_time)",
)


def _ctime(epoch: int) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(epoch))


def render(d: Mapping[str, Any], sort: str = "count") -> str:
    """sdiag's report of a DiagReply."""
    now, since = d["now"], d["since"]
    lines = [
        "*******************************************************",
        f"sdiag output at {_ctime(now)} ({now})",
        f"Data since      {_ctime(since)} ({since})",
        "*******************************************************",
        "Server thread count:  1",
        "RPC queue enabled:    0",
        f"Agent queue size:     {d['agent_queue']}",
        f"Agent count:          {d['agent_count']}",
        "Agent thread count:   0",
        f"DBD Agent queue size: {d['dbd_queue']}",
        "",
        f"Jobs submitted: {d['jobs_submitted']}",
        f"Jobs started:   {d['jobs_started']}",
        f"Jobs completed: {d['jobs_completed']}",
        f"Jobs canceled:  {d['jobs_canceled']}",
        f"Jobs failed:    {d['jobs_failed']}",
        "",
        f"Job states ts:  {_ctime(now)} ({now})",
        f"Jobs pending:   {d['jobs_pending']}",
        f"Jobs running:   {d['jobs_running']}",
        "",
        "Main schedule statistics (microseconds):",
        f"\tLast cycle:   {d['sched_last_us']}",
        f"\tMax cycle:    {d['sched_max_us']}",
        f"\tTotal cycles: {d['sched_cycles']}",
    ]
    cycles = d["sched_cycles"]
    if cycles:
        lines.append(f"\tMean cycle:   {d['sched_total_us'] // cycles}")
        lines.append(f"\tMean depth cycle:  {d['sched_total_depth'] // cycles}")
    if now - since > 60:
        lines.append(f"\tCycles per minute: {cycles // ((now - since) // 60)}")
    lines.append(f"\tLast queue length: {d['sched_last_queue']}")
    lines += ["", "Main scheduler exit:"]
    hit_depth = d["sched_hit_depth"]
    counts = (cycles - hit_depth, hit_depth, 0, 0, 0, 0)
    lines += [f"\t{name}:{count:2d}" for name, count in zip(SCHEDULE_EXITS, counts, strict=True)]
    bf_cycles = d["bf_cycles"]
    lines += [
        "",
        "Backfilling stats",
        f"\tTotal backfilled jobs (since last slurm start): {d['bf_total_jobs']}",
        f"\tTotal backfilled jobs (since last stats cycle start): {d['bf_total_jobs']}",
        "\tTotal backfilled heterogeneous job components: 0",
        f"\tTotal cycles: {bf_cycles}",
    ]
    when = d["bf_last_when"]
    lines.append(
        f"\tLast cycle when: {_ctime(when)} ({when})" if when else "\tLast cycle when: N/A"
    )
    lines += [f"\tLast cycle: {d['bf_last_us']}", f"\tMax cycle:  {d['bf_max_us']}"]
    if bf_cycles:
        lines.append(f"\tMean cycle: {d['bf_total_us'] // bf_cycles}")
    lines += [
        f"\tLast depth cycle: {d['bf_last_depth']}",
        f"\tLast depth cycle (try sched): {d['bf_last_depth']}",
        f"\tLast queue length: {d['bf_last_queue']}",
        "\tLast table size: 0",
        "",
        "Backfill exit",
    ]
    hit_test = d["bf_hit_max_test"]
    counts = (bf_cycles - hit_test, 0, hit_test, 0, 0, 0)
    lines += [f"\t{name}:{count:2d}" for name, count in zip(BACKFILL_EXITS, counts, strict=True)]
    lines += ["", "Latency for 1000 calls to gettimeofday(): 0 microseconds", ""]
    lines.append("Remote Procedure Call statistics by message type")
    rpcs = sorted(d["rpcs"], key=_rpc_order(sort))
    for r in rpcs:
        average = r["total_us"] // max(r["count"], 1)
        lines.append(
            f"\t{r['name']:<40s}({r['id']:5d}) count:{r['count']:<6d} "
            f"ave_time:{average:<6d} total_time:{r['total_us']}"
        )
    if not rpcs:
        lines.append("\tNo RPCs recorded yet.")
    lines += ["", "Remote Procedure Call statistics by user"]
    for u in sorted(d["users"], key=_rpc_order(sort)):
        average = u["total_us"] // max(u["count"], 1)
        lines.append(
            f"\t{u['user']:<16s}({u['uid']:8d}) count:{u['count']:<6d} "
            f"ave_time:{average:<6d} total_time:{u['total_us']}"
        )
    lines += ["", "Pending RPC statistics", "\tNo pending RPCs", ""]
    return "\n".join(lines)


def _rpc_order(sort: str) -> Any:
    if sort == "id":
        return lambda r: r.get("id", r.get("uid", 0))
    if sort == "time":
        return lambda r: -r["total_us"]
    if sort == "time2":
        return lambda r: -(r["total_us"] // max(r["count"], 1))
    return lambda r: -r["count"]


def sdiag(argv: list[str]) -> int:
    """Run sdiag with ``argv``; return the exit status."""
    try:
        found, positional = COMMAND.parse(argv)
        reset, sort, cluster = False, "count", ""
        for opt, value in found:
            COMMAND.answer(opt.key)
            if opt.key == "reset":
                reset = True
            elif opt.key == "cluster":
                cluster = value or ""
            elif opt.key in ("by_id", "by_time", "by_time2"):
                sort = {"by_id": "id", "by_time": "time", "by_time2": "time2"}[opt.key]
        if positional:
            print(f"{PROG}: error: Unknown argument: {positional[0]}", file=sys.stderr)
            return 1
    except Halt as halt:
        return halt.report()
    from cli import clusters

    client = clusters.one(PROG, cluster) if cluster else boundary.connect()
    try:
        reply = client.call("Diag", {"reset": reset})
    except SlurmError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    if reset:
        print("Reset scheduling statistics")
        return 0
    sys.stdout.write(render(reply, sort))
    return 0


def main() -> None:
    boundary.run(PROG, sdiag)
