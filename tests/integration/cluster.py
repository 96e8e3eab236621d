"""A real Corral cluster for integration tests: the daemons as subprocesses.

The configuration comes from ``corral up``'s own writer (127.0.0.1, an
ephemeral port, a temporary directory), so the tests exercise what users run.
Client commands run as real processes with SLURM_CONF set; state is read back
through the same client library the CLI uses.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli import shutdown
from cli.corral import restd_env, write_config
from cli.demo import client_command as command
from cli.processes import Process
from controller.jobstate import JobState
from corral.auth import key_path, load_key
from corral.client import Client, socket_path
from corral.errors import SlurmError
from dbd.config import load as load_dbd_config
from nodeagent import cgroups, devcgroup

DONE = {state.name for state in JobState if state.finished}
#: Numbers the clusters of this test process: each has cgroups of its own.
CLUSTER_NUMBERS = itertools.count()
#: Ordinary Unix users the tests act as (the ``users`` fixture creates them).
TEST_USERS = ("corraltest1", "corraltest2")


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(host: str, port: int) -> bool:
    """Whether something accepts connections on host:port now."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def remove_run_cgroups(name: str, top: str | None = None) -> None:
    """Remove a stopped cluster's cgroups (``name``: its agent's
    ``CORRAL_CGROUP_NAME``), innermost first.

    A supervisor the sweep ended cannot remove its run's cgroups. Only empty
    cgroups go: a busy one stays for the tests that check their own to find.
    """
    bases = {base for _, base, _ in cgroups.detect(top=top, name=name)}
    bases.add(top or devcgroup.default_top(name) or "")  # the GPU fences' cgroups
    for base in bases - {""}:
        for directory, _, _ in sorted(os.walk(base), key=lambda w: -w[0].count("/")):
            _remove_cgroup(directory)


def _remove_cgroup(path: str) -> None:
    """rmdir, which only an empty cgroup allows: another cluster's busy one stays."""
    deadline = time.monotonic() + 0.5  # the sweep's last processes leaving
    while True:
        try:
            os.rmdir(path)
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


class Cluster:
    def __init__(
        self,
        directory: Path,
        nodes: int = 2,
        settings: tuple[str, ...] = (),
        *,
        accounting: bool = False,
        database: str | None = None,
        name: str = "corral",
        dbd_of: Cluster | None = None,
        tls: bool = True,
    ) -> None:
        """``dbd_of``: send accounting to that cluster's corral-dbd (none of its own);
        ``tls``: False for a plaintext cluster (``corral up --no-tls``)."""
        self.dir = directory
        self.nodes = nodes
        shared = None
        if dbd_of is not None:
            dbd = load_dbd_config(str(dbd_of.dir / "slurmdbd.conf"))
            shared = (dbd.dbd_port, load_key(key_path(dbd_of.conf)), str(dbd_of.dir))
        self.conf = write_config(
            str(directory),
            nodes,
            list(settings),
            accounting=accounting and dbd_of is None,
            cluster=name,
            shared_dbd=shared,
            tls=tls,
        )
        self.accounting = accounting and dbd_of is None
        self.database = database
        # Job scripts call srun by name: the clients next to this interpreter come first.
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
        self.env = {**os.environ, "SLURM_CONF": self.conf, "PYTHONUNBUFFERED": "1", "PATH": path}
        # Every test cluster's nodes have the same names: each agent keeps its runs'
        # cgroups apart, as one per node does under its own systemd unit.
        default = f"corral-test-{os.getpid()}-{next(CLUSTER_NUMBERS)}"
        self.cgroup_name: str = self.env.setdefault(cgroups.NAME_ENV, default)
        self.socket = socket_path(str(directory / "state"))
        self.client = Client(self.socket, timeout=10)
        self.logs = directory / "log"
        self.logs.mkdir(exist_ok=True)
        self.controller: subprocess.Popen[bytes] | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.dbd: subprocess.Popen[bytes] | None = None
        self.restds: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------ daemons

    def _spawn(
        self, module: str, *args: str, conf: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{module.split('.')[0]}.log", "ab")  # noqa: SIM115
        return subprocess.Popen(
            [sys.executable, "-m", module, "-f", conf or self.conf, *args],
            stdout=log,
            stderr=log,
            env=env or self.env,
            cwd=self.dir,  # a job sent without a working directory writes here, not in the checkout
            start_new_session=True,
        )

    def start_controller(self) -> None:
        self.controller = self._spawn("controller.main")
        self.wait_for(lambda: self._ping(), 20, "controller did not answer")

    def start_agent(self) -> None:
        names = f"node[1-{self.nodes}]" if self.nodes > 1 else "node1"
        self.agent = self._spawn("nodeagent.main", "--nodes", names)

    def start_dbd(self) -> None:
        database = ["--database", self.database] if self.database else []
        path = str(self.dir / "slurmdbd.conf")
        self.dbd = self._spawn("dbd.main", *database, conf=path)
        dbd = load_dbd_config(path)
        self.wait_for(lambda: listening(dbd.dbd_addr, dbd.dbd_port), 30, "dbd did not listen")

    def start_restd(self, *options: str, socket: str = "") -> str:
        """A corral-restd with ``options``, on a free loopback port or on the Unix
        ``socket``; its base URL (``unix:<socket>`` for a socket). The tests run as
        root, which corral-restd refuses unless told, as ``corral up`` tells it."""
        env = {**self.env, **restd_env()}
        if socket:
            self.restds.append(self._spawn("restd.main", *options, f"unix:{socket}", env=env))
            self.wait_for(lambda: os.path.exists(socket), 20, "restd did not listen")
            return f"unix:{socket}"
        port = free_port()
        self.restds.append(self._spawn("restd.main", *options, f"127.0.0.1:{port}", env=env))
        self.wait_for(lambda: listening("127.0.0.1", port), 20, "restd did not listen")
        return f"{'https' if '--tls-cert' in options else 'http'}://127.0.0.1:{port}"

    def start(self) -> Cluster:
        if self.accounting:
            self.start_dbd()
        self.start_controller()
        self.start_agent()
        self.wait_for(self.all_nodes_up, 20, "nodes did not register")
        return self

    def _ping(self) -> bool:
        """Whether the controller serves (a standby answers Ping too: docs/ha.md)."""
        try:
            return not self.client.call("Ping", {})["standby"]
        except SlurmError:
            return False

    def all_nodes_up(self) -> bool:
        nodes = self.client.call("Nodes", {})["nodes"]
        return all(n["state"] in ("IDLE", "MIXED", "ALLOCATED") for n in nodes)

    def kill(self, which: str, sig: int = signal.SIGKILL) -> None:
        proc = getattr(self, which)
        assert proc is not None
        proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            proc.wait(timeout=20)

    def stop(self) -> None:
        for proc in (*self.restds, self.agent, self.controller, self.dbd):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in (*self.restds, self.agent, self.controller, self.dbd):
            if proc is not None:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        # Supervisors are detached from the agent by design, and a job's processes outlive
        # their supervisor's end: end what is left of the jobs as `corral down` does.
        shutdown.sweep(self.conf, shutdown.Report())
        remove_run_cgroups(self.cgroup_name, self.env.get("CORRAL_CGROUP_TOP"))

    def job_processes(self, job_id: int, restarts: int | None = None) -> list[Process]:
        """The live processes of the job (of its run ``restarts`` only, if given) on the
        nodes, told by the environment the job's processes start with."""

        def of_job(process: Process) -> bool:
            env = process.environ()
            return env.get("SLURM_JOB_ID") == str(job_id) and (
                restarts is None or env.get("SLURM_RESTART_COUNT") == str(restarts)
            )

        return [p for p in shutdown.of_cluster(self.conf, str(self.dir / "spool")) if of_job(p)]

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text() if path.exists() else ""

    # ------------------------------------------------------------ clients

    def run(
        self,
        name: str,
        *args: str,
        check: bool = True,
        input: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*command(name), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            input=input,
            cwd=cwd or self.dir,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{name} {args} exited {result.returncode}: {result.stderr}")
        return result

    def sbatch(self, *args: str, cwd: Path | None = None) -> int:
        out = self.run("sbatch", "--parsable", *args, cwd=cwd).stdout
        return int(out.strip().split(";")[0])

    @contextmanager
    def running(self, *sbatch_args: str) -> Iterator[int]:
        """A job submitted with ``sbatch_args`` and running, cancelled at the end (the
        allocation that steps' tests work in)."""
        job_id = self.sbatch("-o", "/dev/null", *sbatch_args)
        self.wait_state(job_id, {"RUNNING"}, timeout=30)
        try:
            yield job_id
        finally:
            self.run("scancel", str(job_id), check=False)
            self.wait_done(job_id)

    def submit(self, script: str, work: Path, name: str = "w") -> int:
        """Submit ``script`` over the socket (no sbatch process: fast in bulk)."""
        spec = {
            "name": name,
            "script": script,
            "work_dir": str(work),
            "std_out": "/dev/null",
            "environment": {"PATH": "/usr/bin:/bin"},
        }
        return int(self.client.call("Submit", {"spec": spec})["job_id"])

    def jobs(self, *ids: int | str) -> list[dict[str, Any]]:
        flt: dict[str, Any] = {"states": ["ALL"]}
        if ids:
            flt["job_ids"] = [str(i) for i in ids]
        return list(self.client.call("Jobs", {"filter": flt, "expand_arrays": True})["jobs"])

    def job(self, job_id: int | str) -> dict[str, Any]:
        jobs = self.jobs(job_id)
        assert len(jobs) == 1, jobs
        return jobs[0]

    def wait_for(self, predicate: Any, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        logs = "".join(  # the daemons' and any a test's own programs started
            f"\n--- {path.stem} log ---\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.logs.glob("*.log"))
        )
        raise AssertionError(f"{message} within {timeout} s{logs}")

    def wait_state(
        self, job_id: int | str, states: set[str], timeout: float = 30
    ) -> dict[str, Any]:
        self.wait_for(
            lambda: self.job(job_id)["state"] in states,
            timeout,
            f"job {job_id} did not reach {sorted(states)}",
        )
        return self.job(job_id)

    def wait_done(self, job_id: int | str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_state(job_id, DONE, timeout)
