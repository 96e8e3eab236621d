"""The pure-Python twin of corral.nodeset.NodeSet: the same API over an int bitmask.

It is the reference the C-backed class is tested against (tests/unit/test_nodeset.py
runs random operation sequences on both and compares), so it favours the obvious
over the fast. It also owns what both classes share and what is not bit work:
argument checks and the range-string grammar, so the two cannot drift apart there.

Range strings: comma-separated items, each ``N`` or ``N-M`` (N <= M, inclusive),
ASCII decimal digits only, no spaces; ``""`` is the empty set. Items may overlap or
come in any order; ``str()`` always writes the canonical form (ascending, merged).
"""

from __future__ import annotations

from bisect import bisect_left
from operator import index as as_int

# Importing typing costs milliseconds this module cannot spend; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any, Self


def check_size(size: int) -> int:
    """The capacity as a plain int; a negative one is a ValueError."""
    size = as_int(size)
    if size < 0:
        raise ValueError(f"NodeSet size must be >= 0, not {size}")
    return size


def check_index(index: int, size: int) -> int:
    """``index`` as a plain int, or IndexError when it is not a node of a ``size`` set."""
    index = as_int(index)
    if not 0 <= index < size:
        raise IndexError(f"node index {index} out of range for a NodeSet of size {size}")
    return index


def parse_spec(spec: str, size: int) -> list[tuple[int, int]]:
    """The inclusive ``(first, last)`` runs of a range string, in the order written.

    A malformed string is a ValueError; an index past the capacity is an IndexError.
    """
    if not spec:
        return []
    runs = []
    for item in spec.split(","):
        first, dash, last = item.partition("-")
        if not (_is_number(first) and (_is_number(last) if dash else not last)):
            raise ValueError(f"malformed node range {item!r} in {spec!r}")
        lo = int(first)
        hi = int(last) if dash else lo
        if lo > hi:
            raise ValueError(f"descending node range {item!r} in {spec!r}")
        check_index(hi, size)
        runs.append((lo, hi))
    return runs


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def format_runs(runs: Iterable[tuple[int, int]]) -> str:
    """The range string of ascending, non-adjacent inclusive runs: ``0-3,7``."""
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)


INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def check_int(value: int, bounds: tuple[int, int], what: str) -> int:
    """``value`` as a plain int within ``bounds`` (inclusive), else OverflowError."""
    value = as_int(value)
    if not bounds[0] <= value <= bounds[1]:
        raise OverflowError(f"{what} {value} out of range")
    return value


def size_mismatch(left: int, right: int) -> ValueError:
    """The error for a two-set operation on sets of different capacities."""
    return ValueError(f"NodeSet sizes differ: {left} and {right}")


class NodeSetBase:
    """An immutable set of node indices ``0 <= i < size``; ``size`` is fixed at creation.

    Built from a range string (``NodeSet('0-3,7', size=16)``) or any iterable of
    indices. Operations return new sets. ``&``, ``|``, ``-``, ``^``, ``<=``, ``<``,
    ``>=``, ``>``, ``overlaps`` and ``isdisjoint`` need two sets of the same size
    (ValueError otherwise); ``==`` is simply False across sizes. An index outside
    ``0..size-1`` is an IndexError and a non-integer one a TypeError, ``in`` included:
    asking about a node the cluster does not have is a caller's bug, not a miss.

    What does no bit work is here, shared by this module's NodeSet and the C-backed
    corral.nodeset.NodeSet; a subclass stores the bits and provides ``overlaps``,
    ``_runs``, ``<=`` and ``<``. Sets of different subclasses never mix.
    """

    __slots__ = ("_size",)

    _size: int

    @property
    def size(self) -> int:
        """The capacity: the number of nodes the set ranges over, not its length."""
        return self._size

    def overlaps(self, other: Self) -> bool:
        """Whether the two sets share a node."""
        raise NotImplementedError

    def isdisjoint(self, other: Self) -> bool:
        """Whether the two sets share no node (``not overlaps``)."""
        return not self.overlaps(other)

    #: The NodeCounts and NodeClaims classes ``scan`` accepts (the same implementation's).
    _companions: tuple[type[Any], type[Any]]

    def scan(
        self,
        counts: Any,
        least: int,
        claims: Any = None,
        begin: int = 0,
        end: int = 0,
        start: int = 0,
        want: int | None = None,
    ) -> list[int]:
        """The scheduler's candidate scan: the indices ``i`` of this set, ascending
        from ``start``, with ``counts[i] >= least`` and, given ``claims``, no claim
        of ``i`` overlapping ``[begin, end)``; at most ``want`` of them (all: None).

        ``counts`` and ``claims`` are the same implementation's NodeCounts and
        NodeClaims, as long as the set's size (TypeError, ValueError otherwise);
        ``least`` is a 32-bit and ``begin``/``end`` 64-bit integers (OverflowError).
        """
        counts_type, claims_type = self._companions
        if not isinstance(counts, counts_type) or not isinstance(claims, (claims_type, type(None))):
            raise TypeError("scan takes its own implementation's NodeCounts and NodeClaims")
        want = self._size if want is None else as_int(want)
        start = as_int(start)
        if len(counts) != self._size:
            raise ValueError(
                f"NodeCounts of length {len(counts)} for a NodeSet of size {self._size}"
            )
        if claims is not None and claims.size != self._size:
            raise ValueError(f"NodeClaims of size {claims.size} for a NodeSet of size {self._size}")
        if not 0 <= start <= self._size:
            raise IndexError(f"scan start {start} out of range for a NodeSet of size {self._size}")
        if want < 0:
            raise ValueError(f"scan want must be >= 0, not {want}")
        return self._scan(counts, least, claims, begin, end, start, min(want, self._size - start))

    def _scan(
        self, counts: Any, least: int, claims: Any, begin: int, end: int, start: int, want: int
    ) -> list[int]:
        """``scan`` once its operands are checked (``0 <= want <= size - start``)."""
        raise NotImplementedError

    def _same_size(self, other: Self) -> Self:
        if other._size != self._size:
            raise size_mismatch(self._size, other._size)
        return other

    def _runs(self) -> Iterator[tuple[int, int]]:
        """The ascending, non-adjacent inclusive runs of the set."""
        raise NotImplementedError

    def __ge__(self, other: Self) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return other <= self

    def __gt__(self, other: Self) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return other < self

    def __str__(self) -> str:
        return format_runs(self._runs())

    def __repr__(self) -> str:
        return f"NodeSet({str(self)!r}, size={self._size})"


def _rebuild(spec: str, size: int) -> NodeSet:
    return NodeSet(spec, size=size)


class NodeSet(NodeSetBase):
    """The int-bitmask NodeSet: bit ``i`` of ``_mask`` is node ``i``."""

    __slots__ = ("_listed", "_mask")

    _mask: int
    _listed: list[int] | None

    def __init__(self, spec: str | Iterable[int] = "", *, size: int) -> None:
        self._size = check_size(size)
        mask = 0
        if isinstance(spec, str):
            for lo, hi in parse_spec(spec, self._size):
                mask |= ((1 << (hi - lo + 1)) - 1) << lo
        else:
            for index in spec:
                mask |= 1 << check_index(index, self._size)
        self._mask = mask
        self._listed = None

    @classmethod
    def full(cls, size: int) -> NodeSet:
        """Every node of a ``size`` cluster."""
        size = check_size(size)
        return cls._make((1 << size) - 1, size)

    @classmethod
    def _make(cls, mask: int, size: int) -> NodeSet:
        made = object.__new__(cls)
        made._mask = mask
        made._size = size
        made._listed = None
        return made

    def first(self) -> int | None:
        """The lowest index in the set, or None when it is empty."""
        mask = self._mask
        return (mask & -mask).bit_length() - 1 if mask else None

    def with_(self, index: int) -> NodeSet:
        """This set plus ``index``."""
        return self._make(self._mask | (1 << check_index(index, self._size)), self._size)

    def without(self, index: int) -> NodeSet:
        """This set minus ``index``."""
        return self._make(self._mask & ~(1 << check_index(index, self._size)), self._size)

    def copy(self) -> NodeSet:
        """An equal, distinct set."""
        return self._make(self._mask, self._size)

    def overlaps(self, other: NodeSet) -> bool:
        """Whether the two sets share a node."""
        return bool(self._mask & self._same_size(other)._mask)

    def _runs(self) -> Iterator[tuple[int, int]]:
        mask = self._mask
        while mask:
            lo = (mask & -mask).bit_length() - 1
            above = mask >> lo
            length = (above ^ (above + 1)).bit_length() - 1
            yield lo, lo + length - 1
            mask &= ~(((1 << length) - 1) << lo)

    def _scan(
        self,
        counts: NodeCounts,
        least: int,
        claims: NodeClaims | None,
        begin: int,
        end: int,
        start: int,
        want: int,
    ) -> list[int]:
        least = check_int(least, INT32, "least")
        begin, end = check_int(begin, INT64, "time"), check_int(end, INT64, "time")
        members = self._members
        values = counts._values
        spans = None if claims is None else claims._spans
        found: list[int] = []
        for i in members[bisect_left(members, start) :]:
            if len(found) == want:
                break
            if values[i] < least:
                continue
            if spans is not None and any(b < end and begin < e for b, e in spans.get(i, ())):
                continue
            found.append(i)
        return found

    @property
    def _members(self) -> list[int]:
        """The indices in ascending order, listed once per set (sets never change)."""
        members = self._listed
        if members is None:
            members = self._listed = list(self)
        return members

    def __contains__(self, index: int) -> bool:
        return bool(self._mask >> check_index(index, self._size) & 1)

    def __len__(self) -> int:
        return self._mask.bit_count()

    def __bool__(self) -> bool:
        return self._mask != 0

    def __iter__(self) -> Iterator[int]:
        mask = self._mask
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def __and__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._make(self._mask & self._same_size(other)._mask, self._size)

    def __or__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._make(self._mask | self._same_size(other)._mask, self._size)

    def __sub__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._make(self._mask & ~self._same_size(other)._mask, self._size)

    def __xor__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._make(self._mask ^ self._same_size(other)._mask, self._size)

    def __le__(self, other: NodeSet) -> bool:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._mask & ~self._same_size(other)._mask == 0

    def __lt__(self, other: NodeSet) -> bool:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self <= other and self._mask != other._mask

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._size == other._size and self._mask == other._mask

    def __hash__(self) -> int:
        return hash((self._size, self._mask))

    def __reduce__(self) -> tuple[object, tuple[str, int]]:
        return _rebuild, (str(self), self._size)


class NodeCounts:
    """A mutable number per node index (free CPUs during a pass): ``scan``'s ``counts``.

    Values are 32-bit signed integers (OverflowError beyond); the length is fixed.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[int]) -> None:
        self._values = [check_int(v, INT32, "count") for v in values]

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, index: int) -> int:
        return self._values[check_index(index, len(self._values))]

    def __setitem__(self, index: int, value: int) -> None:
        self._values[check_index(index, len(self._values))] = check_int(value, INT32, "count")

    def __repr__(self) -> str:
        return f"NodeCounts({self._values!r})"


class NodeClaims:
    """Per node index, the ``[begin, end)`` intervals it is claimed for (backfill's
    whole-node reservations): ``scan``'s ``claims``. Times are 64-bit integers."""

    __slots__ = ("_size", "_spans")

    def __init__(self, size: int) -> None:
        self._size = check_size(size)
        self._spans: dict[int, list[tuple[int, int]]] = {}

    @property
    def size(self) -> int:
        return self._size

    def add(self, begin: int, end: int, indices: Iterable[int]) -> None:
        """Claim each of ``indices`` for ``[begin, end)``."""
        span = (check_int(begin, INT64, "time"), check_int(end, INT64, "time"))
        for index in [check_index(i, self._size) for i in indices]:
            self._spans.setdefault(index, []).append(span)

    def overlaps(self, index: int, begin: int, end: int) -> bool:
        """Whether a claim of ``index`` overlaps ``[begin, end)``."""
        spans = self._spans.get(check_index(index, self._size), ())
        return any(b < end and begin < e for b, e in spans)

    def spans(self, index: int) -> list[tuple[int, int]]:
        """The claims of ``index``, in the order added."""
        return list(self._spans.get(check_index(index, self._size), ()))


NodeSet._companions = (NodeCounts, NodeClaims)
