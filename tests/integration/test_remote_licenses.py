"""Remote licenses on a real cluster with accounting: ``sacctmgr add resource`` gives the
cluster half of 4 ``fluent`` licenses on server ``flex``; without a restart the
controller offers ``fluent@flex`` (Total=2, Remote=yes), a job asking for both runs and
a second waits with reason Licenses; raising the cluster's share lets it start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.2; done"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    top = tmp_path_factory.mktemp("remotelic")
    started = Cluster(top / "c", 1, ("KillWait=2",), accounting=True).start()
    try:
        yield started
    finally:
        started.stop()


def _licenses(c: Cluster) -> str:
    return c.run("scontrol", "show", "licenses").stdout


def test_a_remote_license_is_offered_scheduled_and_changed_live(cluster: Cluster) -> None:
    c = cluster
    added = c.run(
        "sacctmgr", "-i", "add", "resource", "fluent", "server=flex", "count=4",
        "type=license", "cluster=corral", "percentallowed=50",
    )  # fmt: skip
    assert added.stdout.startswith(" Adding Resource(s)\n  fluent@flex\n"), added.stdout
    shown = c.run("sacctmgr", "-P", "-n", "show", "resource", "withclusters").stdout
    assert shown == "fluent|flex|License|4|50||corral|50\n", shown
    lic = "LicenseName=fluent@flex\n    Total=2 Used={} Free={} Reserved=0 Remote=yes\n"
    c.wait_for(lambda: _licenses(c) == lic.format(0, 2), 20, "fluent@flex not offered")

    work: Path = c.dir
    script = work / "first.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH -L fluent@flex:2\n{WAIT_FOR_GO}\n")
    first = c.sbatch("-D", str(work), "-o", "/dev/null", str(script))
    c.wait_state(first, {"RUNNING"})
    second = c.sbatch("-L", "fluent@flex:2", "-D", str(work), "-o", "/dev/null", "--wrap", "true")
    c.wait_for(lambda: c.job(second)["reason"] == "Licenses", 15, "no Licenses reason")
    assert c.job(second)["state"] == "PENDING"
    assert _licenses(c) == lic.format(2, 0)
    refused = c.run("sbatch", "-L", "fluent@flex:3", "--wrap", "true", check=False)
    assert refused.returncode == 1
    assert "Invalid license specification" in refused.stderr, refused.stderr

    # A larger share takes effect without a restart: the second job starts beside the first.
    c.run(
        "sacctmgr", "-i", "modify", "resource", "where", "name=fluent", "server=flex",
        "cluster=corral", "set", "percentallowed=100",
    )  # fmt: skip
    c.wait_state(second, {"RUNNING", "COMPLETING", "COMPLETED"}, 30)
    assert c.job(first)["state"] == "RUNNING"
    (work / "go").touch()
    assert c.wait_done(first)["state"] == "COMPLETED"
