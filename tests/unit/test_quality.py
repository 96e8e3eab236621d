"""The quality bar as tests: ruff-clean everywhere, mypy --strict on the pure core.

mypy's file list lives in pyproject.toml ([tool.mypy] files), so widening the
strict zone is a one-line change there.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.mark.parametrize(
    "args", [("check", "."), ("format", "--check", ".")], ids=["lint", "format"]
)
def test_ruff_clean(args: tuple[str, ...]) -> None:
    result = _tool("ruff", *args)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_on_the_pure_core() -> None:
    result = _tool("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
