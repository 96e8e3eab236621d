"""scrontab on a live cluster: a ``* * * * *`` entry held until its minute, run as
its user, back under its id for the next one; scancel disabling it; -l, -e, -r; bad
lines refused with their number; nobody else's crontab changed.

Corral has no test hook for the controller's clock, so one run is seen live (it
waits for the next minute); the recurrence over many runs is tests/unit/test_crontabs.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from corral import grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.security.rogue import controller_target, stamp_for_controller


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("scrontab"), nodes=1, settings=("ScronParameters=enable",))
    try:
        yield c.start()
    finally:
        c.stop()


def _cron_jobs(cluster: Cluster) -> list[dict[str, object]]:
    return [job for job in cluster.jobs() if job["cron_spec"]]


def test_an_every_minute_entry_runs_and_comes_back_under_its_id(
    cluster: Cluster, tmp_path: Path
) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text(
        f"# ticks\n#SCRON -t 1\n#SCRON -o {tmp_path}/tick-%j.out\n* * * * * echo ran as $(id -u)\n"
    )
    cluster.run("scrontab", str(crontab))
    assert cluster.run("scrontab", "-l").stdout == crontab.read_text()
    [job] = _cron_jobs(cluster)
    job_id = int(str(job["job_id"]))
    assert (job["state"], job["reason"], job["name"]) == ("PENDING", "BeginTime", "echo")
    shown = cluster.run("scontrol", "show", "job", str(job_id)).stdout
    assert 'CronJob=Yes CrontabSpec="* * * * *"' in shown
    # Its minute comes, it runs, and it is held again for the next one.
    cluster.wait_for(
        lambda: cluster.job(job_id)["restarts"] == 1 and cluster.job(job_id)["state"] == "PENDING",
        timeout=100,
        message="the cron job ran and was requeued",
    )
    assert cluster.job(job_id)["reason"] == "BeginTime"
    assert (tmp_path / f"tick-{job_id}.out").read_text() == "ran as 0\n"
    # scancel ends it for good and disables its lines.
    cluster.run("scancel", str(job_id))
    assert cluster.job(job_id)["state"] == "CANCELLED"
    listed = cluster.run("scrontab", "-l").stdout
    assert listed == (
        "# ticks\n#DISABLED: #SCRON -t 1\n"
        f"#DISABLED: #SCRON -o {tmp_path}/tick-%j.out\n"
        "#DISABLED: * * * * * echo ran as $(id -u)\n"
    )
    # -e through $EDITOR replaces it; -r removes it, cancelling what waits.
    editor = tmp_path / "editor"
    editor.write_text('#!/bin/sh\nprintf "@daily true\\n" > "$1"\n')
    editor.chmod(0o755)
    cluster.run("scrontab", "-e", env={"EDITOR": str(editor), "VISUAL": ""})
    assert cluster.run("scrontab", "-l").stdout == "@daily true\n"
    [daily] = [j for j in _cron_jobs(cluster) if j["state"] == "PENDING"]
    assert daily["cron_spec"] == "0 0 * * *"
    cluster.run("scrontab", "-r")
    assert cluster.job(str(daily["job_id"]))["state"] == "CANCELLED"
    gone = cluster.run("scrontab", "-l", check=False)
    assert (gone.returncode, gone.stdout) == (1, "no crontab for root\n")


def test_a_bad_line_is_refused_with_its_number(cluster: Cluster, tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text("# fine\n@hourly true\n*/1 * * * * true\n")
    refused = cluster.run("scrontab", str(crontab), check=False)
    assert (refused.returncode, refused.stderr) == (
        1, "scrontab: error: bad step value\n"
        "scrontab: error: There are errors in your crontab: line 3\n",
    )  # fmt: skip
    crontab.write_text("#SCRON -p nowhere\n@hourly true\n")
    refused = cluster.run("scrontab", str(crontab), check=False)
    assert (refused.returncode, refused.stderr) == (
        1, "scrontab: error: There was an issue with the job submission on lines 1-2: "
        "Invalid partition name specified\n",
    )  # fmt: skip
    assert cluster.run("scrontab", "-l", check=False).returncode == 1


def test_only_root_changes_and_operators_read_another_users_crontab(cluster: Cluster) -> None:
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        for action in ("get", "set", "remove"):
            request = pb.CrontabRequest(action=action, uid=0, crontab="@daily true\n")
            stranger = stamp_for_controller(cluster, request, "Crontab", uid=4242, gid=4242)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Crontab(stranger, timeout=10)
            assert refused.value.details() == "2002: Access/permission denied"
        own = pb.CrontabRequest(action="get")
        mine = stub.Crontab(stamp_for_controller(cluster, own, "Crontab", uid=4242, gid=4242))
        assert not mine.exists
        root = stamp_for_controller(cluster, pb.CrontabRequest(action="get", uid=4242), "Crontab")
        assert not stub.Crontab(root, timeout=10).exists


def test_scrontab_is_off_without_scron_parameters_enable(tmp_path: Path) -> None:
    plain = Cluster(tmp_path, nodes=1).start()
    try:
        refused = plain.run("scrontab", "-l", check=False)
    finally:
        plain.stop()
    assert (refused.returncode, refused.stderr) == (
        1, "scrontab: fatal: scrontab is disabled on this cluster\n",
    )  # fmt: skip
