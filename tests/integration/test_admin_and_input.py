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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster, command


def test_bad_config_value_stops_the_controller_with_file_and_line(tmp_path: Path) -> None:
    c = Cluster(tmp_path, nodes=1, settings=("KillWait=soon",))
    result = subprocess.run([sys.executable, "-m", "controller.main", "-f", c.conf],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode != 0
    lines = Path(c.conf).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("KillWait"))
    assert f"{c.conf}:{line}:" in result.stderr


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
    path = cluster.client.socket_path
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
    if os.getuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("switching users needs root and runuser")
    name = "corraltest"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
        entry = pwd.getpwnam(name)
    yield entry


def test_job_runs_as_its_owner(other_user: pwd.struct_passwd) -> None:
    top = Path(tempfile.mkdtemp(prefix="corral-owner-", dir="/tmp"))
    top.chmod(0o755)
    c = Cluster(top / "cluster", nodes=1)
    work = top / "work"
    work.mkdir()
    work.chmod(0o777)
    try:
        c.start()
        Path(c.dir).chmod(0o755)
        result = subprocess.run(
            ["runuser", "-u", other_user.pw_name, "--", *command("sbatch"), "--parsable",
             "-o", str(work / "out-%j"), "--wrap", "id -u; id -g; id -G"],
            env=c.env, capture_output=True, text=True, cwd=work, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        job_id = int(result.stdout.strip())
        job = c.wait_done(job_id)
        assert (job["state"], job["uid"], job["user"]) == ("COMPLETED", other_user.pw_uid,
                                                          other_user.pw_name)
        out = work / f"out-{job_id}"
        uid, gid, groups = out.read_text().splitlines()
        assert (int(uid), int(gid)) == (other_user.pw_uid, other_user.pw_gid)
        assert set(map(int, groups.split())) == set(os.getgrouplist(other_user.pw_name,
                                                                    other_user.pw_gid))
        assert out.stat().st_uid == other_user.pw_uid
        roots = c.sbatch("--hold", "--wrap", "true")
        denied = subprocess.run(
            ["runuser", "-u", other_user.pw_name, "--", *command("scancel"), str(roots)],
            env=c.env, capture_output=True, text=True, timeout=60, check=False)
        assert denied.returncode == 1
        assert "Access/permission denied" in denied.stderr
        assert c.job(roots)["state"] == "PENDING"
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)
