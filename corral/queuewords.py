"""The values of queues.conf's keys (corral.queueconf reads the lines and the tree).

Each reader takes the key, its value and where it was written, and returns the
value as the queue keeps it or raises a ConfigError naming the file and line,
worded as slurm.conf's errors are (``bad KEY value 'VALUE': why``). Resources
are sacctmgr's GrpTRES words, with ``corral.units`` reading the amounts, so a
queue's ``mem=256G`` is the MiB a GrpTRES limit would hold.
"""

from __future__ import annotations

import math

from corral import timefmt, units
from corral.confsyntax import ConfigError, Where, integer

__all__ = [
    "BORROW_WITHIN_COHORT",
    "PLAIN_RESOURCES",
    "QUEUEING_STRATEGY",
    "RECLAIM_WITHIN_COHORT",
    "WITHIN_QUEUE",
    "borrow_policy",
    "names",
    "resource_name",
    "resources",
    "span",
    "weight",
    "word",
]

WITHIN_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
BORROW_WITHIN_COHORT = ("Never", "LowerPriority")
#: Kueue's ClusterQueue queueingStrategy, its default first.
QUEUEING_STRATEGY = ("BestEffortFIFO", "StrictFIFO")
#: The TRES a queue divides besides GRES (sacctmgr's names).
PLAIN_RESOURCES = ("cpu", "mem", "node")


def resource_name(item: str, gres_types: frozenset[str]) -> str | None:
    """``item``'s TRES name as GrpTRES keeps it (lowercase), None if not a queue's resource."""
    name = item.lower()
    if name in PLAIN_RESOURCES:
        return name
    kind, slash, rest = name.partition("/")
    gres, colon, model = rest.partition(":")
    if kind != "gres" or not slash or gres not in gres_types or (colon and not model):
        return None
    return None if ":" in model else name


def resources(
    key: str, value: str, where: Where, gres_types: frozenset[str], *, unlimited: bool = False
) -> dict[str, int | None]:
    """A ``cpu=64,mem=256G,gres/gpu:a100=8`` list as {resource: amount}; memory in MiB.
    With ``unlimited``, ``-1`` is no limit (None), as in KAI."""
    found: dict[str, int | None] = {}
    for item in value.split(","):
        name_text, equals, amount = item.partition("=")
        bad = f"bad {key} value '{value}'"
        if not equals or not name_text or not amount:
            raise ConfigError(*where, f"{bad}: '{item}' is not RESOURCE=COUNT")
        name = resource_name(name_text, gres_types)
        if name is None:
            known = ", ".join([*PLAIN_RESOURCES, *(f"gres/{g}" for g in sorted(gres_types))])
            raise ConfigError(*where, f"{bad}: unknown resource '{name_text}' (known: {known})")
        if name in found:
            raise ConfigError(*where, f"{bad}: {name} given twice")
        if amount == "-1" and unlimited:
            found[name] = None
            continue
        if amount.startswith("-"):
            raise ConfigError(*where, f"{bad}: {name} is negative")
        if name != "mem" and not amount.isdecimal():
            raise ConfigError(*where, f"{bad}: '{amount}' is not a count")
        try:
            found[name] = units.tres_amount(name, amount)
        except ValueError:
            raise ConfigError(*where, f"{bad}: '{amount}' is not a size") from None
    return found


def names(key: str, value: str, where: Where, *, lower: bool) -> tuple[str, ...]:
    """A comma list of accounts, QOS or partitions, each once, in the file's order."""
    names = [name.lower() if lower else name for name in value.split(",")]
    if not all(names):
        raise ConfigError(*where, f"bad {key} value '{value}': an empty name")
    return tuple(dict.fromkeys(names))


def word(key: str, value: str, where: Where, words: tuple[str, ...]) -> str:
    """One of ``words`` in any case, in its own spelling."""
    for word in words:
        if value.lower() == word.lower():
            return word
    raise ConfigError(*where, f"bad {key} value '{value}': use {', '.join(words)}")


def span(key: str, value: str, where: Where) -> int:
    """A time in Slurm's format, to the second (a 30-second delay is not a minute)."""
    try:
        return timefmt.parse_seconds(value)
    except ValueError:
        raise ConfigError(*where, f"bad {key} value '{value}': not a time") from None


def weight(value: str, where: Where) -> float:
    """OverQuotaWeight: a share, so a finite number above 0."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ConfigError(*where, f"bad OverQuotaWeight value '{value}': must be above 0")
    return number


def borrow_policy(value: str, where: Where) -> tuple[str, int | None]:
    """``BorrowWithinCohort=LowerPriority[:threshold]`` as (policy, threshold)."""
    policy_text, colon, threshold = value.partition(":")
    policy = word("BorrowWithinCohort", policy_text, where, BORROW_WITHIN_COHORT)
    if not colon:
        return policy, None
    if policy == "Never":
        message = f"bad BorrowWithinCohort value '{value}': a threshold needs LowerPriority"
        raise ConfigError(*where, message)
    if not threshold.isdecimal():
        message = f"bad BorrowWithinCohort value '{value}': '{threshold}' is not a priority"
        raise ConfigError(*where, message)
    return policy, integer("BorrowWithinCohort", threshold, where)
