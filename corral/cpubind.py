"""``--cpu-bind`` (SLURM_CPU_BIND): its grammar, for srun and the controller alike.

``[{quiet|verbose},]{none|rank|threads|cores|sockets|ldoms|map_cpu:<list>|mask_cpu:<list>}``

``none`` leaves each task the job's CPUs on its node; the other types give each
task its own CPUs (``controller/cpubind.py``), which the node agent applies
before the task's exec. ``verbose`` makes each task report its mask on its
stderr, as Slurm's task/affinity does. A text Slurm's srun refuses raises
ValueError with srun's lines (the last is ``fatal``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "CpuBind", "parse"]

#: The binding types that take no list.
KINDS = ("none", "rank", "threads", "cores", "sockets", "ldoms")
_LISTS = ("map_cpu", "mask_cpu")
_SHORT = {"no": "none", "q": "quiet", "v": "verbose"}
_HEX = "0123456789abcdefABCDEF"
_FATAL = "fatal: Failed to parse --cpu-bind= values."


@dataclass(frozen=True, slots=True)
class CpuBind:
    """A parsed ``--cpu-bind``: ``kind`` "" when only a verbosity was given."""

    kind: str = ""
    items: tuple[int, ...] = ()  # map_cpu's CPU ids, mask_cpu's masks
    verbose: bool = False

    @property
    def binds(self) -> bool:
        """Whether each task gets CPUs of its own."""
        return self.kind not in ("", "none")


def _value(kind: str, word: str) -> bool:
    """Whether ``word`` continues a list of ``kind`` (a mask is hex, a CPU id decimal
    or ``0x`` hex)."""
    digits = word[2:] if word[:2].lower() == "0x" else word
    allowed = _HEX if kind == "mask_cpu" or digits is not word else "0123456789"
    return bool(digits) and all(c in allowed for c in digits.partition("*")[0])


def _numbers(kind: str, text: str) -> tuple[int, ...]:
    """A map or mask list: decimal or ``0x`` CPU ids, hex masks; ``*N`` repeats."""
    out: list[int] = []
    for item in text.split(","):
        value, star, repeat = item.partition("*")
        try:
            if kind == "mask_cpu":
                number = int(value.removeprefix("0x").removeprefix("0X"), 16)
            else:
                number = int(value, 16) if value[:2].lower() == "0x" else int(value, 10)
            times = int(repeat) if star else 1
        except ValueError:
            bad = next((c for c in value if not _value(kind, c)), value[:1])
            raise ValueError(
                f"error: Failed to validate number: {value}, the offending character is {bad}\n"
                + _FATAL
            ) from None
        out.extend([number] * max(times, 1))
    return tuple(out)


def parse(text: str) -> CpuBind:
    """``text`` as srun reads it: words separated by commas, where the numbers after
    ``map_cpu:``/``mask_cpu:`` continue its list (``verbose,map_cpu:0,2``)."""
    kind, verbose = "", False
    listed: list[str] = []
    for word in (w for w in text.split(",") if w):
        lower = word.lower()
        lower = _SHORT.get(lower, lower)
        name, _, rest = lower.partition(":")
        if listed and _value(kind, word):
            listed.append(word)
        elif lower in ("quiet", "verbose"):
            verbose = lower == "verbose"
        elif lower in KINDS:
            kind, listed = lower, []
        elif name in _LISTS:
            if not rest:
                raise ValueError(f'error: missing list for "--cpu-bind={name}:<list>"\n{_FATAL}')
            kind, listed = name, [word.partition(":")[2]]
        elif name in ("map_ldom", "mask_ldom", "rank_ldom", "boards"):
            raise ValueError(f"error: --cpu-bind={word} is not supported\n{_FATAL}")
        else:
            raise ValueError(f'error: unrecognized --cpu-bind argument "{word}"\n{_FATAL}')
    items = _numbers(kind, ",".join(listed)) if listed else ()
    return CpuBind(kind, items, verbose)
