"""SchedulerType and SchedulerParameters as the scheduling loop reads them."""

from __future__ import annotations

import pytest

from controller.core import BackfillParams
from controller.schedparams import scheduler_settings
from corral.config import ConfigError
from tests.unit.scenario import slurm_conf


def test_defaults_are_slurms() -> None:
    settings = scheduler_settings(slurm_conf())
    assert settings.backfill == BackfillParams(
        window=86400, resolution=60, max_job_test=500, max_job_user=0, easy=False
    )
    assert (settings.bf_interval, settings.default_queue_depth, settings.sched_interval) == (
        30,
        100,
        60,
    )


@pytest.mark.parametrize(
    ("lines", "backfill"),
    [
        (["SchedulerType=sched/builtin"], None),
        (["SchedulerParameters=bf_interval=-1"], None),
        (
            ["SchedulerParameters=bf_window=60,bf_resolution=30,bf_job_part_count_reserve=1"],
            BackfillParams(window=3600, resolution=30, easy=True),
        ),
        (["SchedulerParameters=bf_continue,bf_max_job_user=2"], BackfillParams(max_job_user=2)),
    ],
    ids=["builtin", "bf-off", "window-resolution-easy", "continue-and-per-user"],
)
def test_parameters(lines: list[str], backfill: BackfillParams | None) -> None:
    assert scheduler_settings(slurm_conf(*lines)).backfill == backfill


@pytest.mark.parametrize(
    "line",
    [
        "SchedulerType=sched/wiki",
        "SchedulerParameters=bf_window=abc",
        "SchedulerParameters=bf_resolution=0",
        "SchedulerParameters=bf_job_part_count_reserve=3",
        "SchedulerParameters=default_queue_depth=0",
    ],
)
def test_bad_values_are_refused_with_the_key(line: str) -> None:
    with pytest.raises(
        ConfigError, match=r"slurm.conf:\d+: bad (SchedulerType|SchedulerParameters)"
    ):
        scheduler_settings(slurm_conf(line))
