"""How long a standby takes to load the state at takeover, cold and warm (docs/ha.md).

A controller on MariaDB (127.0.0.1:3306, root, no password; a database of its own,
dropped afterwards) submits ``--jobs`` jobs through the store and writes them. Then,
each timed from a free lease to a store ready to serve (take the lease, load):

* cold: a new controller reads every row, as every takeover did before the warm
  standby (and as a controller that has just started still does);
* warm: a standby that followed the state (one full read while waiting, then the
  last changes: ``--changes`` jobs ended by the serving controller) catches up and
  hands its copy to the store.

What a takeover adds to these is the lease's expiry (SlurmctldTimeout) and up to a
second of polling. Prints one JSON line.

    python bench/warmtakeover.py [--jobs 10000] [--changes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, text

from controller.dbjournal import DatabaseJournal
from controller.jobspec import from_fields
from controller.jobstate import Cancel
from controller.principal import principal_for
from controller.store import JobStore
from corral.config import SlurmConfig, parse
from corral.statestorage import StateStorage

SERVER = "mysql+pymysql://root@127.0.0.1:3306"
CONF = """\
ClusterName=bench
SlurmctldHost=ctl
MaxJobCount=1000000
NodeName=n[1-100] CPUs=64 RealMemory=256000
PartitionName=p Nodes=ALL Default=YES
"""
SPEC = from_fields(
    {"name": "bench", "script": "#!/bin/sh\nsleep 60\n", "work_dir": "/tmp", "time_limit": 60}
)


def takeover(conf: SlurmConfig, journal: DatabaseJournal) -> tuple[float, JobStore]:
    """Seconds from a free lease to a loaded store, and the store."""
    began = time.perf_counter()
    assert journal.lease.take() is None
    store = JobStore(conf, journal)
    store.load(time.monotonic())
    return time.perf_counter() - began, store


def measure(storage: StateStorage, conf: SlurmConfig, jobs: int, changes: int) -> dict[str, float]:
    serving = DatabaseJournal(storage, "bench", "serving")
    assert serving.lease.take() is None
    store = JobStore(conf, serving)
    ids = [store.submit(SPEC, principal_for(1000, 1000), 0).job.job_id for _ in range(jobs)]
    asyncio.run(store.flush())
    standby = DatabaseJournal(storage, "bench", "standby")
    began = time.perf_counter()
    standby.follow()
    first_follow = time.perf_counter() - began
    for job_id in ids[:changes]:
        store.post(job_id, Cancel(int(time.time())))
    asyncio.run(store.flush())
    began = time.perf_counter()
    standby.follow()
    later_follow = time.perf_counter() - began
    serving.close()  # the lease is free: both takeovers start at once

    # The warm one first: the standby trusts its copy only when the lease it takes
    # directly follows the one of the last batch's writer.
    warm, warm_store = takeover(conf, standby)
    standby.close()
    cold_journal = DatabaseJournal(storage, "bench", "cold")
    cold, cold_store = takeover(conf, cold_journal)
    cold_journal.close()
    assert warm_store.jobs == cold_store.jobs
    return {
        "jobs": jobs,
        "cold_takeover_s": round(cold, 3),
        "warm_takeover_s": round(warm, 3),
        "standby_first_read_s": round(first_follow, 3),
        "standby_follow_s": round(later_follow, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=100)
    args = parser.parse_args()
    server = create_engine(f"{SERVER}/mysql")
    name = f"corral_bench_{secrets.token_hex(4)}"
    with server.begin() as connection:
        connection.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4"))
    try:
        storage = StateStorage(
            kind="mysql", host="127.0.0.1", port=3306, user="root", database=name
        )
        with tempfile.TemporaryDirectory() as directory:
            conf = parse(CONF, str(Path(directory) / "slurm.conf"))
            conf = replace(conf, state_save_location=directory)
            print(json.dumps(measure(storage, conf, args.jobs, args.changes)))
    finally:
        with server.begin() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        server.dispose()


if __name__ == "__main__":
    main()
