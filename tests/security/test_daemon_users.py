"""The daemons as their systemd units run them: corral-dbd and corral-restd as SlurmUser,
an ordinary uid with no capability, the controller as root bounded to the capabilities
its unit's CapabilityBoundingSet leaves it, with no new privileges, and the
files owned as docs/install.md says (the cluster key and dbd's TLS key SlurmUser's, mode
0600). A job runs, dbd records it, and restd lists it for a token's user: the ownership
and privileges the units give are enough. And restd, started as root without
SLURMRESTD_SECURITY, refuses to run."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import auth
from dbd.config import load as load_dbd_config
from tests.integration.cluster import Cluster, free_port, listening
from tests.integration.rest import Rest
from tests.security.asuser import _python, shared_top

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "corral-controller.service"


def _bounding_set() -> tuple[str, int]:
    """corral-controller.service's CapabilityBoundingSet: as setpriv spells it, and as
    the CapEff mask /proc shows."""
    line = next(x for x in UNIT.read_text().splitlines() if x.startswith("CapabilityBounding"))
    names = [name.removeprefix("CAP_").lower() for name in line.split("=", 1)[1].split()]
    numbers = {"dac_override": 1, "dac_read_search": 2}  # capabilities(7)
    return ",".join(["-all", *(f"+{n}" for n in names)]), sum(1 << numbers[n] for n in names)


@pytest.fixture
def top() -> Iterator[Path]:
    yield from shared_top()


def _python_for(uid: int, gid: int) -> list[str]:
    """An interpreter ``uid`` may run, with this environment's packages and checkout."""
    found = _python(uid, gid)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"uid {uid} can run neither {sys.executable} nor a system Python")
        pytest.skip(f"uid {uid} can run neither {sys.executable} nor a system Python")
    return found


def _spawn_as(
    cluster: Cluster, user: pwd.struct_passwd, name: str, module: str, *args: str
) -> subprocess.Popen[bytes]:
    """``module``'s main as ``user`` (its own group only), logging to the cluster's logs."""
    python = _python_for(user.pw_uid, user.pw_gid)
    code = (
        f"import sys; sys.argv = {[f'corral-{name}', *args]!r}; from {module} import main; main()"
    )
    log = open(cluster.logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen(
        [*python[:2], python[2] + code],
        stdout=log,
        stderr=log,
        env={**cluster.env, "HOME": "/nonexistent"},
        cwd="/",
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        start_new_session=True,
    )


def _ids(pid: int, field: str) -> list[int]:
    """A /proc/PID/status line's numbers (capability sets are hexadecimal)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return [int(n, 16 if field.startswith("Cap") else 10) for n in line.split()[1:]]
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_dbd_and_restd_serve_as_slurm_user_and_the_controller_with_two_capabilities(
    top: Path, users: tuple[str, ...]
) -> None:
    slurm = pwd.getpwnam(users[0])
    cluster = Cluster(top / "c", 1, (f"SlurmUser={slurm.pw_name}",), accounting=True)
    cluster.dir.chmod(0o755)
    key = Path(auth.key_path(cluster.conf))
    os.chown(key, slurm.pw_uid, slurm.pw_gid)
    dbd_conf = cluster.dir / "slurmdbd.conf"
    database = cluster.dir / "db"  # /var/lib/corral in the unit: SlurmUser's, 0700
    database.mkdir(mode=0o700)
    os.chown(database, slurm.pw_uid, slurm.pw_gid)
    text = dbd_conf.read_text().replace(
        f"StorageLoc={cluster.dir}/accounting.db", f"StorageLoc={database}/accounting.db"
    )
    dbd_conf.write_text(f"{text}SlurmUser={slurm.pw_name}\n")
    os.chown(dbd_conf, slurm.pw_uid, slurm.pw_gid)
    dbd_conf.chmod(0o600)
    for pem in (cluster.dir / "tls").glob("dbd_cert*.pem"):
        os.chown(pem, slurm.pw_uid, slurm.pw_gid)
    try:
        cluster.dbd = _spawn_as(cluster, slurm, "dbd", "dbd.main", "-f", str(dbd_conf))
        port = load_dbd_config(str(dbd_conf)).dbd_port
        cluster.wait_for(
            lambda: listening("127.0.0.1", port), 30, "dbd did not listen as SlurmUser"
        )

        caps, mask = _bounding_set()
        cluster.controller = subprocess.Popen(
            [
                "setpriv",
                f"--bounding-set={caps}",
                "--inh-caps=-all",
                "--no-new-privs",
                sys.executable,
                "-m",
                "controller.main",
                "-f",
                cluster.conf,
            ],
            stdout=open(cluster.logs / "controller.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            env=cluster.env,
            cwd=cluster.dir,
            start_new_session=True,
        )
        cluster.wait_for(cluster._ping, 30, "the bounded controller did not answer")
        assert _ids(cluster.controller.pid, "Uid") == [0] * 4
        assert _ids(cluster.controller.pid, "CapEff") == [mask]
        cluster.start_agent()
        cluster.wait_for(cluster.all_nodes_up, 20, "node1 did not register")

        listen = free_port()
        cluster.restds.append(
            _spawn_as(
                cluster, slurm, "restd", "restd.main", "-f", cluster.conf, f"127.0.0.1:{listen}"
            )
        )
        cluster.wait_for(
            lambda: listening("127.0.0.1", listen), 30, "restd did not listen as SlurmUser"
        )
        for proc in (cluster.dbd, cluster.restds[-1]):
            assert _ids(proc.pid, "Uid") == [slurm.pw_uid] * 4
            assert _ids(proc.pid, "CapEff") == [0]

        job = cluster.sbatch("--wrap", "true")
        cluster.wait_for(lambda: cluster.job(job)["state"] == "COMPLETED", 30, "job not done")
        deadline = time.monotonic() + 30
        while str(job) not in cluster.run("sacct", "-n", "-X", "-o", "JobID").stdout:
            assert time.monotonic() < deadline, "dbd did not record the job"
            time.sleep(0.2)
        token = cluster.run("scontrol", "token").stdout.strip().split("=", 1)[1]
        status_code, listing = Rest(f"http://127.0.0.1:{listen}", token).call(
            "GET", f"/slurm/v0.0.42/job/{job}"
        )
        assert status_code == 200, listing
        assert [j["job_id"] for j in listing["jobs"]] == [job]
    finally:
        cluster.stop()


def test_restd_refuses_to_run_as_root_without_slurmrestd_security(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("running restd as root needs root")
        pytest.skip("running restd as root needs root")
    cluster = Cluster(tmp_path / "c", 1)
    env = {k: v for k, v in cluster.env.items() if k != "SLURMRESTD_SECURITY"}
    done = subprocess.run(
        [sys.executable, "-m", "restd.main", "-f", cluster.conf, "127.0.0.1:1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (
        1,
        "corral-restd: fatal: corral-restd should not be run as the root user.\n",
    )
