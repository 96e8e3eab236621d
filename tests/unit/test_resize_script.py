"""The scripts scontrol leaves after a change of a job's node count (Slurm's
``slurm_job_<id>_resize.sh`` and ``.csh``; issue 18, point 3)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cli import resizescript

JOB = {"job_id": 65542, "nodes": "icrm[1-2]", "cpus_per_node": [2, 2]}
INSIDE = {
    "SLURM_JOBID": "65542",
    "SLURM_NODELIST": "icrm[1-4]",
    "SLURM_JOB_NODELIST": "icrm[1-4]",
    "SLURM_NNODES": "4",
    "SLURM_JOB_NUM_NODES": "4",
    "SLURM_JOB_CPUS_PER_NODE": "2(x4)",
    "SLURM_TASKS_PER_NODE": "1(x4)",
}


def test_the_scripts_set_what_the_environment_has_as_slurm_writes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    told = resizescript.write(65542, JOB, INSIDE)
    assert told == [
        "To reset Slurm environment variables, execute",
        "  For bash or sh shells:  . ./slurm_job_65542_resize.sh",
        "  For csh shells:         source ./slurm_job_65542_resize.csh",
    ]
    assert (tmp_path / "slurm_job_65542_resize.sh").read_text() == (
        'export SLURM_NODELIST="icrm[1-2]"\n'
        'export SLURM_JOB_NODELIST="icrm[1-2]"\n'
        "export SLURM_NNODES=2\n"
        "export SLURM_JOB_NUM_NODES=2\n"
        'export SLURM_JOB_CPUS_PER_NODE="2(x2)"\n'
        "unset SLURM_TASKS_PER_NODE\n"
    )
    assert (tmp_path / "slurm_job_65542_resize.csh").read_text() == (
        'setenv SLURM_NODELIST "icrm[1-2]"\n'
        'setenv SLURM_JOB_NODELIST "icrm[1-2]"\n'
        "setenv SLURM_NNODES 2\n"
        "setenv SLURM_JOB_NUM_NODES 2\n"
        'setenv SLURM_JOB_CPUS_PER_NODE "2(x2)"\n'
        "unsetenv SLURM_TASKS_PER_NODE\n"
    )
    for name in ("slurm_job_65542_resize.sh", "slurm_job_65542_resize.csh"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o700


def test_only_the_variables_scontrol_has_are_written() -> None:
    sh, csh = resizescript.lines(JOB, {"SLURM_JOBID": "65542", "SLURM_NNODES": "4"})
    assert (sh, csh) == (["export SLURM_NNODES=2"], ["setenv SLURM_NNODES 2"])
