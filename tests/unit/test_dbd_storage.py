"""corral-dbd's store on SQLite and on MariaDB: schema, idempotent records, sacct's queries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from corral.wire import corral_pb2 as pb
from dbd import schema
from dbd.admin import Admin
from dbd.models import Base
from dbd.storage import Query, Storage, engine_for, parse_job_ids
from tests.databases import BACKENDS, fresh_database


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    with fresh_database(request.param, tmp_path) as url:
        engine = engine_for(url)
        schema.upgrade(engine)
        try:
            yield Storage(engine)
        finally:
            engine.dispose()


def info(job_id: int, **fields: object) -> pb.JobInfo:
    values: dict[str, object] = {
        "submit_time": 1000,
        "eligible_time": 1000,
        "uid": 1000,
        "user": "alice",
        "state": "PENDING",
        "partition": "debug",
        "account": "physics",
        "name": f"job{job_id}",
    }
    values.update(fields)
    return pb.JobInfo(job_id=job_id, **values)  # type: ignore[arg-type]


def ids(storage: Storage, **query: object) -> list[int]:
    return [pb.JobInfo.FromString(r).job_id for r in storage.history(Query(**query))]  # type: ignore[arg-type]


def test_the_migrations_build_what_the_models_describe(storage: Storage) -> None:
    assert schema.current(storage.engine) == schema.head()
    schema.upgrade(storage.engine)  # a current database: nothing to do
    with storage.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_a_record_is_stored_once_however_often_it_arrives(storage: Storage) -> None:
    batch = [info(1), info(2, state="RUNNING", start_time=1010)]
    assert storage.record_jobs("c", batch, [1, 2]) == 2
    assert storage.record_jobs("c", batch, [1, 2]) == 0  # resent after a lost reply
    assert ids(storage, start=0) == [1, 2]


def test_an_older_record_never_overwrites_a_newer_one(storage: Storage) -> None:
    storage.record_jobs("c", [info(1, state="COMPLETED", end_time=1100)], [7])
    assert storage.record_jobs("c", [info(1, state="RUNNING")], [5]) == 0
    storage.record_jobs("c", [info(1, state="RUNNING"), info(1, state="FAILED")], [8, 9])
    (record,) = storage.history(Query(job_ids=("1",)))
    assert pb.JobInfo.FromString(record).state == "FAILED"


def test_records_are_per_cluster_and_submission(storage: Storage) -> None:
    storage.record_jobs("a", [info(1)], [1])
    storage.record_jobs("b", [info(1)], [1])
    storage.record_jobs("a", [info(1, submit_time=2000, eligible_time=2000)], [2])
    # A job id used again (ids reset) is two records; sacct lists both only with -D.
    assert ids(storage, clusters=("a",), duplicates=True) == [1, 1]
    assert ids(storage, clusters=("a",)) == [1]
    assert ids(storage, clusters=("b",)) == [1]
    assert ids(storage, duplicates=True) == [1, 1, 1]
    assert ids(storage) == [1, 1]  # the latest of each cluster's


def test_job_ids_name_jobs_array_tasks_and_ranges(storage: Storage) -> None:
    storage.record_jobs(
        "c",
        [
            info(10, array_job_id=10, array_task_id=3),
            info(11, array_job_id=10, array_task_id=1),
            info(12, array_job_id=10, array_task_id=2),
            info(13),
        ],
        [1, 2, 3, 4],
    )
    assert ids(storage, job_ids=("10",)) == [10, 11, 12]
    assert ids(storage, job_ids=("10_2",)) == [12]
    assert ids(storage, job_ids=("10_[1-2]", "13")) == [11, 12, 13]
    with pytest.raises(ValueError):
        parse_job_ids(["10_[a]"])
    with pytest.raises(ValueError):
        parse_job_ids(["x"])


def test_thousands_of_job_ids_make_one_query(storage: Storage) -> None:
    """``sacct -j`` with 12,000 ids (SQLite refused a chain of 24,000 ORs as an
    expression tree too large)."""
    storage.record_jobs("c", [info(i) for i in range(1, 21)], list(range(1, 21)))
    wanted = tuple(str(i) for i in range(5, 12_005))
    assert ids(storage, job_ids=wanted, clusters=("c",)) == list(range(5, 21))
    assert ids(storage, job_ids=(*wanted[:3], "1_[0-9]")) == [5, 6, 7]


def test_the_time_window_is_saccts(storage: Storage) -> None:
    storage.record_jobs(
        "c",
        [
            info(1, state="COMPLETED", start_time=1000, end_time=1500),  # ended before 2000
            info(2, state="COMPLETED", start_time=1000, end_time=2500),  # ended inside
            info(3, state="RUNNING", start_time=1000),  # still running
            info(4, submit_time=5000, eligible_time=5000),  # eligible after the window
            info(5, eligible_time=0),  # held: never eligible
        ],
        [1, 2, 3, 4, 5],
    )
    assert ids(storage, start=2000, end=3000) == [2, 3]
    assert ids(storage, start=0, end=0) == [1, 2, 3, 4]
    assert ids(storage, job_ids=("5",), start=0, end=3000) == [5]  # found by its id


def test_a_requeued_job_stays_visible_by_id_while_it_waits(storage: Storage) -> None:
    """A requeue makes the job eligible again only after RequeueDelay: ``sacct -j``
    (window ending now) must still show it, never a gap submitit or Parsl could misread."""
    waiting = info(7, submit_time=1000, eligible_time=2000, restarts=1)
    storage.record_jobs("c", [waiting], [1])
    assert ids(storage, job_ids=("7",), end=1500) == [7]
    assert ids(storage, end=1500) == []  # a window query still follows eligibility


def test_each_run_of_a_requeued_job_is_kept_and_listed_with_duplicates(storage: Storage) -> None:
    """slurmdbd keeps every run of a requeued job (keyed by its submit time); sacct lists
    only the latest run of each job unless -D (duplicates), while a record a resize
    closed (RESIZING) is listed beside the job's current one either way."""
    runs = [
        info(
            7,
            submit_time=1000,
            start_time=1001,
            end_time=1100,
            state="RUNNING",
            state_flags=["REQUEUED"],
        ),
        info(7, submit_time=1100, start_time=1102, end_time=1200, state="PREEMPTED"),
        info(7, submit_time=1200, start_time=1203, end_time=1300, state="COMPLETED"),
        info(8, submit_time=1000, start_time=1001, end_time=1050, state="RESIZING"),
        info(8, submit_time=1050, start_time=1050, state="RUNNING"),
    ]
    storage.record_jobs("c", runs, [1, 2, 3, 4, 5])

    def listed(**query: object) -> list[tuple[int, int, str]]:
        found = storage.history(Query(**query))  # type: ignore[arg-type]
        return [(j.job_id, j.submit_time, j.state) for j in map(pb.JobInfo.FromString, found)]

    assert listed(job_ids=("7",)) == [(7, 1200, "COMPLETED")]
    assert listed(job_ids=("7",), duplicates=True) == [
        (7, 1000, "RUNNING"),
        (7, 1100, "PREEMPTED"),
        (7, 1200, "COMPLETED"),
    ]
    # As slurmdbd, the latest of the runs the other filters select.
    assert listed(job_ids=("7",), states=("PREEMPTED",)) == [(7, 1100, "PREEMPTED")]
    assert listed(job_ids=("8",)) == [(8, 1000, "RESIZING"), (8, 1050, "RUNNING")]


def test_filters_by_user_account_partition_state_name_and_node(storage: Storage) -> None:
    storage.record_jobs(
        "c",
        [
            info(1, uid=1000, nodes="node[1-2]", state="COMPLETED"),
            info(2, uid=1001, account="chem", nodes="node3", state="FAILED"),
            info(3, uid=1000, partition="gpu", name="train"),
        ],
        [1, 2, 3],
    )
    assert ids(storage, uids=(1000,)) == [1, 3]
    assert ids(storage, accounts=("chem",)) == [2]
    assert ids(storage, partitions=("gpu",)) == [3]
    assert ids(storage, states=("COMPLETED", "FAILED")) == [1, 2]
    assert ids(storage, names=("train",)) == [3]
    assert ids(storage, nodes=("node2",)) == [1]
    assert ids(storage, nodes=("node9",)) == []


def test_clusters_register_and_re_register(storage: Storage) -> None:
    storage.register_cluster("b", "10.0.0.2", 6817, 100)
    storage.register_cluster("a", "10.0.0.1", 6817, 100)
    storage.register_cluster("a", "10.0.0.9", 7000, 200)
    rows = [(c.name, c.control_host, c.control_port) for c in storage.clusters()]
    assert rows == [("a", "10.0.0.9", 7000), ("b", "10.0.0.2", 6817)]


def test_registered_tres_keep_their_ids_across_registrations_and_clusters(
    storage: Storage,
) -> None:
    storage.register_cluster("a", "10.0.0.1", 6817, 100, tres=["gres/gpu", "gres/gpu:a100"])
    storage.register_cluster("a", "10.0.0.1", 6817, 200, tres=["gres/gpu:a100", "gres/gpu"])
    storage.register_cluster("b", "10.0.0.2", 6817, 200, tres=["gres/gpu:v100", "gres/gpu"])
    storage.register_cluster("a", "10.0.0.1", 6817, 300, tres=["fs/disk", "cpu", "gres/"])
    admin = Admin(storage.engine)
    rows = admin.run("list", "tres", {}, {}, False, "root", True).rows
    shown = [(r["Type"], r["Name"], r["ID"]) for r in rows]
    assert shown[:2] == [("cpu", "", "1"), ("mem", "", "2")]
    assert shown[8:] == [
        ("gres", "gpu", "1001"),
        ("gres", "gpu:a100", "1002"),
        ("gres", "gpu:v100", "1003"),
    ]


def test_node_events_are_stored_once_and_end_later(storage: Storage) -> None:
    down = pb.NodeEvent(node="n1", start=100, state="DRAIN", reason="fan", reason_uid=0, cpus=4)
    back = pb.NodeEvent(node="n1", start=100, end=200, state="DRAIN", reason="fan", cpus=4)
    assert storage.record_events("c", [down], [1]) == 1
    assert storage.record_events("c", [back, down], [2, 1]) == 1  # the resend of 1 is older
    assert storage.record_events("c", [down], [1]) == 0
    admin = Admin(storage.engine)
    rows = admin.run("list", "event", {"nodes": "n1"}, {}, False, "root", True).rows
    assert [(r["Cluster"], r["NodeName"], r["State"], r["Reason"]) for r in rows] == [
        ("c", "n1", "DRAIN", "fan")
    ]
    assert rows[0]["TimeEnd"] != "Unknown" and rows[0]["User"] == "root"
