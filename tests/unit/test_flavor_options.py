"""--prefer and --gres alternatives as the clients take them: sbatch, salloc, srun (a new
job, and a step) and slurmrestd's job description (issue 18, point 2)."""

from __future__ import annotations

from typing import Any

import pytest

from cli import salloc
from cli.allocation import JOB_OPTIONS
from cli.options import HONOURED
from cli.sbatch.options import TABLE as SBATCH
from cli.sbatch.settings import CLI, Settings
from cli.sbatch.spec import Script, build
from cli.srun.launch import TABLE as SRUN
from cli.srun.step_options import check
from restd.jobs import spec_from_description

SCRIPT = Script("#!/bin/sh\ntrue\n", "/work/job.sh", [], wrapped=False)


def sbatch_spec(*options: tuple[str, str]) -> dict[str, Any]:
    settings = Settings()
    for key, text in options:
        settings.apply(key, text, CLI)
    return build(settings, SCRIPT, cwd="/work", environ={}, command_line=[])


def test_sbatch_sends_prefer_and_the_gres_alternatives_as_given() -> None:
    spec = sbatch_spec(("prefer", "nvlink&h100"), ("gres", "gpu:h100:8|gpu:a100:8"))
    assert (spec["prefer"], spec["gres"]) == ("nvlink&h100", "gpu:h100:8|gpu:a100:8")


@pytest.mark.parametrize("table", [SBATCH, salloc.TABLE, SRUN], ids=["sbatch", "salloc", "srun"])
def test_prefer_is_honoured_by_every_client(table: Any) -> None:
    assert table.by_long["prefer"].use == HONOURED


def test_salloc_and_srun_pass_prefer_to_their_new_job() -> None:
    assert "prefer" in JOB_OPTIONS


def test_prefer_in_a_step_is_warned_about() -> None:
    """Inside an allocation the step runs on the job's nodes: --prefer has no effect,
    which srun says rather than dropping it."""
    env = {"SLURM_JOB_ID": "7"}
    assert check({"prefer": "nvlink"}, 7, env) == [
        "srun: warning: --prefer=nvlink has no effect in a job step: job 7's prefer applies"
    ]


def test_slurmrestd_takes_prefer_and_alternatives_in_tres_per_node() -> None:
    desc = {
        "environment": ["A=1"],
        "prefer": "nvlink",
        "tres_per_node": "gres/gpu:h100:8|gres/gpu:a100:8",
    }
    spec = spec_from_description(desc, "#!/bin/sh\ntrue\n", "/home/x", "restd", [])
    assert (spec["prefer"], spec["gres"]) == ("nvlink", "gpu:h100:8|gpu:a100:8")
