"""License lists as Slurm writes them: ``fluent:30,ansys`` (a name without a count is 1).

One grammar serves slurm.conf's ``Licenses=``, a job's ``-L/--licenses`` and
``scontrol update job N Licenses=``: names separated by commas, each optionally
followed by ``:count``. A name may carry ``@server`` (a remote license's
spelling). Slurm 22.05 has no ``|`` (OR) between licenses; such a name is simply
invalid. The controller checks the names of a job's request against the
configured ones (controller/admission.py); parsing here only checks the form, so
the CLI and the daemons share it.
"""

from __future__ import annotations

import functools
import re

#: (name, count) pairs in the order first written; a name given twice counts once, summed.
Licenses = tuple[tuple[str, int], ...]

_NAME = re.compile(r"[A-Za-z0-9_.@+\-]+")


class LicenseSyntaxError(ValueError):
    """A license list that is not ``name[:count][,name[:count]...]``."""


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Licenses:
    """``text`` as (name, count) pairs; ``""`` is none. Counts are whole numbers of at
    least 1 (Slurm refuses 0 and negatives); a repeated name's counts add up."""
    counts: dict[str, int] = {}
    if not text.strip():
        return ()
    for item in text.split(","):
        name, colon, count = item.strip().partition(":")
        if not _NAME.fullmatch(name):
            raise LicenseSyntaxError(f"invalid license name {name!r}")
        if colon and not count.isdigit():
            raise LicenseSyntaxError(f"invalid count for license {name}: {count!r}")
        number = int(count) if colon else 1
        if number < 1:
            raise LicenseSyntaxError(f"invalid count for license {name}: {count}")
        counts[name] = counts.get(name, 0) + number
    return tuple(counts.items())


def format_licenses(licenses: Licenses) -> str:
    """The list back as text, every count written: ``fluent:2,ansys:1``."""
    return ",".join(f"{name}:{count}" for name, count in licenses)


def canonical(text: str) -> str:
    """``text`` in the one spelling jobs keep and show (``parse`` then ``format``)."""
    return format_licenses(parse(text))
