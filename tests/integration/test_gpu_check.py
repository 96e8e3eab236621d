"""The check script for a real NVIDIA machine (tests/gpu_check.py), run here against the
fake NVML, so that a change to what the cluster prints cannot break it unseen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.unit.test_gpu_probe import _build

SCRIPT = Path(__file__).resolve().parent.parent / "gpu_check.py"


def test_the_gpu_check_passes_on_the_fake_nvml(tmp_path: Path) -> None:
    library = _build(tmp_path)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--fake-nvml", library, "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "gpu_check: OK:" in done.stdout
