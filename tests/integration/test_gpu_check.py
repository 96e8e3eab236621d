"""The check script for a real NVIDIA machine (tests/gpu_check.py), run here against the
fake NVML, so that a change to what the cluster prints cannot break it unseen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.test_gpu_probe import _build

SCRIPT = Path(__file__).resolve().parent.parent / "gpu_check.py"
#: The fake ``nvidia-cuda-mps-control``, so that the script's fraction checks run too.
FAKE_BIN = SCRIPT.parent / "fakes" / "bin"


def _check(tmp_path: Path, **env: str) -> str:
    library = _build(tmp_path)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--fake-nvml", library, "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "gpu_check: OK:" in done.stdout
    return done.stdout


def test_the_gpu_check_passes_on_the_fake_nvml(tmp_path: Path) -> None:
    out = _check(tmp_path)
    assert "PASS  two jobs, two GPUs" in out
    assert "SKIP  fractions by memory" in out  # two of the fake's GPUs are in MIG mode


def test_the_gpu_check_runs_a_fraction_under_mps(tmp_path: Path) -> None:
    """With whole GPUs only and the fake MPS control on PATH."""
    out = _check(
        tmp_path,
        FAKE_NVML_NO_MIG="1",
        PATH=f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
    )
    assert "PASS  fraction job runs under MPS" in out
    assert "PASS  MPS server stopped after the job" in out
