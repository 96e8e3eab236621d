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


def _command(name: str, uid: int, gid: int) -> list[str] | None:
    """How ``uid`` can run client ``name``: this environment's script if it may run
    this interpreter (it can sit under root's 0700 home), else the system's Python
    of this version with this environment's packages; None if neither."""
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    boot = f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})"
    for argv, command in (
        ([sys.executable, "-c", "import cli"], client_command(name)),
        (
            [python, "-c", f"{boot}; import cli"],
            [python, "-c", f"{boot}; from cli.{name} import main; main()"],
        ),
    ):
        try:
            probe = subprocess.run(
                argv, user=uid, group=gid, extra_groups=[], cwd="/", capture_output=True, timeout=30
            )
        except (PermissionError, FileNotFoundError):
            continue
        if probe.returncode == 0:
            return command
    return None


def run_as(
    cluster: Cluster, uid: int, gid: int, name: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """Client ``name`` with ``args``, run as ``uid``/``gid`` (no other groups) in the
    cluster's shared work directory; skipped where that uid cannot run a client."""
    command = _command(name, uid, gid)
    if command is None:
        pytest.skip(f"uid {uid} can run neither {sys.executable} nor a system Python")
    env = {**cluster.env, "HOME": "/tmp", "USER": str(uid), "LOGNAME": str(uid)}
    return subprocess.run(
        [*command, *args],
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
