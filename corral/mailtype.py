"""``--mail-type``: the job events a user asks to be mailed about, as Slurm spells them.

Why here: sbatch, salloc and srun check the value before they submit (Slurm's
``Invalid --mail-type specification``), restd takes the same words as a list,
and the controller reads the stored value to decide what to mail; one parser
keeps the three agreeing. The stored form is the canonical comma list in
Slurm's display order (what ``scontrol show job`` prints as ``MailType=``),
``""`` for none.
"""

from __future__ import annotations

#: Every type, in the order Slurm prints them (``MailType=INVALID_DEPEND,BEGIN,...``).
ORDER = (
    "INVALID_DEPEND",
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "TIME_LIMIT",
    "TIME_LIMIT_90",
    "TIME_LIMIT_80",
    "TIME_LIMIT_50",
    "STAGE_OUT",
    "ARRAY_TASKS",
)
#: What ``ALL`` stands for (sbatch(1)): not the time-limit warnings, nor ARRAY_TASKS.
ALL = frozenset({"BEGIN", "END", "FAIL", "INVALID_DEPEND", "REQUEUE", "STAGE_OUT"})
#: The share of the time limit each warning type is sent at, in percent.
TIME_LIMIT_SHARES = {"TIME_LIMIT_50": 50, "TIME_LIMIT_80": 80, "TIME_LIMIT_90": 90}


def parse(text: str) -> str:
    """The canonical form of a ``--mail-type`` value; ValueError if a word is unknown.

    Words are case-insensitive and comma-separated; ``NONE`` clears what came
    before it and ``ALL`` adds its set, as Slurm reads them.
    """
    chosen: set[str] = set()
    words = text.split(",")
    for word in words:
        upper = word.strip().upper()
        if upper == "NONE":
            chosen.clear()
        elif upper == "ALL":
            chosen |= ALL
        elif upper in ORDER:
            chosen.add(upper)
        else:
            raise ValueError(word)
    return ",".join(kind for kind in ORDER if kind in chosen)


def kinds(stored: str) -> frozenset[str]:
    """The types of a stored (canonical) value."""
    return frozenset(stored.split(",")) if stored else frozenset()


def display(stored: str) -> str:
    """``MailType=``'s value: the stored list, or ``NONE``."""
    return stored or "NONE"


#: slurmrestd's flag names (data_parser's JOB_MAIL_FLAGS) for each type.
REST_NAMES = {
    "BEGIN": "BEGIN",
    "END": "END",
    "FAIL": "FAIL",
    "REQUEUE": "REQUEUE",
    "TIME_LIMIT": "TIME=100%",
    "TIME_LIMIT_90": "TIME=90%",
    "TIME_LIMIT_80": "TIME=80%",
    "TIME_LIMIT_50": "TIME=50%",
    "STAGE_OUT": "STAGE_OUT",
    "ARRAY_TASKS": "ARRAY_TASKS",
    "INVALID_DEPEND": "INVALID_DEPENDENCY",
}
_FROM_REST = {rest: kind for kind, rest in REST_NAMES.items()}


def rest_flags(stored: str) -> list[str]:
    """A stored value as slurmrestd's ``mail_type`` flags."""
    return [REST_NAMES.get(kind, kind) for kind in stored.split(",")] if stored else []


def from_rest(flags: list[str]) -> str:
    """slurmrestd's ``mail_type`` flags as the canonical value; ValueError if unknown."""
    words = []
    for flag in flags:
        kind = _FROM_REST.get(flag.upper())
        if kind is None:
            raise ValueError(flag)
        words.append(kind)
    return parse(",".join(words)) if words else ""
