"""Clients run as another uid, against a cluster every uid can reach.

pytest's tmp_path sits under a 0700 directory; these clusters live in a 0755
one under /tmp instead, so that an ordinary user's client reaches the
controller's socket as a real user would.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.demo import client_command
from tests.integration.cluster import Cluster


def shared_top() -> Iterator[Path]:
    """A 0755 directory under /tmp, removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="corral-security-", dir="/tmp"))
    try:
        top.chmod(0o755)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def open_cluster(top: Path, settings: tuple[str, ...] = ()) -> Cluster:
    """One node, in ``top``, readable by every uid (its jobs' files are written there)."""
    cluster = Cluster(top / "c", 1, settings)
    cluster.dir.chmod(0o755)
    work = top / "work"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    return cluster.start()


def _python(uid: int, gid: int) -> list[str] | None:
    """How ``uid`` runs Python code here (``[..., "-c"]``, the code's prefix last):
    this interpreter if it may (it can sit under root's 0700 home), else the
    system's Python of this version with this environment's packages; None if
    neither."""
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    boot = f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r}); "
    for argv in ([sys.executable, "-c", ""], [python, "-c", boot]):
        try:
            probe = subprocess.run(
                [*argv[:2], argv[2] + "import cli"],
                user=uid,
                group=gid,
                extra_groups=[],
                cwd="/",
                capture_output=True,
                timeout=30,
            )
        except (PermissionError, FileNotFoundError):
            continue
        if probe.returncode == 0:
            return argv
    return None


def _command(name: str, uid: int, gid: int) -> list[str] | None:
    """How ``uid`` can run client ``name``."""
    python = _python(uid, gid)
    if python is None:
        return None
    if python[0] == sys.executable:
        return client_command(name)
    return [*python[:2], python[2] + f"from cli.{name} import main; main()"]


def run_code_as(
    cluster: Cluster, uid: int, gid: int, code: str
) -> subprocess.CompletedProcess[str]:
    """Python ``code`` run as ``uid``/``gid``: a client the user wrote, not ours."""
    python = _python(uid, gid)
    if python is None:
        pytest.skip(f"uid {uid} can run neither {sys.executable} nor a system Python")
    return _run(cluster, uid, gid, [*python[:2], python[2] + code])


def run_as(
    cluster: Cluster, uid: int, gid: int, name: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """Client ``name`` with ``args``, run as ``uid``/``gid`` (no other groups) in the
    cluster's shared work directory; skipped where that uid cannot run a client."""
    command = _command(name, uid, gid)
    if command is None:
        pytest.skip(f"uid {uid} can run neither {sys.executable} nor a system Python")
    return _run(cluster, uid, gid, [*command, *args])


def _run(cluster: Cluster, uid: int, gid: int, argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**cluster.env, "HOME": "/tmp", "USER": str(uid), "LOGNAME": str(uid)}
    return subprocess.run(
        argv,
        env=env,
        cwd=cluster.dir.parent / "work",
        user=uid,
        group=gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
