"""corral.configless: the slurm.conf a node publishes for a job's session, and the
lookup of a client that lost SLURM_CONF (Slurm's configless mode)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral import configless, confsyntax


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Entries kept under ``tmp_path`` rather than /run or /tmp; a slurm.conf to name."""
    where = tmp_path / "entries"
    monkeypatch.setattr(configless, "ROOT_DIRECTORY", str(where))
    monkeypatch.setattr(configless, "directory", lambda uid: str(where))
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n")
    return conf


def test_a_job_finds_the_conf_its_node_published(published: Path) -> None:
    entry = configless.publish(os.getsid(0), 42, "c", str(published))
    assert configless.lookup({"SLURM_JOB_ID": "42"}) == str(published)
    assert configless.lookup({"SLURM_JOBID": "42", "SLURM_CLUSTER_NAME": "c"}) == str(published)
    # Another job's entry (a session id used again), another cluster, or no job at all.
    assert configless.lookup({"SLURM_JOB_ID": "43"}) is None
    assert configless.lookup({"SLURM_JOB_ID": "42", "SLURM_CLUSTER_NAME": "d"}) is None
    assert configless.lookup({}) is None
    configless.withdraw(entry, 41)  # not its job: kept
    assert configless.lookup({"SLURM_JOB_ID": "42"}) == str(published)
    configless.withdraw(entry, 42)
    assert configless.lookup({"SLURM_JOB_ID": "42"}) is None


def test_an_entry_others_may_write_is_not_believed(published: Path) -> None:
    entry = Path(configless.publish(os.getsid(0), 42, "c", str(published)))
    entry.chmod(0o666)
    assert configless.lookup({"SLURM_JOB_ID": "42"}) is None
    entry.chmod(0o644)
    entry.parent.chmod(0o777)
    assert configless.lookup({"SLURM_JOB_ID": "42"}) is None


def test_default_path_falls_back_to_the_published_conf(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if os.path.exists(confsyntax.DEFAULT_PATH):
        pytest.skip("a system slurm.conf comes first, as in Slurm")
    configless.publish(os.getsid(0), 42, "c", str(published))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert confsyntax.default_path() == str(published)
    monkeypatch.setenv("SLURM_CONF", "/elsewhere/slurm.conf")  # SLURM_CONF still wins
    assert confsyntax.default_path() == "/elsewhere/slurm.conf"
