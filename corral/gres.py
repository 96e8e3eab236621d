"""Generic resources (GRES) as slurm.conf and ``--gres`` write them.

A node's ``Gres=gpu:a100:2,gpu:v100:2,craynetwork:4`` and a job's
``--gres=gpu:2,craynetwork:1`` (a count on each node) both become
``(name, type, count)`` items. The type is ``""`` when none is given, which
in a job's request means "any type". Counts take Slurm's suffixes (``k`` =
1024, ``kb`` = 1000, ... up to ``p``/``pb``).
"""

from __future__ import annotations

__all__ = ["Item", "format_items", "parse_node", "parse_request", "shown_type", "size_text"]

#: (name, type, count); type "" = untyped.
Item = tuple[str, str, int]

_SUFFIXES = {
    "": 1,
    "k": 1024,
    "kib": 1024,
    "kb": 1000,
    "m": 1024**2,
    "mib": 1024**2,
    "mb": 1000**2,
    "g": 1024**3,
    "gib": 1024**3,
    "gb": 1000**3,
    "t": 1024**4,
    "tib": 1024**4,
    "tb": 1000**4,
    "p": 1024**5,
    "pib": 1024**5,
    "pb": 1000**5,
}


def shown_type(kind: str) -> str:
    """The type an allocated item shows in TRES and GresUsed: a per-GPU pool's
    (``a100#1``, see ``controller.gpushare``) is its GPU's type, ``a100``."""
    return kind.partition("#")[0]


def size_text(count: int) -> str:
    """A count as ``Gres=`` lines write a size: ``14G`` for 14 GiB; counts under
    a MiB or not a whole number of the unit stay plain."""
    for suffix, unit in (("P", 1024**5), ("T", 1024**4), ("G", 1024**3), ("M", 1024**2)):
        if count >= unit and count % unit == 0:
            return f"{count // unit}{suffix}"
    return str(count)


def _number(text: str) -> int | None:
    """Slurm's ``_is_valid_number``: digits and an optional size suffix, else None."""
    digits = len(text) - len(text.lstrip("0123456789"))
    if not digits or not text[:digits].isascii():
        return None
    multiplier = _SUFFIXES.get(text[digits:].lower())
    return None if multiplier is None else int(text[:digits]) * multiplier


def _merge(items: list[Item]) -> tuple[Item, ...]:
    """Items with the same name and type added up, in first-seen order."""
    totals: dict[tuple[str, str], int] = {}
    for name, kind, count in items:
        totals[name, kind] = totals.get((name, kind), 0) + count
    return tuple((name, kind, count) for (name, kind), count in totals.items() if count)


def parse_request(text: str) -> tuple[Item, ...]:
    """A job's ``--gres``: ``name[:type][:count]`` items (count 1 by default), per node.

    Items may carry the ``gres/`` or ``gres:`` prefix Slurm's own clients add;
    zero counts are dropped, as in Slurm. ValueError if malformed.
    """
    items: list[Item] = []
    for raw in text.split(","):
        item = raw
        for prefix in ("gres/", "gres:"):
            if item.startswith(prefix):
                item = item[len(prefix) :]
        if not item:
            continue
        kind = ""
        count = 1
        cut = max(item.rfind(":"), item.rfind("="))
        name = item
        if cut >= 0:
            name, last = item[:cut], item[cut + 1 :]
            if not last:
                raise ValueError(f"bad GRES '{raw}': nothing after '{item[cut]}'")
            number = _number(last)
            if number is not None:
                count = number
            elif item[cut] == "=":
                raise ValueError(f"bad GRES '{raw}': count is not a number")
            else:
                kind = last
        elif _number(item) is not None:
            raise ValueError(f"bad GRES '{raw}': no name")
        if ":" in name:
            if kind:
                raise ValueError(f"bad GRES '{raw}': too many fields")
            name, kind = name.split(":", 1)
        if not name or "=" in name:
            raise ValueError(f"bad GRES '{raw}': no name")
        items.append((name, kind, count))
    return _merge(items)


def parse_node(text: str) -> tuple[Item, ...]:
    """A node's ``Gres=``: ``name[:type][:no_consume]:count`` items (count 1 by default).

    A socket or core binding suffix such as ``(S:0-1)`` is ignored, and so is
    ``no_consume`` (such a resource is counted like any other for now).
    ValueError if malformed.
    """
    items: list[Item] = []
    for raw in text.split(","):
        item = raw.split("(", 1)[0].strip()
        if not item or item.lower() == "(null)":
            continue
        parts = [p for p in item.split(":") if p.lower() != "no_consume"]
        count = 1
        number = _number(parts[-1]) if len(parts) > 1 else None
        if number is not None:
            count = number
            parts = parts[:-1]
        if len(parts) > 2 or not parts[0] or _number(parts[0]) is not None:
            raise ValueError(f"bad Gres '{raw}': use name[:type][:count]")
        items.append((parts[0], parts[1] if len(parts) == 2 else "", count))
    return _merge(items)


def format_items(items: tuple[Item, ...]) -> str:
    """``gpu:a100:2,craynetwork:1``: items as slurm.conf and scontrol write them."""
    return ",".join(f"{n}:{t}:{c}" if t else f"{n}:{c}" for n, t, c in items)
