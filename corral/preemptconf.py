"""slurm.conf's preemption settings, read as Slurm documents them.

``PreemptType`` chooses who may preempt whom; ``PreemptMode`` (cluster-wide,
and per partition) what is done to a victim: CANCEL, REQUEUE or SUSPEND it,
or OFF (never a victim), with ``WITHIN`` letting jobs of one QOS preempt each
other by priority. ``GANG`` turns on time-slicing of the jobs that share CPUs
in partitions with ``OverSubscribe=FORCE`` (every ``SchedulerTimeSlice``
seconds, controller/gang.py) and lets suspended victims be resumed; as in
Slurm it is a cluster-wide word, and SUSPEND in slurm.conf needs it there.
``PreemptExemptTime`` is the run time before a job may be a victim at all,
and ``PreemptParameters=send_user_signal`` sends a victim's own ``--signal``
instead of SIGTERM at the start of its GraceTime.

Everything that is not one of Slurm's words, and SUSPEND or a partition's
GANG without GANG in slurm.conf's PreemptMode, is refused with its file and
line.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral import timefmt
from corral.confsyntax import NOWHERE, ConfigError, Where

__all__ = [
    "MODES",
    "TIME_SLICE",
    "PreemptConfig",
    "exempt_seconds",
    "grace_seconds",
    "mode",
    "parameters",
    "time_slice",
]

#: What a victim's mode may be.
MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND")
#: SchedulerTimeSlice's default, seconds (Slurm's).
TIME_SLICE = 30
#: PreemptParameters Corral honours.
_PARAMETERS = ("send_user_signal",)
#: The rest of Slurm's PreemptParameters, refused: each would change who is preempted.
_SLURM_PARAMETERS = (
    "min_exempt_priority",
    "reclaim_licenses",
    "reorder_count",
    "strict_order",
    "strict_suspend",
    "suspend_grace_time",
    "youngest_first",
)


@dataclass(frozen=True, slots=True)
class PreemptConfig:
    """The cluster-wide preemption settings besides PreemptType and PreemptMode."""

    within: bool = False  # PreemptMode=...,WITHIN
    exempt_time: int = 0  # PreemptExemptTime, seconds (0: none)
    send_user_signal: bool = False  # PreemptParameters=send_user_signal
    gang: bool = False  # PreemptMode=...,GANG: time-slicing, and suspended victims resumed
    time_slice: int = TIME_SLICE  # SchedulerTimeSlice, seconds


def mode(text: str, where: Where, *, owner: str = "", gang: bool = True) -> tuple[str, bool, bool]:
    """A PreemptMode value as (OFF, CANCEL, REQUEUE or SUSPEND; whether WITHIN and
    whether GANG are among its words).

    ``owner`` names a partition (whose mode may not say WITHIN); ``gang``
    whether slurm.conf's own PreemptMode says GANG, which SUSPEND needs (Slurm:
    the gang scheduler resumes suspended jobs).
    """
    chosen = "OFF"
    within = has_gang = False
    words = [w.strip().upper() for w in text.split(",") if w.strip()]
    for word in words:
        if word in MODES:
            chosen = word
        elif word == "WITHIN" and owner:
            raise ConfigError(
                *where,
                "PreemptMode=WITHIN is for slurm.conf's PreemptMode and QOS, not a partition",
            )
        elif word == "WITHIN":
            within = True
        elif word == "GANG":
            has_gang = True
        elif word != "PRIORITY":
            raise ConfigError(
                *where,
                f"bad PreemptMode value '{word}': "
                "use OFF, CANCEL, REQUEUE, SUSPEND, GANG or WITHIN",
            )
    if not owner:
        gang = has_gang
    for word in ("SUSPEND", "GANG"):
        if word in words and not gang:
            raise ConfigError(
                *where, f"PreemptMode={word} needs GANG in slurm.conf's PreemptMode too"
            )
    return chosen, within, has_gang


def time_slice(text: str, where: Where) -> int:
    """SchedulerTimeSlice: whole seconds, 1 to 65533 (Slurm's lowest is 5; a shorter
    slice is allowed here, for tests and small demonstrations)."""
    value = text.strip()
    if not value.isdigit() or not 1 <= int(value) <= 65533:
        raise ConfigError(*where, f"bad SchedulerTimeSlice value '{text}': seconds, 1 to 65533")
    return int(value)


def exempt_seconds(text: str, where: Where) -> int:
    """PreemptExemptTime in seconds: Slurm's time formats, ``-1`` (none) as 0."""
    value = text.strip()
    if value in ("-1", "0", ""):
        return 0
    try:
        return timefmt.parse_seconds(value)
    except ValueError as exc:
        raise ConfigError(*where, f"bad PreemptExemptTime value '{text}': not a time") from exc


def grace_seconds(text: str, where: Where) -> int:
    """A partition's GraceTime: whole seconds, 0 or more."""
    value = text.strip()
    if not value.isdigit():
        raise ConfigError(*where, f"bad GraceTime value '{text}': seconds, 0 or more")
    return int(value)


def parameters(text: str, where: Where) -> bool:
    """PreemptParameters: whether ``send_user_signal`` is set; other words refused."""
    send = False
    for word in (w.strip() for w in text.split(",") if w.strip()):
        name = word.partition("=")[0].lower()
        if name in _PARAMETERS:
            send = True
        elif name in _SLURM_PARAMETERS:
            raise ConfigError(*where, f"PreemptParameters={word} is not supported yet")
        else:
            raise ConfigError(*where, f"bad PreemptParameters value '{word}'")
    return send


def parse(settings: dict[str, tuple[str, Where]]) -> tuple[str, str, PreemptConfig]:
    """PreemptType, the cluster-wide PreemptMode (OFF, CANCEL, REQUEUE or SUSPEND) and
    the rest."""
    kind = "PREEMPT/NONE"
    if "PreemptType" in settings:
        text, where = settings["PreemptType"]
        kind = text.strip().upper()
        if kind not in ("PREEMPT/NONE", "PREEMPT/QOS", "PREEMPT/PARTITION_PRIO"):
            raise ConfigError(
                *where,
                f"bad PreemptType value '{text}': use PREEMPT/NONE, PREEMPT/QOS, "
                "PREEMPT/PARTITION_PRIO",
            )
    chosen, within, gang = mode(*settings.get("PreemptMode", ("OFF", NOWHERE)))
    exempt = settings.get("PreemptExemptTime")
    params = settings.get("PreemptParameters")
    slice_ = settings.get("SchedulerTimeSlice")
    extra = PreemptConfig(
        within=within,
        exempt_time=0 if exempt is None else exempt_seconds(*exempt),
        send_user_signal=False if params is None else parameters(*params),
        gang=gang,
        time_slice=TIME_SLICE if slice_ is None else time_slice(*slice_),
    )
    return kind, chosen, extra
