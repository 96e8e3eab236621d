"""corral up and corral down as a user runs them: accounting on by default, or off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli.demo import client_command


def corral(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.corral", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def sacct(directory: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
    return subprocess.run(
        [*client_command("sacct"), "-X", "-n"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_up_starts_accounting_on_sqlite_by_default(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = corral("up", "--nodes", "1", "--dir", str(directory), "--detach")
    try:
        assert up.returncode == 0, up.stderr
        assert f"accounting: SQLite in {directory}/accounting.db" in up.stdout
        assert (directory / "slurmdbd.conf").exists()
        assert sacct(directory).returncode == 0
    finally:
        assert corral("down", "--dir", str(directory)).returncode == 0


def test_up_without_accounting(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = corral("up", "--nodes", "1", "--dir", str(directory), "--detach", "--no-accounting")
    try:
        assert up.returncode == 0, up.stderr
        assert "accounting: off" in up.stdout
        assert not (directory / "slurmdbd.conf").exists()
        disabled = sacct(directory)
        assert (disabled.returncode, disabled.stderr) == (
            1,
            "Slurm accounting storage is disabled\n",
        )
    finally:
        assert corral("down", "--dir", str(directory)).returncode == 0


def test_database_and_no_accounting_exclude_each_other(tmp_path: Path) -> None:
    refused = corral(
        "up", "--dir", str(tmp_path), "--database", "sqlite:///x.db", "--no-accounting"
    )
    assert refused.returncode != 0
    assert "--database and --no-accounting exclude each other" in refused.stderr
