"""slurmdbd.conf: Slurm's keys, Corral's SQLite default, and errors with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.confsyntax import ConfigError
from dbd.config import DEFAULT_DBD_PORT, default_path, load


def write(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "slurmdbd.conf"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_defaults_are_sqlite_beside_the_file(tmp_path: Path) -> None:
    conf = load(write(tmp_path, "# nothing set"))
    assert conf.storage_type == "accounting_storage/sqlite"
    assert conf.storage_loc == str(tmp_path / "corral_acct_db")
    assert conf.database_url == f"sqlite:///{tmp_path / 'corral_acct_db'}"
    assert (conf.dbd_addr, conf.dbd_port) == ("127.0.0.1", DEFAULT_DBD_PORT)
    assert conf.purge_job_after == 0


def test_mysql_settings_make_a_pymysql_url(tmp_path: Path) -> None:
    conf = load(
        write(
            tmp_path,
            "StorageType=accounting_storage/mysql",
            "StorageHost=db1",
            "StoragePort=3307",
            "StorageUser=slurm",
            "StoragePass=s3cr3t",
            "StorageLoc=slurm_acct_db",
            "DbdHost=acct1",
            "DbdPort=7031",
            "PurgeJobAfter=12months",
            "PurgeEventAfter=720hours",
            "PrivateData=jobs,usage",
        )
    )
    assert conf.database_url == (
        "mysql+pymysql://slurm:s3cr3t@db1:3307/slurm_acct_db?charset=utf8mb4"
    )
    assert (conf.dbd_addr, conf.dbd_port) == ("acct1", 7031)
    assert conf.purge_job_after == 12 * 30 * 86_400
    assert conf.purge_event_after == 720 * 3600
    assert conf.private_data == ("jobs", "usage")


def test_unknown_keys_are_warnings(tmp_path: Path) -> None:
    conf = load(write(tmp_path, "Bogus=1", "DebugLevel=info"))
    path = tmp_path / "slurmdbd.conf"
    assert conf.warnings == (
        f"{path}:1: unknown key 'Bogus' ignored",
        f"{path}:2: DebugLevel has no effect: log levels are set with corral-dbd's -v",
    )


def test_keys_that_would_lose_or_expose_data_are_refused(tmp_path: Path) -> None:
    """Purged records archived (ArchiveJobs), a TLS connection (StorageParameters):
    ignoring them would lose data or send it in the clear."""
    for line in ("ArchiveJobs=yes", "StorageParameters=SSL_CA=/etc/ca.pem"):
        with pytest.raises(ConfigError, match="is not supported"):
            load(write(tmp_path, line))
    assert load(write(tmp_path, "ArchiveJobs=no")).warnings == ()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("StorageType=accounting_storage/pgsql", "StorageType=accounting_storage/pgsql"),
        ("DbdPort=99999", "DbdPort"),
        ("PurgeJobAfter=3fortnights", "unit must be hours, days or months"),
        ("StorageType=accounting_storage/mysql\nStorageLoc=/var/db", "a database name"),
    ],
)
def test_bad_values_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, "# first", line)
    with pytest.raises(ConfigError, match=message) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:")


def test_the_default_path_is_beside_slurm_conf() -> None:
    assert default_path("/etc/corral/slurm.conf") == "/etc/corral/slurmdbd.conf"
