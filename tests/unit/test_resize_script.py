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


def test_an_expansion_jobs_scripts_after_numnodes_0_are_slurm_22_05s() -> None:
    """What Slurm 22.05's scontrol wrote in a salloc (which sets SLURM_NPROCS and
    SLURM_NTASKS) after ``NumNodes=0``: no nodes, and the old task counts unset."""
    inside = {**INSIDE, "SLURM_NPROCS": "2", "SLURM_NTASKS": "2"}
    sh, csh = resizescript.lines({"nodes": "", "cpus_per_node": []}, inside)
    assert sh == [
        'export SLURM_NODELIST=""',
        'export SLURM_JOB_NODELIST=""',
        "export SLURM_NNODES=0",
        "export SLURM_JOB_NUM_NODES=0",
        'export SLURM_JOB_CPUS_PER_NODE=""',
        "unset SLURM_NPROCS",
        "unset SLURM_NTASKS",
        "unset SLURM_TASKS_PER_NODE",
    ]
    assert csh[-3:] == [
        "unsetenv SLURM_NPROCS",
        "unsetenv SLURM_NTASKS",
        "unsetenv SLURM_TASKS_PER_NODE",
    ]
