"""Node state names: sinfo's ``idle``/``drng``/``mix*``, scontrol's ``IDLE+DRAIN``.

The controller reports a base state and a list of flags. Slurm folds them
into one name whose precedence rules (drain beats allocated, ``*`` marks a
node that does not respond, ...) are encoded here, in compact (sinfo ``%t``)
and long (sinfo ``%T``) form, plus scontrol's complete ``BASE+FLAG`` form.
The numeric encoding is Slurm's, because sinfo orders its rows by it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

UNKNOWN, DOWN, IDLE, ALLOCATED, ERROR, MIXED, FUTURE = range(7)
BASE_MASK = 0xF

#: Base state names by value.
BASE_NAMES = ("UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE")

PERFCTRS = 1 << 4
RESERVED = 1 << 5
CLOUD = 1 << 7
RESUME = 1 << 8
DRAIN = 1 << 9
COMPLETING = 1 << 10
NO_RESPOND = 1 << 11
POWERED_DOWN = 1 << 12
FAIL = 1 << 13
POWERING_UP = 1 << 14
MAINT = 1 << 15
REBOOT_REQUESTED = 1 << 16
REBOOT_CANCEL = 1 << 17
POWERING_DOWN = 1 << 18
DYNAMIC_FUTURE = 1 << 19
REBOOT_ISSUED = 1 << 20
PLANNED = 1 << 21
INVALID_REG = 1 << 22
POWER_DOWN = 1 << 23
POWER_UP = 1 << 24
DYNAMIC_NORM = 1 << 26

#: Flag names in the order scontrol appends them (``IDLE+DRAIN+NOT_RESPONDING``).
FLAG_NAMES: dict[str, int] = {
    "CLOUD": CLOUD,
    "COMPLETING": COMPLETING,
    "DRAIN": DRAIN,
    "DYNAMIC_FUTURE": DYNAMIC_FUTURE,
    "DYNAMIC_NORM": DYNAMIC_NORM,
    "INVALID_REG": INVALID_REG,
    "FAIL": FAIL,
    "MAINTENANCE": MAINT,
    "POWER_DOWN": POWER_DOWN,
    "POWER_UP": POWER_UP,
    "PERFCTRS": PERFCTRS,
    "POWERED_DOWN": POWERED_DOWN,
    "REBOOT_REQUESTED": REBOOT_REQUESTED,
    "REBOOT_ISSUED": REBOOT_ISSUED,
    "RESERVED": RESERVED,
    "RESUME": RESUME,
    "NOT_RESPONDING": NO_RESPOND,
    "PLANNED": PLANNED,
    "POWERING_UP": POWERING_UP,
    "POWERING_DOWN": POWERING_DOWN,
}

# The one-character marks appended to a state name, first match wins.
_MARKS = (
    (MAINT, "$"),
    (REBOOT_ISSUED, "^"),
    (REBOOT_REQUESTED, "@"),
    (POWERING_UP, "#"),
    (POWERING_DOWN, "%"),
    (POWERED_DOWN, "~"),
    (POWER_DOWN, "!"),
    (NO_RESPOND, "*"),
)

# Word for each situation: (compact, long).
_WORDS = {
    "alloc": ("ALLOC", "ALLOCATED"),
    "boot": ("BOOT", "REBOOT"),
    "comp": ("COMP", "COMPLETING"),
    "down": ("DOWN", "DOWN"),
    "drained": ("DRAIN", "DRAINED"),
    "draining": ("DRNG", "DRAINING"),
    "fail": ("FAIL", "FAIL"),
    "failing": ("FAILG", "FAILING"),
    "future": ("FUTR", "FUTURE"),
    "idle": ("IDLE", "IDLE"),
    "mixed": ("MIX", "MIXED"),
    "perfctrs": ("NPC", "PERFCTRS"),
    "planned": ("PLND", "PLANNED"),
    "reserved": ("RESV", "RESERVED"),
    "resume": ("RESM", "RESUME"),
    "unknown": ("UNK", "UNKNOWN"),
}

# Long names of a lone flag on an UNKNOWN base (the compact form never uses them).
_LONE_FLAGS = {
    REBOOT_ISSUED: "REBOOT_ISSUED",
    REBOOT_CANCEL: "CANCEL_REBOOT",
    CLOUD: "CLOUD",
    POWER_DOWN: "POWER_DOWN",
    POWER_UP: "POWER_UP",
    POWERING_DOWN: "POWERING_DOWN",
    POWERED_DOWN: "POWERED_DOWN",
    POWERING_UP: "POWERING_UP",
}


def value(node: Mapping[str, Any]) -> int:
    """Slurm's numeric state of a NodeInfo dict; unknown flag names are ignored."""
    base = str(node["state"]).upper()
    number = BASE_NAMES.index(base) if base in BASE_NAMES else UNKNOWN
    for flag in node["state_flags"]:
        number |= FLAG_NAMES.get(str(flag).upper(), 0)
    return number


def _mark(state: int) -> str:
    for bit, mark in _MARKS:
        if state & bit:
            return mark
    return ""


def _name(state: int, form: int) -> str:
    """The state's name in ``form`` 0 (compact) or 1 (long), before lower-casing."""
    base = state & BASE_MASK
    busy = base in (ALLOCATED, MIXED)
    no_respond = "*" if state & NO_RESPOND else ""
    if state & INVALID_REG:
        return "INVAL"
    if state & MAINT and not (state & DRAIN or busy or base == DOWN):
        return "MAINT" + no_respond
    if state & (REBOOT_REQUESTED | REBOOT_ISSUED) and not busy:
        if state & REBOOT_ISSUED:
            return _WORDS["boot"][form] + "^"
        return _WORDS["boot"][form] + no_respond
    if state & DRAIN:
        word = "draining" if state & COMPLETING or busy else "drained"
        return _WORDS[word][form] + _mark(state)
    if state & FAIL:
        word = "failing" if state & COMPLETING or base == ALLOCATED else "fail"
        return _WORDS[word][form] + no_respond
    if form == 1 and state in _LONE_FLAGS:
        return _LONE_FLAGS[state]
    if base == DOWN:
        return _WORDS["down"][form] + _mark(state)
    if base == ALLOCATED:
        extra = "+" if state & COMPLETING else ""
        return _WORDS["alloc"][form] + (_mark(state) or extra)
    if state & COMPLETING:
        return _WORDS["comp"][form] + _mark(state)
    if base == IDLE:
        mark = _mark(state)
        if mark:
            return _WORDS["idle"][form] + mark
        for bit, word in ((PERFCTRS, "perfctrs"), (RESERVED, "reserved"), (PLANNED, "planned")):
            if state & bit:
                return _WORDS[word][form]
        return _WORDS["idle"][form]
    if base == MIXED:
        mark = _mark(state) or ("-" if state & PLANNED else "")
        return _WORDS["mixed"][form] + mark
    if base == FUTURE:
        return _WORDS["future"][form] + _mark(state)
    if state & RESUME:
        return _WORDS["resume"][form]
    if base == UNKNOWN:
        return _WORDS["unknown"][form] + no_respond
    return "?"


def compact(state: int) -> str:
    """sinfo's STATE (``%t``): ``idle``, ``drng``, ``mix*``..."""
    return _name(state, 0).lower()


def long_name(state: int) -> str:
    """sinfo's long STATE (``%T``): ``idle``, ``draining``, ``allocated+``..."""
    return _name(state, 1).lower()


def complete(state: int) -> str:
    """scontrol's ``State=``: the base name and every flag, ``IDLE+DRAIN``."""
    base = state & BASE_MASK
    text = BASE_NAMES[base] if base < len(BASE_NAMES) else "INVALID"
    for name, bit in FLAG_NAMES.items():
        if state & bit:
            text += "+" + name
    return text


#: What ``sinfo -t`` names match: (mask-or-base, kind). Kinds: base, flag, drain,
#: draining, drained, allocated.
_FILTER_WORDS = (
    ("PLANNED", PLANNED, "flag"),
    ("PLND", PLANNED, "flag"),
    ("DRAIN", DRAIN, "drain"),
    ("DRAINED", DRAIN | IDLE, "drained"),
    ("RESV", RESERVED, "flag"),
    ("RESERVED", RESERVED, "flag"),
    ("PERFCTRS", PERFCTRS, "flag"),
    ("NPC", PERFCTRS, "flag"),
    ("DRAINING", DRAIN | ALLOCATED, "draining"),
    ("DRNG", DRAIN | ALLOCATED, "draining"),
    ("COMPLETING", COMPLETING, "flag"),
    ("COMP", COMPLETING, "flag"),
    ("NO_RESPOND", NO_RESPOND, "flag"),
    ("POWERING_DOWN", POWERING_DOWN, "flag"),
    ("POWRING_DN", POWERING_DOWN, "flag"),
    ("POWERED_DOWN", POWERED_DOWN, "flag"),
    ("POWERED_DN", POWERED_DOWN, "flag"),
    ("POWER_DOWN", POWER_DOWN, "flag"),
    ("POW_DN", POWER_DOWN, "flag"),
    ("POWERING_UP", POWERING_UP, "flag"),
    ("FAIL", FAIL, "flag"),
    ("MAINT", MAINT, "flag"),
    ("REBOOT", REBOOT_REQUESTED, "flag"),
    ("BOOT", REBOOT_REQUESTED, "flag"),
    ("REBOOT_ISSUED", REBOOT_ISSUED, "flag"),
    ("CLOUD", CLOUD, "flag"),
)


def filter_word(text: str) -> tuple[int, str] | None:
    """What one ``sinfo -t`` word selects, as (state, kind); None if it names nothing.

    Like Slurm, a word may be any prefix of a base state's compact or long name
    (``al`` is allocated), then of the other names, tried in Slurm's order.
    """
    if not text:
        return None
    upper = text.upper()
    for base in range(len(BASE_NAMES)):
        if _name(base, 0).startswith(upper) or _name(base, 1).startswith(upper):
            return base, "allocated" if base == ALLOCATED else "base"
    for word, state, kind in _FILTER_WORDS:
        if word.startswith(upper):
            return state, kind
    return None


def filter_listing() -> str:
    """The states ``sinfo -t`` accepts, as its error message lists them."""
    names = [_name(base, 1) for base in range(len(BASE_NAMES))]
    names += ["DRAIN", "DRAINED", "DRAINING", "NO_RESPOND", "RESERVED", "PERFCTRS"]
    names += [_name(bit, 1) for bit in (CLOUD, COMPLETING, POWERING_DOWN, POWERED_DOWN)]
    names += [_name(bit, 1) for bit in (POWER_DOWN, POWERING_UP, FAIL, MAINT)]
    names += [_name(bit, 1) for bit in (REBOOT_REQUESTED, REBOOT_ISSUED, PLANNED)]
    return ",".join(names).lower()


def matches(state: int, alloc_cpus: int, selected: tuple[int, str]) -> bool:
    """Whether a node in ``state`` with ``alloc_cpus`` busy is selected by one ``-t`` word."""
    wanted, kind = selected
    busy = state & COMPLETING or (state & BASE_MASK) in (ALLOCATED, MIXED)
    if kind == "drain":
        return bool(state & DRAIN)
    if kind == "draining":
        return bool(state & DRAIN) and bool(busy)
    if kind == "drained":
        return bool(state & DRAIN) and not busy
    if kind == "flag":
        return bool(state & wanted)
    if kind == "allocated":
        return alloc_cpus > 0
    return (state & BASE_MASK) == wanted
