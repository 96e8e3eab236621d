"""Two controllers of one test cluster on this machine (docs/ha.md): SlurmctldHost
lines ``<this host>(127.0.0.1)`` and ``ctl2(127.0.0.2)``, the state in a MariaDB
database, each controller told its line by ``CORRAL_CTLD_HOST``.

The cluster's own ``start`` runs one controller; ``Controllers`` runs both, says
which one serves, and kills and restarts them.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from controller.ctldline import ENV
from corral.client import Client, socket_path
from corral.errors import SlurmError
from corral.statestorage import StateStorage
from tests.integration.cluster import Cluster

BACKUP = "ctl2"


def ha_settings(
    storage: StateStorage, port: int | None = None, timeout: int = 3
) -> tuple[str, ...]:
    """slurm.conf lines for a second controller on 127.0.0.2 and the state in
    ``storage`` (reached through ``port`` when given: a relay)."""
    return (
        f"SlurmctldHost={BACKUP}(127.0.0.2)",
        "StateStorageType=state/mysql",
        f"StateStorageHost={storage.host}",
        f"StateStoragePort={port or storage.port}",
        f"StateStorageUser={storage.user}",
        f"StateStorageLoc={storage.database}",
        f"SlurmctldTimeout={timeout}",
    )


class Controllers:
    """Both controllers of ``cluster`` (made with ``ha_settings``)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.names = (socket.gethostname().split(".")[0], BACKUP)
        state = str(cluster.dir / "state")
        self.sockets = [socket_path(state, 0), socket_path(state, 1)]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        # As a client command on this host would: both sockets, waiting for a takeover.
        self.client = Client(self.sockets, timeout=30, failover_s=60)

    def log(self, index: int) -> Path:
        return self.cluster.logs / f"controller{index}.log"

    def start(self, index: int) -> None:
        out = open(self.log(index), "ab")  # noqa: SIM115 - the child keeps it
        self.procs[index] = subprocess.Popen(
            [sys.executable, "-m", "controller.main", "-f", self.cluster.conf],
            stdout=out,
            stderr=out,
            env={**self.cluster.env, ENV: self.names[index]},
            cwd=self.cluster.dir,
            start_new_session=True,
        )
        out.close()

    def start_cluster(self) -> None:
        """The primary, the agent (once the primary serves) and the backup."""
        self.start(0)
        self.wait_serving(30)
        self.cluster.start_agent()
        self.cluster.client = self.client
        self.cluster.wait_for(self.cluster.all_nodes_up, 30, "nodes did not register")
        self.start(1)
        self.cluster.wait_for(lambda: self.answers(1), 30, "the backup did not listen")

    def answers(self, index: int) -> bool:
        try:
            Client(self.sockets[index], timeout=5).call("Ping", {})
        except SlurmError:
            return False
        return True

    def serving(self) -> int | None:
        """The index of the controller that serves now, if one does."""
        for index, path in enumerate(self.sockets):
            try:
                reply = Client(path, timeout=5).call("Ping", {})
            except SlurmError:
                continue
            if not reply["standby"]:
                return index
        return None

    def wait_serving(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.serving()
            if found is not None:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no controller served within {timeout} s:\n{self.logs()}")

    def kill(self, index: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[index]
        proc.send_signal(sig)
        proc.wait(timeout=30)

    def ended(self) -> list[int]:
        """The indexes of the controllers that exited (one fenced out of the lease
        waits in standby instead)."""
        return [i for i, proc in self.procs.items() if proc.poll() is not None]

    def logs(self) -> str:
        return "\n".join(
            f"--- controller{i} ---\n{self.log(i).read_text()[-3000:]}"
            for i in self.procs
            if self.log(i).exists()
        )

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
