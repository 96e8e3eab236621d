"""A ``--dependency`` list, checked and resolved once into job references.

Grammar (sbatch.1): items joined by ``,`` (all must hold) or ``?`` (any);
an item is ``type:id[:id...]`` with ``after`` ids allowing ``+minutes``,
``singleton``, or a bare id meaning ``afterany``. An id names a job or a
whole array (``123``), one task (``123_4``) or all tasks (``123_*``).
``expand:id`` (Slurm's job expansion, ``controller/expansion.py``) names one job,
by its plain id: Slurm refuses a second one, and an array task cannot be expanded.

Why resolve: the scheduling pass asks every pending job's dependencies every
cycle. Re-reading a 120 KB list of ids each time, and scanning every job for
each id, made one user's submission cost the whole controller seconds per
pass. A job therefore carries its list as ``Deps`` (numbers, not text), made
when the text is set (submission, ``scontrol update``, journal load), and the
pass looks each reference up by id (``controller/core/dependency.py``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

TYPES = ("after", "afterany", "afterok", "afternotok", "aftercorr", "expand", "singleton")

#: ``Ref.task`` for ``123_*``: every task of the array.
ALL_TASKS = -1


@dataclass(frozen=True, slots=True)
class Ref:
    """One id of a dependency item: a job or whole array, one task, or all tasks."""

    job_id: int
    task: int | None = None  # None: the job (or the whole array); ALL_TASKS: ``_*``
    delay: int = 0  # ``after:id+minutes``


#: How plain job ids are packed in ``Item.ids``: 8 bytes each.
_PACKED = "Q"


@dataclass(frozen=True, slots=True)
class Item:
    """One ``type:id[:id...]`` item of a list.

    Plain job ids (the bulk of a long list) are packed 8 bytes each, so that a
    120 KB list costs about as much memory again as its text, not a Python
    object per id; task ids, delays and ids too large to pack are ``Ref``.
    """

    kind: str
    ids: bytes = b""
    refs: tuple[Ref, ...] = ()

    def references(self) -> Iterator[tuple[int, int | None, int]]:
        """Every reference as (job id, task or None or ALL_TASKS, delay in minutes)."""
        for job_id in memoryview(self.ids).cast("Q"):  # as _PACKED
            yield job_id, None, 0
        for ref in self.refs:
            yield ref.job_id, ref.task, ref.delay


@dataclass(frozen=True, slots=True)
class Deps:
    """A resolved dependency list; ``text`` is what it was resolved from."""

    text: str
    any_of: bool = False  # ``?`` joins the items: one satisfied item is enough
    items: tuple[Item, ...] = ()
    valid: bool = True  # False: the text does not parse; it can never be satisfied


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _check_id(ident: str, kind: str) -> None:
    """``123``, ``123_4``, ``123_*``, and for ``after`` a ``+minutes`` delay."""
    base, plus, delay = ident.partition("+")
    if plus and (kind != "after" or not _digits(delay)):
        raise ValueError(f"bad delay in {ident!r}")
    head, underscore, task = base.partition("_")
    if not _digits(head) or (underscore and task != "*" and not _digits(task)):
        raise ValueError(f"bad job id {ident!r}")


def parse(text: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """Split into the joiner (``,`` or ``?``) and ``(type, ids)`` items; ValueError if bad.

    Everything ``resolve`` later reads is checked here, so a stored
    dependency can never make a scheduling pass fail.
    """
    text = text.strip()
    if not text or text == "0":
        return ",", []
    if "," in text and "?" in text:
        raise ValueError("mixed separators")
    joiner = "?" if "?" in text else ","
    items: list[tuple[str, list[str]]] = []
    for raw in text.split(joiner):
        kind, _, rest = raw.partition(":")
        kind = kind.strip().lower()
        if not rest and kind and (kind[0].isdigit() or kind[0] == "_"):
            _check_id(kind, "afterany")  # a bare id is the old form of afterany
            items.append(("afterany", [kind]))
            continue
        matches = [t for t in TYPES if t == kind] or [t for t in TYPES if t.startswith(kind)]
        if not kind or len(matches) != 1:
            raise ValueError(f"unknown dependency type {kind!r}")
        kind = matches[0]
        ids = [i for i in rest.split(":") if i] if rest else []
        if (kind == "singleton") != (not ids):
            raise ValueError("bad dependency ids")
        for ident in ids:
            _check_id(ident, kind)
        if kind == "expand" and (len(ids) != 1 or not _digits(ids[0])):
            raise ValueError("expand names one job")
        items.append((kind, ids))
    if sum(kind == "expand" for kind, _ in items) > 1:
        raise ValueError("expand names one job")
    return joiner, items


def expanding(deps: Deps | None) -> int:
    """The job ``deps`` asks to expand (``expand:id``); 0 when none."""
    for item in deps.items if deps else ():
        if item.kind == "expand":
            return next(job_id for job_id, _, _ in item.references())
    return 0


def _ref(ident: str) -> Ref:
    base, _, delay = ident.partition("+")
    head, underscore, task = base.partition("_")
    index = None if not underscore else ALL_TASKS if task == "*" else int(task)
    return Ref(int(head), index, int(delay or 0))


def resolve(text: str) -> Deps:
    """``text`` as references; a text that does not parse resolves to an invalid ``Deps``."""
    try:
        joiner, items = parse(text)
    except ValueError:
        return Deps(text, valid=False)
    return Deps(text, joiner == "?", tuple(_item(kind, ids) for kind, ids in items))


def _item(kind: str, idents: list[str]) -> Item:
    plain = array(_PACKED)
    refs = []
    for ident in idents:
        if ident.isdigit() and int(ident) < 1 << 64:
            plain.append(int(ident))
        else:
            refs.append(_ref(ident))
    return Item(kind, plain.tobytes(), tuple(refs))
