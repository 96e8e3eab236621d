"""The MPI program of the MPI tests and bench/mpi.py (mpi_allreduce.c), built with one of
Debian's MPI compilers, and what its ranks print, read back."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).with_name("mpi_allreduce.c")
#: Debian's names for each implementation's compiler wrapper (``mpicc`` is an alternative).
COMPILERS = {"mpich": "mpicc.mpich", "openmpi": "mpicc.openmpi"}
LINE = re.compile(r"rank=(\d+) size=(\d+) sum=(\d+) node=(\S+) host=(\S+)")


def build(implementation: str, directory: Path) -> Path:
    """The program built against ``implementation`` (mpich or openmpi) in ``directory``;
    a skip where that compiler is missing, but a failure under CI (``$CI``), whose
    .ci/run installs both."""
    compiler = shutil.which(COMPILERS[implementation])
    if compiler is None:
        if os.environ.get("CI"):
            raise AssertionError(f"{COMPILERS[implementation]} is missing (.ci/run installs it)")
        pytest.skip(f"{COMPILERS[implementation]} is not installed")
    program = directory / f"allreduce-{implementation}"
    subprocess.run([compiler, "-O1", "-o", str(program), str(SOURCE)], check=True, timeout=60)
    program.chmod(0o755)
    return program


def ranks(output: str) -> dict[int, tuple[int, int, str]]:
    """Each rank's (size, sum, node) from the program's lines."""
    found = {}
    for match in LINE.finditer(output):
        found[int(match[1])] = (int(match[2]), int(match[3]), match[4])
    return found
