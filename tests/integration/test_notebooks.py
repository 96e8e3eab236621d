"""JupyterHub's batchspawner on a live cluster: its SlurmSpawner, unchanged, starts a
notebook server on a node through its own sbatch, squeue and scancel command lines and its
own batch script template; the test reaches the server over HTTP and, from inside it, a
notebook user runs a multi-node step in the job's allocation.

The spawner runs as a hub does: as root, submitting as the notebook's user (its
``exec_prefix``: ``sudo -E -u {username}`` by default, ``runuser`` here, where there is no
sudo). Two things stand in for what a hub would run: the hub's API, which takes the port
``batchspawner-singleuser`` reports (batchspawner's ``/api/batchspawner`` handler, with the
spawner's token), and ``jupyterhub-singleuser``, a small HTTP server on the port it is told
(``JUPYTERHUB_SERVICE_URL``) that says where it runs and runs a step when asked.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from batchspawner import SlurmSpawner
from jupyterhub import orm
from jupyterhub.objects import Hub
from jupyterhub.user import User

from tests.integration.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
#: What the notebook's user runs: the clients, batchspawner's wrapper, the server.
CLIENTS = ("sbatch", "squeue", "scancel", "srun", "scontrol")
#: jupyterhub-singleuser's stand-in; batchspawner-singleuser runs it with runpy.
NOTEBOOK = """\
#!/usr/bin/env python3
import json, os, socket, subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse


class Notebook(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/srun":  # a notebook cell: a step over the job's two nodes
            steps = [["srun", "-N2", "hostname"], ["srun", "-N2", "printenv", "SLURMD_NODENAME"]]
            done = [subprocess.run(s, capture_output=True, text=True, timeout=120) for s in steps]
            body = [{"rc": d.returncode, "out": d.stdout, "err": d.stderr} for d in done]
        else:
            env = os.environ
            body = {k: env.get(k, "") for k in ("SLURM_JOB_ID", "SLURMD_NODENAME", "USER")}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
ThreadingHTTPServer((url.hostname, url.port), Notebook).serve_forever()
"""


class HubApi:
    """The hub's one API call batchspawner-singleuser makes: POST /hub/api/batchspawner
    with the spawner's token and ``{"port": N}``, which sets the spawner's traits (as
    batchspawner's BatchSpawnerAPIHandler does); anything else is refused."""

    def __init__(self) -> None:
        self.spawner: SlurmSpawner | None = None
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                spawner = api.spawner
                token = self.headers.get("Authorization", "")
                if spawner is None or token != f"token {spawner.api_token}":
                    self.send_error(403)
                    return
                if self.path != "/hub/api/batchspawner":
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                for key, value in body.items():
                    if hasattr(spawner, key):
                        setattr(spawner, key, value)
                self.send_response(201)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _python_for(user: pwd.struct_passwd) -> str:
    """An interpreter ``user`` may run: this one (its home may be private to root),
    else the system's of this version."""
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, system):
        try:
            probe = subprocess.run(
                [python, "-c", ""], user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                cwd="/", capture_output=True, check=False,
            )  # fmt: skip
        except PermissionError:
            continue
        if probe.returncode == 0:
            return python
    pytest.skip(f"{user.pw_name} can run no Python {sys.version_info[:2]}")


def write_bin(where: Path, user: pwd.struct_passwd) -> Path:
    """The notebook user's commands in ``where/bin``: this checkout's clients and
    batchspawner's wrapper run by an interpreter the user may run, and the stand-in."""
    bin_dir = where / "bin"
    bin_dir.mkdir()
    python = _python_for(user)
    boot = (
        f"import site, sys; site.addsitedir({sysconfig.get_paths()['purelib']!r}); "
        f"sys.path.insert(0, {str(REPO)!r}); "
    )
    mains = {name: f"cli.{name}" for name in CLIENTS}
    mains["batchspawner-singleuser"] = "batchspawner.singleuser"
    for name, module in mains.items():
        code = f"{boot}from {module} import main; main()"
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {python} -c "{code}" "$@"\n')
    (bin_dir / "jupyterhub-singleuser").write_text(NOTEBOOK)
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    return bin_dir


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A 0755 directory under /tmp: a cluster, a home and commands another uid reaches."""
    top = Path(tempfile.mkdtemp(prefix="corral-notebook-", dir="/tmp"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def two(shared: Path) -> Iterator[Cluster]:
    cluster = Cluster(shared / "c", 2, ("KillWait=2",))
    cluster.dir.chmod(0o755)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def new_spawner(hub_port: int, user: pwd.struct_passwd, home: Path) -> SlurmSpawner:
    """A SlurmSpawner as JupyterHub makes one for ``user``'s default server (as
    batchspawner's own tests make theirs), with a site's settings: the user's home,
    ``runuser`` for sudo, the clients' PATH and slurm.conf kept for the job, a
    two-node allocation, and the server one task of its own (``--overlap``: the
    allocation's CPUs stay free for the steps the notebook runs)."""
    db = orm.new_session_factory("sqlite:///:memory:")()
    db.add(orm.User(name=user.pw_name))
    db.commit()
    hub = Hub(ip="127.0.0.1", port=hub_port, base_url="/hub/")
    owner = User(db.query(orm.User).first(), {"hub": hub})
    spawner: SlurmSpawner = owner._new_spawner(
        "",
        spawner_class=SlurmSpawner,
        api_token=secrets.token_hex(16),
        exec_prefix="runuser -u {username} --",
        env_keep=["PATH", "SLURM_CONF", "JUPYTERHUB_SINGLEUSER_APP"],
        req_homedir=str(home),
        req_options="-N2",
        req_srun="srun --overlap -N1 -n1",
        startup_poll_interval=0.2,
    )
    return spawner


def get(host: str, port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=120) as reply:
        return json.loads(reply.read())


def node_addr(cluster: Cluster, node: str) -> str:
    """The node's address, as ``scontrol show node`` has it (the emulated nodes'
    names do not resolve; a site's do, or it sets the spawner's state_exechost_exp)."""
    shown = cluster.run("scontrol", "show", "node", node).stdout
    return shown.split("NodeAddr=")[1].split()[0]


def test_slurmspawner_starts_reaches_and_stops_a_notebook_that_runs_a_multinode_step(
    two: Cluster, shared: Path, users: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    user = pwd.getpwnam(users[0])
    home = shared / "home"
    home.mkdir()
    os.chown(home, user.pw_uid, user.pw_gid)
    bin_dir = write_bin(shared, user)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    if shutil.which("runuser") is None:
        pytest.skip("no runuser to submit as the notebook's user")
    monkeypatch.setenv("SLURM_CONF", two.conf)
    hub = HubApi()
    spawner = new_spawner(hub.port, user, home)
    hub.spawner = spawner

    async def lifetime() -> tuple[int, str, int, Any, Any, int | None, int | None]:
        host, port = await asyncio.wait_for(spawner.start(), 180)
        job_id = int(spawner.job_id)  # sbatch --parsable's line, as batchspawner parses it
        running = await spawner.poll()
        addr = node_addr(two, host)
        where, steps = get(addr, port, "/"), get(addr, port, "/srun")
        await spawner.stop()
        return job_id, host, port, where, steps, running, await spawner.poll()

    try:
        job_id, host, port, where, steps, running, stopped = asyncio.run(lifetime())
    except BaseException:
        for log in home.glob("jupyterhub_slurmspawner_*.log"):
            print(log.read_text())
        raise
    finally:
        hub.close()
    # query: squeue -h -j N -o '%T %B' said RUNNING and the batch host, node1
    assert host == "node1" and port > 0
    assert running is None
    assert where == {"SLURM_JOB_ID": str(job_id), "SLURMD_NODENAME": "node1", "USER": user.pw_name}
    hostname = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout
    assert steps[0] == {"rc": 0, "out": hostname * 2, "err": ""}, steps
    assert steps[1]["rc"] == 0 and sorted(steps[1]["out"].split()) == ["node1", "node2"], steps
    # cancel: scancel N, then squeue no longer says RUNNING: poll() reports the server gone
    assert stopped == 1
    assert spawner.job_id == ""
    job = two.wait_done(job_id)
    assert job["state"] == "CANCELLED" and job["user"] == user.pw_name
    log = (home / f"jupyterhub_slurmspawner_{job_id}.log").read_text()
    assert "SIGTERM received" in log, log
