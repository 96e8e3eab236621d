"""OCI containers on a real cluster (issue 19): ``--container`` with oci.conf's
``RunTimeRun`` through runc, as Slurm 22.05+ runs them (docs/containers.md).

The bundle is built here: a root file system holding a file the host has not
(``/etc/os-release-marker``) and the host's /usr bind-mounted read-only (with
/bin, /lib, /lib64 and /sbin as the host has them: links into /usr, or their own
read-only bind mounts), and the config.json ``runc spec`` writes. What the job
prints can only come from inside that root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

MARKER = "inside the bundle"

# Where CI is set (.ci/run installs runc), a missing runtime fails the tests.
pytestmark = pytest.mark.skipif(
    (shutil.which("runc") is None or os.geteuid() != 0) and not os.environ.get("CI"),
    reason="needs runc (apt-get install runc) and root, whose jobs runc runs",
)


def _bundle(path: Path) -> Path:
    """An OCI bundle at ``path`` whose root shows the host's programs read-only."""
    root = path / "rootfs"
    for name in ("etc", "proc", "dev", "sys", "tmp", "usr"):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release-marker").write_text(MARKER + "\n")
    subprocess.run(["runc", "spec", "--bundle", str(path)], check=True)
    config = json.loads((path / "config.json").read_text())
    mounts = [{"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]}]
    for name in ("bin", "lib", "lib64", "sbin"):
        host = Path("/") / name
        if host.is_symlink():
            (root / name).symlink_to(os.readlink(host))
        elif host.is_dir():
            (root / name).mkdir()
            mounts.append(
                {
                    "destination": str(host),
                    "type": "bind",
                    "source": str(host),
                    "options": ["rbind", "ro"],
                }
            )
    config["mounts"] += mounts
    (path / "config.json").write_text(json.dumps(config))
    return path


def _containers(state: Path) -> list[str]:
    listed = subprocess.run(
        ["runc", "--root", str(state), "list", "-q"], capture_output=True, text=True, check=True
    )
    return listed.stdout.split()


def _oci_conf(cluster: Cluster, *lines: str) -> None:
    (Path(cluster.conf).parent / "oci.conf").write_text("\n".join(lines) + "\n")


def test_batch_script_and_step_run_in_the_bundle_as_the_job(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "bundle")
    cluster = Cluster(tmp_path, nodes=1)
    state = tmp_path / "runc"
    _oci_conf(
        cluster,
        "# runc as Slurm's containers guide has it, its state kept with the test",
        f'RunTimeRun="runc --root {state} run --bundle %b %n.%u.%j.%s.%t"',
        f'RunTimeQuery="runc --root {state} state %n.%u.%j.%s.%t"',
        f'RunTimeDelete="runc --root {state} delete --force %n.%u.%j.%s.%t"',
        'EnvExclude="^HIDDEN_"',
    )
    try:
        cluster.start()
        # A path that is not a bundle is refused where the user sees it.
        bad = cluster.run("sbatch", f"--container={tmp_path}", "--wrap", "true", check=False)
        assert bad.returncode == 1
        assert bad.stderr == (
            f"sbatch: error: --container={tmp_path}: not an OCI bundle: no config.json in it\n"
        )
        script = (
            "cat /etc/os-release-marker; id -u; echo $SLURM_CONTAINER ${HIDDEN_X-unset}; "
            "test -e /work-only-on-host || exit 3"
        )
        job_id = int(
            cluster.run(
                "sbatch",
                "--parsable",
                f"--container={bundle}",
                "--wrap",
                script,
                env={"HIDDEN_X": "seen"},
            ).stdout
        )
        job = cluster.wait_done(job_id, 30)
        out = (tmp_path / f"slurm-{job_id}.out").read_text()
        assert out == f"{MARKER}\n0\n{bundle} unset\n", out
        assert job["state"] == "FAILED" and job["exit_status"] == 3 << 8
        shown = cluster.run("scontrol", "show", "job", str(job_id)).stdout
        assert f"   Container={bundle}\n" in shown
        # A step: each task in its own copy of the bundle, its exit status srun's.
        step = cluster.run(
            "srun", "-n2", f"--container={bundle}", "sh", "-c",
            "cat /etc/os-release-marker; exit 5", check=False,
        )  # fmt: skip
        assert step.stdout == f"{MARKER}\n" * 2, step.stderr
        assert step.returncode == 5
        # RunTimeDelete after each run: the runtime keeps no container of theirs.
        cluster.wait_for(lambda: _containers(state) == [], 10, "containers were left")
    finally:
        cluster.stop()


def test_a_node_without_oci_conf_fails_the_launch_in_slurms_words(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "bundle")
    cluster = Cluster(tmp_path, nodes=1, settings=("JobRequeue=0",))
    try:
        cluster.start()
        job_id = cluster.sbatch(f"--container={bundle}", "--wrap", "echo ran outside")
        job = cluster.wait_done(job_id, 30)
        assert job["state"] == "FAILED"
        out = (tmp_path / f"slurm-{job_id}.out").read_text()
        assert "Container support is not configured" in out
        assert "ran outside" not in out
    finally:
        cluster.stop()
