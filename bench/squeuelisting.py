"""squeue's own share of a long listing: decoding the Jobs reply and laying it out.

The reply is built here as the controller sends it to squeue (the JobInfo
fields squeue asks for, ``JobsRequest.fields``): one running job on each of
N/10 nodes and the rest pending behind them, a fixed seed. The figures are the
CPU time (the least of ``--runs``) of ``codec.decode`` with squeue's narrowing and
of ``squeue.render`` for the default format and sort, with the cyclic garbage
collector off as squeue runs it; ``loadavg`` says how busy the machine was.

    python bench/squeuelisting.py [--jobs 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli import squeue
from cli.jobs.order import DEFAULT_SORT
from corral.wire import codec

NOW = 1796014614


def records(jobs: int, seed: int = 1) -> list[dict[str, Any]]:
    """``jobs`` JobInfo dicts: the first tenth running one per node, the rest pending."""
    rng = random.Random(seed)
    users = ["alice", "bob", "carol", "dave"]
    out = []
    for i in range(jobs):
        rec: dict[str, Any] = {
            "job_id": 1000 + i,
            "partition": "batch",
            "name": "wrap" if i % 3 else f"job{i}",
            "user": users[i % 4],
            "uid": 1000 + i % 4,
            "priority": rng.randint(1, 5000),
            "num_nodes": 1,
            "time_limit": 60,
        }
        if i < jobs // 10:
            rec.update(
                state="RUNNING",
                start_time=NOW - rng.randint(0, 3000),
                nodes=f"node{i + 1}",
                end_time=NOW + 3000,
                reason="None",
            )
        else:
            rec.update(state="PENDING", reason="Priority")
        out.append(rec)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    layout = squeue.build_layout(squeue.Settings())
    sort = DEFAULT_SORT
    fields = squeue.job_fields(layout, sort)
    sent = [{k: v for k, v in r.items() if k in fields} for r in records(args.jobs)]
    data = codec.encode("JobsReply", {"jobs": sent, "now": NOW, "last_update": NOW})
    narrow = (("JobInfo", tuple(fields)),)
    decode, render = [], []
    gc.disable()
    for _ in range(args.runs):
        start = time.process_time()
        reply = codec.decode("JobsReply", data, narrow)
        middle = time.process_time()
        squeue.render(reply["jobs"], reply["now"], layout, sort=sort, env={})
        decode.append(middle - start)
        render.append(time.process_time() - middle)
        del reply
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "reply_bytes": len(data),
                "decode_cpu_s": round(min(decode), 3),
                "render_cpu_s": round(min(render), 3),
                "loadavg": os.getloadavg(),
            }
        )
    )


if __name__ == "__main__":
    main()
