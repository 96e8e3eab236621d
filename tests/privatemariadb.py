"""A MariaDB server of a test's own, which the test may crash and start again.

The machine's MariaDB at 127.0.0.1:3306 serves every other test at the same time,
so a test that restarts its database (issue 20: controller failover "with the
database restarted once") gets a server of its own instead: Debian's
``mariadbd``, a data directory made by ``mariadb-install-db`` under the test's
directory, an ephemeral port on 127.0.0.1, root without a password, as the
machine's. ``restart()`` kills it with SIGKILL (a crash: InnoDB recovers at the
next start) and starts it on the same port. Where ``mariadbd`` is missing the
test is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import pytest
from sqlalchemy import create_engine, text

from corral.statestorage import StateStorage
from tests.integration.cluster import free_port

#: Seconds a start may take before the test gives up (a loaded machine).
START_S = 60.0


def _needs(program: str) -> str:
    found = shutil.which(program) or shutil.which(program, path="/usr/sbin:/usr/bin")
    if found is None:
        message = f"{program} is not installed (Debian's mariadb-server)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


class PrivateMariaDB:
    """``with PrivateMariaDB(directory) as db:`` a running server at ``db.port``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "server.log"
        self.port = free_port()
        self.server = _needs("mariadbd")
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PrivateMariaDB:
        self.directory.mkdir(parents=True, exist_ok=True)
        installed = subprocess.run(
            [
                _needs("mariadb-install-db"),
                "--no-defaults",
                f"--datadir={self.data}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop(signal.SIGTERM)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    self.server,
                    "--no-defaults",
                    f"--datadir={self.data}",
                    f"--port={self.port}",
                    "--bind-address=127.0.0.1",
                    f"--socket={self.directory / 'mariadb.sock'}",
                    f"--pid-file={self.directory / 'mariadb.pid'}",
                    "--user=root",
                    "--skip-log-bin",
                    "--innodb-buffer-pool-size=32M",
                ],
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_S
        while not self._answers():
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.05)

    def state_storage(self, database: str = "corral_state") -> StateStorage:
        """StateStorageType=state/mysql in a new database ``database`` of this server."""
        engine = create_engine(f"mysql+pymysql://root@127.0.0.1:{self.port}/mysql")
        try:
            with engine.begin() as connection:
                connection.execute(text(f"CREATE DATABASE {database} CHARACTER SET utf8mb4"))
        finally:
            engine.dispose()
        return StateStorage(
            kind="mysql", host="127.0.0.1", port=self.port, user="root", database=database
        )

    def restart(self) -> float:
        """Crash the server and start it again; the seconds it was away."""
        began = time.monotonic()
        self._stop(signal.SIGKILL)
        self.start()
        return time.monotonic() - began

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                return bool(conn.recv(1))  # the server's greeting
        except OSError:
            return False

    def _stop(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
