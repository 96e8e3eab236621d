"""controller.bounds: every text of a submission has a ceiling, refused in Slurm's words."""

from __future__ import annotations

from typing import Any

import pytest
from scenario import slurm_conf

from controller import bounds, jobspec
from corral import errors, ratelimit
from corral.errors import SlurmError

CONF = slurm_conf()
SMALL = slurm_conf("SchedulerParameters=max_script_size=100")


def _refused(spec: dict[str, Any], conf: Any = CONF) -> int:
    with pytest.raises(SlurmError) as refused:
        bounds.check_submission(jobspec.from_fields(spec), conf)
    assert refused.value.message == "Pathname of a file, directory or other parameter too long"
    return refused.value.code


def test_max_script_size_defaults_to_slurms_4_mib_and_sizes_the_request_limit() -> None:
    assert ratelimit.max_script_size(CONF) == 4 << 20
    assert ratelimit.max_script_size(SMALL) == 100
    assert ratelimit.from_config(CONF).max_frame == 13 << 20
    assert ratelimit.from_config(SMALL).max_frame == 300 + (1 << 20)


def test_a_script_at_the_ceiling_passes_and_one_byte_more_is_refused() -> None:
    bounds.check_submission(jobspec.from_fields({"script": "x" * 100}), SMALL)
    assert _refused({"script": "x" * 101}, SMALL) == errors.ESLURM_PATHNAME_TOO_LONG
    assert _refused({"script": "é" * 60}, SMALL)  # bytes, not characters


@pytest.mark.parametrize(
    "spec",
    [
        {"environment": {"A": "x" * 100}},
        {"argv": ["x" * 60, "y" * 60]},
        {"array": "1," * 2049},
        {"dependency": "afterok:" + "1:" * 65536},
        {"name": "n" * 1025},
        {"work_dir": "/" * 4097},
    ],
    ids=["environment", "argv", "array", "dependency", "name", "path"],
)
def test_each_text_has_its_ceiling(spec: dict[str, Any]) -> None:
    assert _refused(spec, SMALL) == errors.ESLURM_PATHNAME_TOO_LONG


def test_scontrol_update_of_a_dependency_is_checked_as_a_submission() -> None:
    assert bounds.check_dependency("0") == ""
    assert bounds.check_dependency("afterok:12") == "afterok:12"
    with pytest.raises(SlurmError) as bad:
        bounds.check_dependency("afterok:abc")
    assert bad.value.code == errors.ESLURM_DEPENDENCY
    with pytest.raises(SlurmError) as long:
        bounds.check_dependency("afterok:" + "1:" * 65536)
    assert long.value.code == errors.ESLURM_PATHNAME_TOO_LONG
