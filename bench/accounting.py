"""Accounting at scale: corral-dbd's store on SQLite and on MariaDB.

For each backend, on a fresh database:

* ``ingest``: job records stored through ``Storage.record_jobs`` in batches
  of 500, as the controller's outbox delivers them (every record new), and
  the same batches once more (a resend after a lost reply: every record
  already there) -> records/s.
* ``sacct_user_last_day`` and ``sacct_one_job``: with 1,000,000 job records
  in the table (1,000 users over 30 days, loaded in bulk, not timed), the
  query sacct sends for one user's jobs of the last day and for one job id,
  through ``Storage.history`` (the SQL, the rows and the records) -> ms.
  Target: under 200 ms each, through the indexes.
* ``rollup_month_1m_jobs``: with those 1,000,000 records (30 days, the cluster
  registered the day before the first), ``dbd.rollup.rollup``'s first run: every
  hour of the month from the job records, then the days and the month they
  complete -> s (once per backend: a second run has nothing left to do). Beside
  it ``again_s``, that second run (nothing changed), ``hour_rows``, and
  ``report_ms``: the AccountUtilizationByUser query sreport sends for the 30
  days, read from the rollups (``dbd.report.usage_report``).

MariaDB is the one at 127.0.0.1:3306 (user root, no password); a backend that
cannot be reached is reported with its error. ``--quick``: 100,000 records.

    python bench/accounting.py [--quick] [--runs N]
"""

from __future__ import annotations

import random
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, func, insert, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from bench._harness import arguments, figure, log, python_baseline, report
from corral.wire import corral_pb2 as pb
from dbd import schema
from dbd.models import AssocUsageHour, JobRecord
from dbd.report import ReportQuery, usage_report
from dbd.rollup import rollup
from dbd.storage import Query, Storage, engine_for

MARIADB = "mysql+pymysql://root@127.0.0.1:3306"
CLUSTER = "bench"
USERS = 1_000
DAYS = 30
NOW = 1_790_000_000
BATCH = 500
#: The emulated cluster's CPUs: 1,000 nodes of 32 (the records' n0-n999, 1-32 CPUs each).
CPUS = 32_000


def info(job_id: int, uid: int, submit: int, run: int) -> pb.JobInfo:
    return pb.JobInfo(
        job_id=job_id,
        name=f"job{job_id % 97}",
        uid=uid,
        user=f"user{uid}",
        account=f"acct{uid % 50}",
        partition="batch",
        state="COMPLETED",
        submit_time=submit,
        eligible_time=submit,
        start_time=submit + 60,
        end_time=submit + 60 + run,
        nodes=f"n{job_id % 1000}",
        num_nodes=1,
        num_cpus=1 + job_id % 32,
        cluster=CLUSTER,
    )


def ingest(storage: Storage, count: int) -> tuple[float, float]:
    """Seconds to store ``count`` new records in batches, and to receive them all again."""
    rng = random.Random(1)
    records = [
        info(i, rng.randrange(USERS), NOW - rng.randrange(DAYS * 86_400), rng.randrange(7200))
        for i in range(1, count + 1)
    ]
    batches = [records[i : i + BATCH] for i in range(0, count, BATCH)]
    timings = []
    for _ in range(2):
        began = time.perf_counter()
        for n, batch in enumerate(batches):
            storage.record_jobs(CLUSTER, batch, range(n * BATCH + 1, n * BATCH + len(batch) + 1))
        timings.append(time.perf_counter() - began)
    return timings[0], timings[1]


def load(storage: Storage, count: int, first_id: int) -> None:
    """``count`` records in bulk (not through record_jobs: this only fills the table)."""
    rng = random.Random(2)
    chunk = 20_000
    with Session(storage.engine) as session:
        for start in range(0, count, chunk):
            rows = []
            for job_id in range(first_id + start, first_id + min(start + chunk, count)):
                uid = rng.randrange(USERS)
                submit = NOW - rng.randrange(DAYS * 86_400)
                record = info(job_id, uid, submit, rng.randrange(7200))
                rows.append(
                    {
                        "cluster": CLUSTER,
                        "job_id": job_id,
                        "submit_time": submit,
                        "seq": job_id,
                        "array_job_id": 0,
                        "array_task_id": None,
                        "uid": uid,
                        "account": record.account,
                        "partition": "batch",
                        "state": "COMPLETED",
                        "name": record.name,
                        "nodes": record.nodes,
                        "eligible_time": submit,
                        "start_time": record.start_time,
                        "end_time": record.end_time,
                        "record": record.SerializeToString(),
                    }
                )
            session.execute(insert(JobRecord), rows)
            session.commit()
            if start and start % 200_000 == 0:
                log(f"  {start:,} records loaded")


def query_ms(storage: Storage, query: Query, samples: int) -> tuple[list[float], int]:
    timings, found = [], 0
    for _ in range(samples):
        began = time.perf_counter()
        found = len(storage.history(query))
        timings.append((time.perf_counter() - began) * 1000)
    return timings, found


def rollup_month(storage: Storage, records: int) -> dict[str, Any]:
    """The first rollup of the loaded month, a second one, and sreport's query over it."""
    first = NOW - (DAYS + 1) * 86_400
    storage.register_cluster(CLUSTER, "127.0.0.1", 6817, first, cpus=CPUS)
    log(f"  rollup of {records:,} records")
    began = time.perf_counter()
    hours = rollup(storage.engine, NOW)
    elapsed = time.perf_counter() - began
    began = time.perf_counter()
    rollup(storage.engine, NOW)
    again = time.perf_counter() - began
    with Session(storage.engine) as session:
        hour_rows = session.scalar(select(func.count()).select_from(AssocUsageHour))
    query = ReportQuery(
        "cluster accountutilizationbyuser", NOW - DAYS * 86_400, NOW, clusters=(CLUSTER,)
    )
    timings = []
    for _ in range(5):
        began = time.perf_counter()
        rows, _, _ = usage_report(storage.engine, query, NOW)
        timings.append((time.perf_counter() - began) * 1000)
    return figure(
        [elapsed],
        "s",
        note=f"{hours} hours, then their days and months, from {records:,} job records",
        again_s=round(again, 3),
        hour_rows=hour_rows,
        report_ms=round(sorted(timings)[len(timings) // 2], 1),
        report_rows=len(rows),
    )


class Database:
    """A fresh database of one backend, removed afterwards."""

    def __init__(self, kind: str, scratch: Path) -> None:
        self.kind = kind
        self.name = f"corral_bench_{secrets.token_hex(4)}"
        if kind == "sqlite":
            self.url = f"sqlite:///{scratch / 'accounting.db'}"
            return
        self.server = create_engine(f"{MARIADB}/test")
        with self.server.begin() as connection:
            connection.execute(text(f"CREATE DATABASE {self.name} CHARACTER SET utf8mb4"))
        self.url = f"{MARIADB}/{self.name}?charset=utf8mb4"

    def drop(self) -> None:
        if self.kind != "sqlite":
            with self.server.begin() as connection:
                connection.execute(text(f"DROP DATABASE IF EXISTS {self.name}"))
            self.server.dispose()


def backend(kind: str, records: int, ingest_count: int, runs: int) -> dict[str, dict[str, Any]]:
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as scratch:
        try:
            database = Database(kind, Path(scratch))
        except OperationalError as exc:
            error = f"{kind} unreachable: {exc.orig}"
            return {f"{kind}_{name}": {"value": None, "error": error} for name in ("ingest",)}
        try:
            engine = engine_for(database.url)
            schema.upgrade(engine)
            storage = Storage(engine)
            log(f"{kind}: ingest of {ingest_count:,} records, twice")
            new, again = ingest(storage, ingest_count)
            figures[f"{kind}_ingest"] = figure(
                [ingest_count / new],
                "records/s",
                note=f"{ingest_count:,} new records in batches of {BATCH}",
                resent_records_per_s=round(ingest_count / again),
            )
            log(f"{kind}: loading {records:,} records in bulk")
            load(storage, records - ingest_count, ingest_count + 1)
            user = Query(clusters=(CLUSTER,), uids=(7,), start=NOW - 86_400, end=NOW)
            timings, found = query_ms(storage, user, 20 * runs)
            figures[f"{kind}_sacct_user_last_day"] = figure(
                timings, "ms", target="< 200", rows=found, records_in_table=records
            )
            one = Query(clusters=(CLUSTER,), job_ids=(str(records // 2),))
            timings, found = query_ms(storage, one, 20 * runs)
            figures[f"{kind}_sacct_one_job"] = figure(
                timings, "ms", target="< 200", rows=found, records_in_table=records
            )
            figures[f"{kind}_rollup_month_1m_jobs"] = rollup_month(storage, records)
            engine.dispose()
        finally:
            database.drop()
    return figures


def main() -> None:
    args = arguments(__doc__ or "", runs=1, quick_runs=1)
    baseline = python_baseline()
    records = 100_000 if args.quick else 1_000_000
    ingest_count = 2_000 if args.quick else 20_000
    figures: dict[str, dict[str, Any]] = {}
    for kind in ("sqlite", "mariadb"):
        figures.update(backend(kind, records, ingest_count, args.runs))
    report("accounting", args, baseline, figures)


if __name__ == "__main__":
    main()
