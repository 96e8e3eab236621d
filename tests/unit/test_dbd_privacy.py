"""PrivateData=jobs in corral-dbd: who sees whose jobs, on SQLite and MariaDB."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.wire import corral_pb2 as pb
from dbd import privacy, schema
from dbd.admin import Admin
from dbd.storage import Query, Storage, engine_for
from tests.databases import BACKENDS, fresh_database

UIDS = {"alice": 5001, "bob": 5002, "carol": 5003, "dave": 5004, "olga": 5005}


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """Accounts lab (with sub-account lab-x) and physics; alice in lab-x, bob in
    physics, carol coordinates lab, dave has no association, olga is an Operator."""
    with fresh_database(request.param, tmp_path) as url:
        engine = engine_for(url)
        schema.upgrade(engine)
        storage = Storage(engine)
        storage.register_cluster("c", "127.0.0.1", 6817, 100)
        admin = Admin(engine)

        def add(kind: str, where: dict[str, str], **values: str) -> None:
            admin.run("add", kind, where, values, True, "root", True)

        add("account", {"name": "lab,physics"})
        add("account", {"name": "lab-x"}, parent="lab")
        add("user", {"name": "alice"}, account="lab-x")
        add("user", {"name": "bob"}, account="physics")
        add("user", {"name": "carol"}, account="lab")
        add("user", {"name": "olga"}, account="physics", adminlevel="Operator")
        add("coordinator", {"names": "carol", "accounts": "lab"})
        jobs = [
            pb.JobInfo(job_id=i, user=name, uid=UIDS[name], account=account, submit_time=100 + i)
            for i, (name, account) in enumerate(
                [("alice", "lab-x"), ("bob", "physics"), ("dave", "physics")], start=1
            )
        ]
        for job in jobs:
            job.eligible_time = job.submit_time
        storage.record_jobs("c", jobs, [1, 2, 3])
        try:
            yield storage
        finally:
            engine.dispose()


def seen(storage: Storage, name: str, **query: tuple[int, ...]) -> list[str]:
    sight = privacy.sight(storage.engine, UIDS[name], name, slurm_uid=0)
    visible = None if sight.everything else (sight.uids, sight.accounts)
    records = storage.history(Query(visible=visible, **query))
    return sorted(pb.JobInfo.FromString(r).user for r in records)


@pytest.mark.parametrize(
    ("name", "jobs"),
    [
        ("alice", ["alice"]),
        ("bob", ["bob"]),
        ("carol", ["alice"]),  # coordinator of lab: lab-x's jobs too
        ("dave", []),  # no association: nothing, not even his own
        ("olga", ["alice", "bob", "dave"]),  # AdminLevel=Operator
    ],
)
def test_private_data_shows_each_caller_what_slurmdbd_would(
    storage: Storage, name: str, jobs: list[str]
) -> None:
    assert seen(storage, name) == jobs


def test_asking_for_another_user_narrows_and_never_widens(storage: Storage) -> None:
    assert seen(storage, "alice", uids=(UIDS["bob"],)) == []
    assert seen(storage, "carol", uids=(UIDS["alice"], UIDS["bob"])) == ["alice"]
    assert privacy.sight(storage.engine, 0, "root", slurm_uid=0).everything
    assert privacy.sight(storage.engine, 77, "slurm", slurm_uid=77).everything


def listed(storage: Storage, name: str, kind: str, private: tuple[str, ...]) -> list[str]:
    """sacctmgr list ``kind`` as ``name`` sees it under PrivateData ``private``."""
    rows = Admin(storage.engine).run("list", kind, {}, {}, False, "root", True).rows
    sight = privacy.sight(storage.engine, UIDS[name], name, slurm_uid=0)
    shown = privacy.rows_shown(kind, rows, name, sight, private)
    return sorted(f"{r.get('Account', '')}/{r.get('User', '')}" for r in shown)


def test_private_users_hides_other_users_and_their_associations(storage: Storage) -> None:
    assert listed(storage, "bob", "user", ("users",)) == ["/bob"]
    assert listed(storage, "bob", "association", ("users",)) == ["physics/bob"]
    # carol coordinates lab: its associations and lab-x's, not other users' rows
    assert listed(storage, "carol", "association", ("users",)) == [
        "lab-x/",
        "lab-x/alice",
        "lab/",
        "lab/carol",
    ]
    assert len(listed(storage, "olga", "user", ("users",))) == 5  # an Operator sees all (root too)
    assert len(listed(storage, "bob", "user", ())) == 5  # without PrivateData too


def test_private_accounts_shows_coordinated_accounts_only(storage: Storage) -> None:
    assert listed(storage, "bob", "account", ("accounts",)) == []
    assert listed(storage, "carol", "account", ("accounts",)) == ["lab-x/", "lab/"]
    assert "physics/" in listed(storage, "olga", "account", ("accounts",))
