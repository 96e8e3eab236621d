"""Configuration, reconfiguration, identity and hostile input (issue 2)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.errors import SlurmError
from tests.forkuser import call_as
from tests.integration.cluster import Cluster


def test_bad_config_value_stops_the_controller_with_file_and_line(tmp_path: Path) -> None:
    c = Cluster(tmp_path, nodes=1, settings=("KillWait=soon",))
    result = subprocess.run(
        [sys.executable, "-m", "controller.main", "-f", c.conf],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode != 0
    lines = Path(c.conf).read_text().splitlines()
    line = lines.index("KillWait=soon") + 1
    assert f"{c.conf}:{line}:" in result.stderr


def test_bad_scheduler_parameter_stops_the_controller_with_file_and_line(tmp_path: Path) -> None:
    c = Cluster(tmp_path, nodes=1, settings=("SchedulerParameters=bf_window=0",))
    result = subprocess.run(
        [sys.executable, "-m", "controller.main", "-f", c.conf],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode != 0
    line = Path(c.conf).read_text().splitlines().index("SchedulerParameters=bf_window=0") + 1
    assert f"{c.conf}:{line}: bad SchedulerParameters value 'bf_window=0'" in result.stderr


def test_unknown_key_only_warns(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=1, settings=("NoSuchKnob=1",))
    assert "NoSuchKnob" in c.log("controller")


def test_reconfigure_rereads_the_file_and_keeps_jobs(cluster: Cluster) -> None:
    job_id = cluster.sbatch("--hold", "--wrap", "true")
    conf = Path(cluster.conf)
    conf.write_text(conf.read_text().replace("MinJobAge=300", "MinJobAge=123"))
    cluster.run("scontrol", "reconfigure")
    config = cluster.run("scontrol", "show", "config").stdout
    assert "MinJobAge               = 123 sec" in config
    assert cluster.job(job_id)["state"] == "PENDING"


def test_bad_submissions_change_nothing(cluster: Cluster, tmp_path: Path) -> None:
    binary = tmp_path / "binary.sh"
    binary.write_bytes(b"#!/bin/sh\n\x00\x01\x02")
    dos = tmp_path / "dos.sh"
    dos.write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    empty = tmp_path / "empty.sh"
    empty.write_text("")
    bad_directive = tmp_path / "directive.sh"
    bad_directive.write_text("#!/bin/sh\n#SBATCH --no-such-option\ntrue\n")
    attempts = [
        ("--nosuch", "--wrap", "true"),
        ("-t", "abc", "--wrap", "true"),
        ("-p", "nosuch", "--wrap", "true"),
        ("-N", "99", "--wrap", "true"),
        ("--mem", "100T", "--wrap", "true"),
        (str(binary),),
        (str(dos),),
        (str(empty),),
        (str(bad_directive),),
    ]
    for args in attempts:
        result = cluster.run("sbatch", *args, check=False)
        assert result.returncode != 0, args
        assert result.stderr.startswith("sbatch: "), (args, result.stderr)
        assert result.stdout == "", args
    assert cluster.jobs() == []
    assert cluster.sbatch("--wrap", "true") == 1, "rejected submissions must not use job ids"


def test_garbage_on_the_client_socket_does_not_hurt_the_controller(cluster: Cluster) -> None:
    path = cluster.socket
    payloads = [
        b"",
        b"\x00\x00",
        struct.pack(">I", 5) + b"\xff\xff\xff\xff\xff",
        struct.pack(">I", 0xFFFFFFFF),
        struct.pack(">I", 6) + b"\x0a\x04Nope",
        struct.pack(">I", 12) + b"\x0a\x06Submit\x12\x02\xff\xff",
        os.urandom(512),
    ]
    for data in payloads:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5)
            sock.connect(path)
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            try:
                sock.recv(65536)
            except TimeoutError:
                pytest.fail(f"controller hung on {data!r}")
    assert cluster.run("scontrol", "ping").stdout.endswith("is UP\n")


@pytest.fixture
def other_user() -> Iterator[pwd.struct_passwd]:
    if os.getuid() != 0:
        pytest.skip("switching users needs root")
    name = "corraltest"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
        entry = pwd.getpwnam(name)
    yield entry


def _as_user(user: pwd.struct_passwd, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``call`` in a child process that has become ``user`` (no exec needed):
    {"ok": its reply}, or the Slurm error's code and message.

    The controller learns identities from the socket (SO_PEERCRED), so a
    request from this child is the user's own; the interpreter under /root
    need not be executable by that user.
    """

    def answer() -> dict[str, Any]:
        try:
            return {"ok": call()}
        except SlurmError as exc:
            return {"code": exc.code, "message": exc.message}

    groups = os.getgrouplist(user.pw_name, user.pw_gid)
    return dict(call_as(user, answer, groups))


def test_job_runs_as_its_owner(other_user: pwd.struct_passwd) -> None:
    top = Path(tempfile.mkdtemp(prefix="corral-owner-", dir="/tmp"))
    top.chmod(0o755)
    c = Cluster(top / "cluster", nodes=1)
    work = top / "work"
    work.mkdir()
    work.chmod(0o777)
    spec = {
        "name": "whoami",
        "script": "#!/bin/sh\nid -u; id -g; id -G\n",
        "work_dir": str(work),
        "std_out": str(work / "out-%j"),
        "environment": {"PATH": "/usr/bin:/bin"},
    }
    try:
        c.start()
        reply = _as_user(other_user, lambda: c.client.call("Submit", {"spec": spec}))
        job_id = reply["ok"]["job_id"]
        job = c.wait_done(job_id)
        assert (job["state"], job["uid"], job["user"]) == (
            "COMPLETED",
            other_user.pw_uid,
            other_user.pw_name,
        )
        out = work / f"out-{job_id}"
        uid, gid, groups = out.read_text().splitlines()
        assert (int(uid), int(gid)) == (other_user.pw_uid, other_user.pw_gid)
        expected = set(os.getgrouplist(other_user.pw_name, other_user.pw_gid))
        assert set(map(int, groups.split())) == expected
        assert out.stat().st_uid == other_user.pw_uid
        roots = c.sbatch("--hold", "--wrap", "true")
        denied = _as_user(
            other_user, lambda: c.client.call("Signal", {"filter": {"job_ids": [str(roots)]}})
        )
        assert denied["ok"]["results"][0]["code"] == errors.ESLURM_ACCESS_DENIED
        assert c.job(roots)["state"] == "PENDING"
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_unknown_partition_is_reported_as_slurm_does(cluster: Cluster) -> None:
    result = cluster.run("sbatch", "-p", "nosuch", "--wrap", "true", check=False)
    assert result.returncode == 1
    assert result.stderr == (
        "sbatch: error: invalid partition specified: nosuch\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    )
