"""The controller's state in MariaDB (StateStorageType=state/mysql, docs/ha.md): a real
controller restarts with its jobs from the database, waits out a dead holder's lease
first, and refuses a second SlurmctldHost without a shared state.

MariaDB is the one at 127.0.0.1:3306 (tests/databases.py): skipped where it cannot be
reached, except under CI, where the tests fail.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from cli.corral import write_config
from corral.config import parse as parse_conf
from tests.databases import fresh_state_database
from tests.integration.cluster import Cluster


def test_a_controller_on_mariadb_restarts_with_its_jobs(make_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Jobs, a held job's script and the job counter survive a kill -9; the restarted
    controller first waits for the dead one's lease to expire (SlurmctldTimeout)."""
    with fresh_state_database(tmp_path) as storage:
        c: Cluster = make_cluster(
            nodes=1,
            settings=(
                "StateStorageType=state/mysql",
                f"StateStorageHost={storage.host}",
                f"StateStoragePort={storage.port}",
                f"StateStorageUser={storage.user}",
                f"StateStorageLoc={storage.database}",
                # Much longer than a controller takes to start, even on a loaded machine
                # (at 6 s a restart taking longer found the lease already expired).
                "SlurmctldTimeout=15",
            ),
        )
        out = tmp_path / "out.txt"
        held = c.sbatch("--hold", f"--output={out}", "--wrap", "echo from-the-database")
        done = c.sbatch("--output=/dev/null", "--wrap", "true")
        c.wait_done(done)
        assert "lease: held by" in c.log("controller")
        assert not (c.dir / "state" / "corral-state.db").exists(), "the state went to SQLite"

        c.kill("controller", signal.SIGKILL)
        began = time.monotonic()
        c.start_controller()
        assert time.monotonic() - began >= 1, "took the lease of a holder not yet expired"
        assert "; waiting to serve" in c.log("controller")
        # Its end may have been seen but not yet written when the controller was killed:
        # the agent, which keeps a result until it is acknowledged (once written),
        # reports it again.
        assert c.wait_done(done)["state"] == "COMPLETED"
        assert c.job(held)["state"] == "PENDING"
        c.run("scontrol", "release", str(held))
        c.wait_done(held)
        assert out.read_text() == "from-the-database\n"
        assert c.sbatch("--hold", "--wrap", "true") > held, "job ids went back"

        c.kill("controller", signal.SIGTERM)  # a clean stop hands the lease back
        began = time.monotonic()
        c.start_controller()
        assert time.monotonic() - began < 6, "waited for a lease handed back"
        assert c.job(held)["state"] == "COMPLETED"


def test_two_controllers_on_sqlite_are_refused_at_start(tmp_path: Path) -> None:
    conf = write_config(str(tmp_path), 1, ["SlurmctldHost=backup(127.0.0.2)"], tls=False)
    started = subprocess.run(
        [sys.executable, "-m", "controller.main", "-f", conf],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    primary = parse_conf(Path(conf).read_text(), conf).slurmctld_hosts[0][0]
    assert started.returncode == 1
    assert started.stderr.splitlines()[-1] == (
        f"corral-controller: fatal: {conf}: 2 SlurmctldHost lines ({primary}, backup) need "
        "a shared state: StateStorageType=state/mysql (docs/ha.md); StateSaveLocation on "
        "local disk serves one controller"
    )
