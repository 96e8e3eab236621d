"""slurm.conf's preemption settings, read as Slurm documents them.

``PreemptType`` chooses who may preempt whom; ``PreemptMode`` (cluster-wide,
and per partition) what is done to a victim: CANCEL, REQUEUE or SUSPEND it,
or OFF (never a victim), with ``WITHIN`` letting jobs of one QOS preempt each
other by priority. ``GANG`` turns on time-slicing of the jobs that share CPUs
in partitions with ``OverSubscribe=FORCE`` (every ``SchedulerTimeSlice``
seconds, controller/gang.py) and lets suspended victims be resumed; as in
Slurm it is a cluster-wide word, and SUSPEND in slurm.conf needs it there.
``PreemptExemptTime`` is the run time before a job may be a victim at all.

``PreemptParameters`` (slurm.conf(5) of Slurm 24.11; 22.05 had some of its
words as ``SchedulerParameters=preempt_*``, which 24.11 still reads and so
does Corral):

* ``send_user_signal`` sends a victim's own ``--signal`` instead of SIGTERM
  at the start of its GraceTime.
* ``suspend_grace_time=N`` (default 2 s): every suspension, whether a
  preemption's, gang time-slicing's or ``scontrol suspend``'s, first sends
  SIGTSTP to the job's tasks so they can prepare, and stops them N seconds
  later, as slurmstepd does.
* ``min_exempt_priority=N``: only jobs whose priority is below N may be
  victims of PreemptType's preemption (Slurm's documented rule; its code
  lets a job of exactly N be one too).
* ``reclaim_licenses``: a job waiting for licenses may preempt the jobs it
  may preempt (PreemptType) that hold them (controller/core/preempt.py);
  without it such a job waits, as in Slurm.

The rest are refused, each with its reason (``_REFUSED``): Corral's victim
order (controller/core/preempt.py) already takes the victims that lose the
least work and keeps none the waiting job can start without, so Slurm's
reordering passes (``reorder_count``, ``strict_order``) have nothing to act
on and ``youngest_first`` would only undo the checkpoints; and no Slurm
release (17.11 to 25.11) documents or reads ``strict_suspend``, so it has no
meaning to implement.

Everything that is not one of Slurm's words, and SUSPEND or a partition's
GANG without GANG in slurm.conf's PreemptMode, is refused with its file and
line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from corral import timefmt
from corral.confsyntax import NOWHERE, ConfigError, Where

__all__ = [
    "MODES",
    "SUSPEND_GRACE",
    "TIME_SLICE",
    "PreemptConfig",
    "exempt_seconds",
    "grace_seconds",
    "mode",
    "parameters",
    "scheduler_parameters",
    "time_slice",
]

#: What a victim's mode may be.
MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND")
#: SchedulerTimeSlice's default, seconds (Slurm's).
TIME_SLICE = 30
#: PreemptParameters=suspend_grace_time's default, seconds (Slurm's).
SUSPEND_GRACE = 2
#: The largest number a PreemptParameters value may be (Slurm reads them as uint32).
_UINT32 = 2**32 - 2
#: The rest of Slurm's PreemptParameters, refused, and why.
_REORDER = (
    "Corral's victim search has no reordering passes (it drops each victim the job "
    "can start without)"
)
_REFUSED = {
    "reorder_count": _REORDER,
    "strict_order": _REORDER,
    "youngest_first": "Corral already takes the least run time since a job's start or "
    "last checkpoint before priority; start time alone would undo the checkpoints",
    "strict_suspend": "no Slurm release documents or reads it, so its meaning is unknown",
}
#: Slurm 22.05's SchedulerParameters spellings of PreemptParameters (24.11 reads both).
_SCHEDULER_SPELLINGS = {
    "preempt_send_user_signal": "send_user_signal",
    "preempt_youngest_first": "youngest_first",
    "preempt_strict_order": "strict_order",
    "preempt_reorder_count": "reorder_count",
}


@dataclass(frozen=True, slots=True)
class PreemptConfig:
    """The cluster-wide preemption settings besides PreemptType and PreemptMode."""

    within: bool = False  # PreemptMode=...,WITHIN
    exempt_time: int = 0  # PreemptExemptTime, seconds (0: none)
    send_user_signal: bool = False  # PreemptParameters=send_user_signal
    suspend_grace: int = SUSPEND_GRACE  # PreemptParameters=suspend_grace_time, seconds
    # PreemptParameters=min_exempt_priority: jobs of this priority or more are never
    # victims (None: no such bound).
    min_exempt_priority: int | None = None
    reclaim_licenses: bool = False  # PreemptParameters=reclaim_licenses
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


def _count(word: str, where: Where) -> int:
    """The whole number of a ``name=N`` PreemptParameters word."""
    value = word.partition("=")[2].strip()
    if not value.isdigit() or int(value) > _UINT32:
        name = word.partition("=")[0]
        raise ConfigError(*where, f"bad PreemptParameters value '{word}': {name}=<number>")
    return int(value)


def _word(config: PreemptConfig, word: str, where: Where) -> PreemptConfig:
    """``config`` with one PreemptParameters word applied (refused: ConfigError)."""
    name = word.partition("=")[0].strip().lower()
    if name == "send_user_signal":
        return replace(config, send_user_signal=True)
    if name == "suspend_grace_time":
        return replace(config, suspend_grace=_count(word, where))
    if name == "min_exempt_priority":
        return replace(config, min_exempt_priority=_count(word, where))
    if name == "reclaim_licenses" and "=" not in word:
        return replace(config, reclaim_licenses=True)
    if name in _REFUSED:
        raise ConfigError(*where, f"PreemptParameters={word} is refused: {_REFUSED[name]}")
    raise ConfigError(*where, f"bad PreemptParameters value '{word}'")


def parameters(config: PreemptConfig, text: str, where: Where) -> PreemptConfig:
    """``config`` with PreemptParameters ``text`` applied; words Corral does not honour
    are refused with the reason."""
    for word in (w.strip() for w in text.split(",") if w.strip()):
        config = _word(config, word, where)
    return config


def scheduler_parameters(config: PreemptConfig, text: str, where: Where) -> PreemptConfig:
    """``config`` with SchedulerParameters' ``preempt_*`` words (Slurm 22.05's
    spellings) applied as their PreemptParameters; the other words are not
    preemption's."""
    for word in (w.strip() for w in text.split(",") if w.strip()):
        name, equals, value = word.partition("=")
        spelled = _SCHEDULER_SPELLINGS.get(name.strip().lower())
        if spelled is not None:
            config = _word(config, f"{spelled}{equals}{value}", where)
    return config


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
    slice_ = settings.get("SchedulerTimeSlice")
    extra = PreemptConfig(
        within=within,
        exempt_time=0 if exempt is None else exempt_seconds(*exempt),
        gang=gang,
        time_slice=TIME_SLICE if slice_ is None else time_slice(*slice_),
    )
    if "SchedulerParameters" in settings:
        extra = scheduler_parameters(extra, *settings["SchedulerParameters"])
    if "PreemptParameters" in settings:
        extra = parameters(extra, *settings["PreemptParameters"])
    return kind, chosen, extra
