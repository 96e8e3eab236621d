"""slurm.conf's preemption settings, read as Slurm documents them.

``PreemptType`` chooses who may preempt whom; ``PreemptMode`` (cluster-wide,
and per partition) what is done to a victim: CANCEL or REQUEUE it, or OFF
(never a victim), with ``WITHIN`` letting jobs of one QOS preempt each other
by priority. ``PreemptExemptTime`` is the run time before a job may be a
victim at all, and ``PreemptParameters=send_user_signal`` sends a victim's
own ``--signal`` instead of SIGTERM at the start of its GraceTime.

SUSPEND and GANG are not done yet: a mode naming them preempts nothing, with
a warning that says so, rather than stopping the daemon (a site's file with
them still starts). Everything else that is not one of Slurm's words is
refused with its file and line.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral import timefmt
from corral.confsyntax import NOWHERE, ConfigError, Where

__all__ = [
    "MODES",
    "PreemptConfig",
    "exempt_seconds",
    "grace_seconds",
    "mode",
    "parameters",
]

#: What a victim's mode may be, besides SUSPEND and GANG (not done yet).
MODES = ("OFF", "CANCEL", "REQUEUE")
_NOT_YET = ("SUSPEND", "GANG")
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


def mode(text: str, where: Where, warnings: list[str], *, owner: str = "") -> tuple[str, bool]:
    """A PreemptMode value as (OFF, CANCEL or REQUEUE; whether WITHIN is among its words).

    ``owner`` names a partition's line in the warning for SUSPEND or GANG.
    """
    chosen = "OFF"
    within = False
    for word in (w.strip().upper() for w in text.split(",") if w.strip()):
        if word in MODES:
            chosen = word
        elif word == "WITHIN" and owner:
            raise ConfigError(
                *where,
                "PreemptMode=WITHIN is for slurm.conf's PreemptMode and QOS, not a partition",
            )
        elif word == "WITHIN":
            within = True
        elif word in _NOT_YET:
            whose = f"{owner}'s jobs are" if owner else "jobs are"
            warnings.append(
                f"{where[0]}:{where[1]}: PreemptMode={word} is not supported yet: "
                f"{whose} not preempted"
            )
            return "OFF", False
        elif word != "PRIORITY":
            raise ConfigError(
                *where, f"bad PreemptMode value '{word}': use OFF, CANCEL, REQUEUE or WITHIN"
            )
    return chosen, within


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


def parse(
    settings: dict[str, tuple[str, Where]], warnings: list[str]
) -> tuple[str, str, PreemptConfig]:
    """PreemptType, the cluster-wide PreemptMode (OFF, CANCEL or REQUEUE) and the rest."""
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
    chosen, within = mode(*settings.get("PreemptMode", ("OFF", NOWHERE)), warnings)
    exempt = settings.get("PreemptExemptTime")
    params = settings.get("PreemptParameters")
    extra = PreemptConfig(
        within=within,
        exempt_time=0 if exempt is None else exempt_seconds(*exempt),
        send_user_signal=False if params is None else parameters(*params),
    )
    return kind, chosen, extra
