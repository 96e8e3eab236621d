"""SchedulerType and SchedulerParameters, as the scheduling loop applies them.

Slurm's meanings and defaults (slurm.conf(5)):

* ``SchedulerType=sched/backfill`` (default) runs backfill every
  ``bf_interval`` seconds (30; ``-1`` turns it off); ``sched/builtin`` never.
* ``bf_window`` (minutes, 1440), ``bf_resolution`` (seconds, 60),
  ``bf_max_job_test`` (500), ``bf_max_job_user`` (0 = no limit).
* ``bf_job_part_count_reserve=1``: only each partition's first waiting job
  reserves; the rest start now or wait (EASY backfill). Other values than 0
  and 1 are refused: Corral has no middle ground between the two.

Values out of range stop the controller (``corral.config`` checks them, with
the file and line, at start and at reconfigure).
* ``bf_continue`` is accepted and always in effect: a backfill pass here is
  one synchronous call over a snapshot, so it never stops half-way.
* ``default_queue_depth`` (100): the jobs an event-triggered main pass tries;
  every ``sched_interval`` seconds (60) a pass tries the whole queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core import BackfillParams
from corral.config import SlurmConfig


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    backfill: BackfillParams | None  # None: no backfill (sched/builtin, bf_interval=-1)
    bf_interval: int
    default_queue_depth: int
    sched_interval: int


def _number(conf: SlurmConfig, key: str, default: int) -> int:
    """A numeric parameter; ``corral.config`` checked it (``SCHEDULER_NUMBERS``)."""
    text = conf.scheduler_param(key)
    return default if text is None else int(text)


def scheduler_settings(conf: SlurmConfig) -> SchedulerSettings:
    """The loop's settings from ``conf``, whose values ``corral.config`` has checked."""
    kind = dict(conf.settings).get("SchedulerType", "sched/backfill").lower()
    interval = _number(conf, "bf_interval", 30)
    params = BackfillParams(
        window=_number(conf, "bf_window", 1440) * 60,
        resolution=_number(conf, "bf_resolution", 60),
        max_job_test=_number(conf, "bf_max_job_test", 500),
        max_job_user=_number(conf, "bf_max_job_user", 0),
        easy=_number(conf, "bf_job_part_count_reserve", 0) == 1,
    )
    enabled = kind == "sched/backfill" and interval > 0
    return SchedulerSettings(
        backfill=params if enabled else None,
        bf_interval=max(interval, 0),
        default_queue_depth=_number(conf, "default_queue_depth", 100),
        sched_interval=_number(conf, "sched_interval", 60),
    )
