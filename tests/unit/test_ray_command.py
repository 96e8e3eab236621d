"""``corral ray``'s refusals, as a user meets them: Slurm's ``prog: error:`` form,
exit status 1, and nothing started (no srun is reached in any of these)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: An allocation as a batch script on its first node sees it.
IN_JOB = {
    "SLURM_JOB_ID": "12",
    "SLURM_JOB_NODELIST": "node[1-2]",
    "SLURM_JOB_CPUS_PER_NODE": "2(x2)",
    "SLURMD_NODENAME": "node1",
}


def corral_ray(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SLURMD"))}
    return subprocess.run(
        [sys.executable, "-m", "cli.corral", "ray", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _path_with(tmp_path: Path, ray: str | None) -> str:
    """A PATH of ``sh`` and ``true`` and, if given, a ``ray`` script with this text."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sh", "true"):
        (bin_dir / name).symlink_to(f"/bin/{name}")
    if ray is not None:
        (bin_dir / "ray").write_text(ray)
        (bin_dir / "ray").chmod(0o755)
    return str(bin_dir)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ("--", "true"),
            {},
            "not inside an allocation (SLURM_JOB_ID is not set): run corral ray in an sbatch "
            "script or under salloc",
        ),
        (("--timeout", "0", "--", "true"), IN_JOB, "--timeout wants a positive number"),
        (("--ray-args=--num-cpus=64", "--", "true"), IN_JOB, "--ray-args: --num-cpus is set"),
        (("--head-args", "--port 6379", "--", "true"), IN_JOB, "--head-args: --port is set"),
        ((), IN_JOB, "which command is the driver?"),
    ],
    ids=[
        "outside an allocation",
        "bad timeout",
        "reserved ray arg",
        "reserved head arg",
        "no driver",
    ],
)
def test_refused_before_anything_starts(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    done = corral_ray(*args, env=env)
    assert done.returncode == 1, done
    assert done.stderr.startswith(f"corral ray: error: {message}"), done.stderr
    assert done.stdout == ""


def test_a_missing_ray_executable_is_named(tmp_path: Path) -> None:
    done = corral_ray("--", "true", env={**IN_JOB, "PATH": _path_with(tmp_path, None)})
    assert done.returncode == 1
    assert done.stderr == (
        "corral ray: error: ray: command not found on PATH: install Ray where the job runs "
        "(pip install ray)\n"
    )


def test_a_ray_that_is_not_a_python_script_is_refused(tmp_path: Path) -> None:
    path = _path_with(tmp_path, "#!/bin/sh\nexit 0\n")
    done = corral_ray("--", "true", env={**IN_JOB, "PATH": path})
    assert (
        done.stderr == f"corral ray: error: cannot tell which Python runs {path}/ray: "
        "its first line names none\n"
    )


def test_a_driver_that_cannot_be_found_is_named(tmp_path: Path) -> None:
    path = _path_with(tmp_path, f"#!{sys.executable}\n")
    done = corral_ray("--", "no-such-driver", "x", env={**IN_JOB, "PATH": path})
    assert done.returncode == 1
    assert done.stderr == "corral ray: error: no-such-driver: command not found\n"


def test_help_says_what_it_does() -> None:
    done = corral_ray("--help", env={})
    assert done.returncode == 0
    assert done.stdout.startswith("Usage: corral ray [--timeout SECONDS]")
