"""``--sched-params``: the SchedulerParameters a backfill replay runs with.

A replay has no slurm.conf, so the few ``bf_*`` keys that shape the core's
backfill pass are given on the command line, in slurm.conf's syntax
(``bf_resolution=1,bf_window=43200``) and with its ranges
(``corral.config.SCHEDULER_NUMBERS``); the rest keep Slurm's defaults
(``controller/schedparams.py``). Any other key is refused rather than ignored:
a replay must never look as if it honoured a setting it did not.
"""

from __future__ import annotations

from controller.core import BackfillParams
from controller.sim.errors import SimError
from corral.config import SCHEDULER_NUMBERS

#: The keys a replay applies, with the BackfillParams field and its unit in seconds.
KEYS = {
    "bf_window": ("window", 60),  # minutes in slurm.conf
    "bf_resolution": ("resolution", 1),
    "bf_max_job_test": ("max_job_test", 1),
    "bf_max_job_user": ("max_job_user", 1),
}
#: Set by --policy; accepted when it says the same.
RESERVE = "bf_job_part_count_reserve"


def backfill_params(text: str, policy: str) -> BackfillParams:
    """``text`` (``key=value,...``) over Slurm's defaults, for ``policy``'s backfill."""
    if policy == "fcfs":
        raise SimError("--sched-params shapes backfill: use --policy easy or conservative")
    easy = policy == "easy"
    defaults = BackfillParams()
    values = {field: getattr(defaults, field) for field, _ in KEYS.values()}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if key not in (*KEYS, RESERVE):
            known = ", ".join((*KEYS, RESERVE))
            raise SimError(f"--sched-params: {key!r} is not applied by a replay (known: {known})")
        lo, hi = SCHEDULER_NUMBERS[key]
        value = value.strip()
        if not sep or not value.isdigit() or not lo <= int(value) <= hi:
            raise SimError(f"bad SchedulerParameters value '{item}': use {lo} to {hi}")
        if key == RESERVE:
            if (int(value) == 1) != easy:
                raise SimError(f"--sched-params: {key}={value} contradicts --policy {policy}")
            continue
        field, unit = KEYS[key]
        values[field] = int(value) * unit
    return BackfillParams(
        window=values["window"],
        resolution=values["resolution"],
        max_job_test=values["max_job_test"],
        max_job_user=values["max_job_user"],
        easy=easy,
    )
