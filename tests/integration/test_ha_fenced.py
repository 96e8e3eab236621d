"""A controller fenced out of the lease goes back to standby, as a backup slurmctld
does, rather than exiting; SlurmctldPrimaryOnProg and SlurmctldPrimaryOffProg run
as each controller starts and stops serving (docs/ha.md).

The primary is frozen (SIGSTOP) past SlurmctldTimeout: the backup takes the lease
(from its warm copy of the state) and serves; the primary, thawed, finds its lease
taken and waits in standby. MariaDB is the one at 127.0.0.1:3306 (tests/databases.py):
skipped where it cannot be reached, except under CI, where the tests fail.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.client import Client
from corral.errors import SlurmError
from tests.databases import fresh_state_database
from tests.integration.cluster import Cluster
from tests.integration.hapair import Controllers, ha_settings


def program(path: Path, word: str, log: Path) -> Path:
    """A site program that appends ``word`` and the controller's line to ``log``."""
    path.write_text(f'#!/bin/sh\necho "{word} $CORRAL_CTLD_HOST $#" >> {log}\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Controllers]:
    """A 2-node cluster with both controllers up, the first serving, and programs
    that log each controller becoming and ceasing to be the primary."""
    log = tmp_path / "primary.log"
    on = program(tmp_path / "on.sh", "on", log)
    off = program(tmp_path / "off.sh", "off", log)
    with fresh_state_database(tmp_path) as storage:
        settings = (
            *ha_settings(storage),
            f"SlurmctldPrimaryOnProg={on}",
            f"SlurmctldPrimaryOffProg={off}",
        )
        cluster = Cluster(tmp_path / "c", nodes=2, settings=settings, tls=False)
        both = Controllers(cluster)
        try:
            both.start_cluster()
            yield both
        finally:
            cluster.stop()
            both.stop()


def standby(pair: Controllers, index: int) -> bool | None:
    """Whether controller ``index`` answers as a standby (None: it does not answer)."""
    try:
        return bool(Client(pair.sockets[index], timeout=2).call("Ping", {})["standby"])
    except SlurmError:
        return None


def test_a_fenced_primary_goes_back_to_standby(pair: Controllers, tmp_path: Path) -> None:
    c = pair.cluster
    primary, backup = pair.names
    log = tmp_path / "primary.log"
    c.wait_for(lambda: log.exists(), 10, "SlurmctldPrimaryOnProg did not run")
    assert log.read_text() == f"on {primary} 0\n"
    before = [c.sbatch("--output=/dev/null", "--wrap", "true") for _ in range(3)]
    for job_id in before:
        assert c.wait_done(job_id)["state"] == "COMPLETED"

    pair.procs[0].send_signal(signal.SIGSTOP)  # it hangs past its lease
    try:
        began = time.monotonic()
        c.wait_for(lambda: standby(pair, 1) is False, 30, "the backup did not take over")
        print(f"takeover from a frozen primary: {time.monotonic() - began:.2f} s")
    finally:
        pair.procs[0].send_signal(signal.SIGCONT)
    c.wait_for(lambda: standby(pair, 0) is True, 30, "the primary did not go back to standby")
    assert pair.procs[0].poll() is None, "the fenced primary exited"
    text = pair.log(0).read_text()
    assert "this controller stops serving" in text
    assert "fenced out of the lease: this controller waits in standby" in text
    c.wait_for(
        lambda: (
            sorted(log.read_text().splitlines())
            == sorted([f"on {primary} 0", f"on {backup} 0", f"off {primary} 0"])
        ),
        10,
        f"the primary programs did not all run: {log.read_text()!r}",
    )
    assert "SlurmctldPrimaryOnProg completed successfully" in pair.log(1).read_text()

    # The backup serves the state it followed, and runs new jobs on the agents
    # the fenced primary let go.
    listed = c.run("squeue", "-h", "-t", "all", "-o", "%i %T").stdout.split("\n")
    assert sorted(filter(None, listed)) == sorted(f"{j} COMPLETED" for j in before)
    after = c.sbatch("--output=/dev/null", "--wrap", "true")
    assert c.wait_done(after, timeout=60)["state"] == "COMPLETED"
    assert max(before) < after
    assert standby(pair, 0) is True and standby(pair, 1) is False
