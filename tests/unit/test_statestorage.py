"""StateStorage* and SlurmctldTimeout in slurm.conf (corral/statestorage.py): the
journal's backend as written, bad values refused with the line, and two controllers
refused without a shared state."""

from __future__ import annotations

import pytest

from corral.config import parse, show_config
from corral.confsyntax import ConfigError
from corral.statestorage import StateStorage, check_controllers

HEAD = "ClusterName=test\nSlurmctldHost=ctl\nNodeName=n1 CPUs=1\n"
PATH = "/etc/slurm/slurm.conf"


def storage(text: str) -> StateStorage:
    return parse(HEAD + text, PATH).state_storage


def test_sqlite_on_local_disk_is_the_default() -> None:
    assert storage("") == StateStorage(kind="sqlite", lease_s=10)
    assert not storage("").shared


def test_mysql_as_written() -> None:
    got = storage(
        "StateStorageType=state/MySQL\nStateStorageHost=db1\nStateStoragePort=3307\n"
        "StateStorageUser=corral\nStateStoragePass=s3cret\nStateStorageLoc=cl_state\n"
        "SlurmctldTimeout=30\n"
    )
    assert got == StateStorage("mysql", "db1", 3307, "corral", "s3cret", "cl_state", 30)
    assert got.shared
    assert got.url() == "mysql+pymysql://corral:s3cret@db1:3307/cl_state?charset=utf8mb4"
    assert got.where == "mysql://corral@db1:3307/cl_state"  # what logs say: no password


def test_scontrol_show_config_never_prints_the_password() -> None:
    conf = parse(HEAD + "StateStorageType=state/mysql\nStateStoragePass=s3cret\n", PATH)
    shown = dict(show_config(conf))
    assert "StateStoragePass" not in shown and "s3cret" not in str(shown)
    assert shown["StateStorageType"] == "state/mysql"
    assert shown["SlurmctldTimeout"] == "10 sec"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "StateStorageType=state/postgres\n",
            f"{PATH}:4: bad StateStorageType value 'state/postgres': use state/sqlite, state/mysql",
        ),
        (
            "StateStorageHost=db1\n",
            f"{PATH}:4: StateStorageHost needs StateStorageType=state/mysql",
        ),
        (
            "StateStorageType=state/mysql\nStateStoragePort=0\n",
            f"{PATH}:5: bad StateStoragePort value '0': not in 1..65535",
        ),
        (
            "StateStorageType=state/mysql\nStateStorageLoc=a;drop\n",
            f"{PATH}:5: bad StateStorageLoc value 'a;drop': a database name",
        ),
        (
            "SlurmctldTimeout=1\n",
            f"{PATH}:4: bad SlurmctldTimeout value '1': not in 3..65535",
        ),
    ],
    ids=["type", "sqlite-with-host", "port", "database", "timeout"],
)
def test_bad_values_are_refused_with_their_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse(HEAD + text, PATH)
    assert str(refused.value) == message


def test_two_controllers_need_a_shared_state() -> None:
    two = parse(HEAD + "SlurmctldHost=backup(10.0.0.2)\n", PATH)
    with pytest.raises(ConfigError) as refused:
        check_controllers(two.path, two.slurmctld_hosts, two.state_storage)
    assert str(refused.value) == (
        f"{PATH}: 2 SlurmctldHost lines (ctl, backup) need a shared state: "
        "StateStorageType=state/mysql (docs/ha.md); StateSaveLocation on local disk "
        "serves one controller"
    )
    shared = parse(HEAD + "SlurmctldHost=backup\nStateStorageType=state/mysql\n", PATH)
    check_controllers(shared.path, shared.slurmctld_hosts, shared.state_storage)
    one = parse(HEAD, PATH)
    check_controllers(one.path, one.slurmctld_hosts, one.state_storage)
