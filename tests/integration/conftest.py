"""Fixtures that start real Corral daemons on 127.0.0.1 in a temporary directory."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import TEST_USERS, Cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Two emulated nodes, small timeouts, started and stopped per test."""
    c = Cluster(tmp_path, nodes=2, settings=("KillWait=2", "SlurmdTimeout=6"))
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[object]:
    """Build a cluster with custom settings: ``make_cluster(nodes=4, settings=(...))``."""
    made: list[Cluster] = []

    def build(nodes: int = 2, settings: tuple[str, ...] = (), start: bool = True) -> Cluster:
        c = Cluster(tmp_path / f"c{len(made)}", nodes=nodes, settings=settings)
        made.append(c)
        return c.start() if start else c

    try:
        yield build
    finally:
        for c in made:
            c.stop()


@pytest.fixture(scope="session")
def users() -> tuple[str, ...]:
    """TEST_USERS, created (no home directory) where missing; kept for the next run."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    if shutil.which("useradd") is None:
        pytest.skip("no useradd to create the test users")
    for name in TEST_USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=False)
            pwd.getpwnam(name)  # KeyError if neither this run nor a concurrent one made it
    return TEST_USERS
