"""NodeSet: the scheduler's node bitmap, one bit per node index, backed by C.

The bits live in a ``nodeset_t`` from csrc/nodeset.c (loaded through cffi as
``corral._nodeset``; this is the only module that imports it). The C side trusts
its caller, so every index and every pair of operands is checked here first and a
mistake is an IndexError or ValueError, never memory corruption. Memory is owned by
the cdata pointer (``ffi.gc``) and freed when the last NodeSet holding it goes.

Sets are immutable values: operations return new sets, equal sets hash alike, and
they pickle and deep-copy through their range string. corral.pynodeset is the
pure-Python twin with the same API; it holds the checks, the range-string
grammar and the base class (``NodeSetBase``, with the API's documentation) both use.
"""

from __future__ import annotations

from corral._nodeset import ffi, lib
from corral.pynodeset import (
    NodeSetBase,
    check_index,
    check_size,
    parse_spec,
)

# Importing typing costs milliseconds this module cannot spend; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any


def _alloc(size: int) -> Any:
    """A zeroed ``nodeset_t`` of ``size`` bits that frees itself with its cdata."""
    ptr = lib.nodeset_alloc(size)
    if ptr == ffi.NULL:
        raise MemoryError(f"cannot allocate a NodeSet of size {size}")
    # size= tells the garbage collector roughly how much C memory the cdata keeps alive.
    return ffi.gc(ptr, lib.nodeset_free, size=size // 8 + 24)


def _rebuild(spec: str, size: int) -> NodeSet:
    return NodeSet(spec, size=size)


class NodeSet(NodeSetBase):
    """The C-backed NodeSet: the bits are a ``nodeset_t`` that ``_ptr`` owns."""

    __slots__ = ("_ptr",)

    _ptr: Any

    def __init__(self, spec: str | Iterable[int] = "", *, size: int) -> None:
        self._size = check_size(size)
        self._ptr = ptr = _alloc(self._size)
        if isinstance(spec, str):
            for lo, hi in parse_spec(spec, self._size):
                lib.nodeset_set_range(ptr, lo, hi + 1)
        else:
            for index in spec:
                lib.nodeset_set(ptr, check_index(index, self._size))

    @classmethod
    def full(cls, size: int) -> NodeSet:
        """Every node of a ``size`` cluster."""
        made = cls._blank(check_size(size))
        lib.nodeset_set_range(made._ptr, 0, made._size)
        return made

    @classmethod
    def _blank(cls, size: int) -> NodeSet:
        made = object.__new__(cls)
        made._size = size
        made._ptr = _alloc(size)
        return made

    def first(self) -> int | None:
        """The lowest index in the set, or None when it is empty."""
        index: int = lib.nodeset_first_set(self._ptr)
        return index if index >= 0 else None

    def with_(self, index: int) -> NodeSet:
        """This set plus ``index``."""
        made = self.copy()
        lib.nodeset_set(made._ptr, check_index(index, self._size))
        return made

    def without(self, index: int) -> NodeSet:
        """This set minus ``index``."""
        made = self.copy()
        lib.nodeset_clear(made._ptr, check_index(index, self._size))
        return made

    def copy(self) -> NodeSet:
        """An equal, distinct set."""
        made = self._blank(self._size)
        lib.nodeset_copy(made._ptr, self._ptr)
        return made

    def overlaps(self, other: NodeSet) -> bool:
        """Whether the two sets share a node."""
        return bool(lib.nodeset_overlaps(self._ptr, self._same_size(other)._ptr))

    def _combine(self, other: NodeSet, op: Callable[[Any, Any, Any], None]) -> NodeSet:
        made = self._blank(self._same_size(other)._size)
        op(made._ptr, self._ptr, other._ptr)
        return made

    def _runs(self) -> Iterator[tuple[int, int]]:
        ptr, size = self._ptr, self._size
        lo: int = lib.nodeset_first_set(ptr)
        while lo >= 0:
            clear: int = lib.nodeset_next_clear(ptr, lo)
            end = clear if clear >= 0 else size
            yield lo, end - 1
            lo = lib.nodeset_next_set(ptr, end)

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
        out = ffi.new("uint32_t[]", want)
        # cffi range-checks least, begin and end (OverflowError) as it converts them.
        found: int = lib.nodeset_scan(
            self._ptr,
            counts._ptr,
            least,
            ffi.NULL if claims is None else claims._ptr,
            begin,
            end,
            start,
            want,
            out,
        )
        result: list[int] = ffi.unpack(out, found)
        return result

    def __contains__(self, index: int) -> bool:
        return bool(lib.nodeset_test(self._ptr, check_index(index, self._size)))

    def __len__(self) -> int:
        count: int = lib.nodeset_count(self._ptr)
        return count

    def __bool__(self) -> bool:
        return bool(lib.nodeset_first_set(self._ptr) >= 0)

    def __iter__(self) -> Iterator[int]:
        ptr, next_set = self._ptr, lib.nodeset_next_set
        index: int = lib.nodeset_first_set(ptr)
        while index >= 0:
            yield index
            index = next_set(ptr, index + 1)

    def __and__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._combine(other, lib.nodeset_and)

    def __or__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._combine(other, lib.nodeset_or)

    def __sub__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._combine(other, lib.nodeset_andnot)

    def __xor__(self, other: NodeSet) -> NodeSet:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self._combine(other, lib.nodeset_xor)

    def __le__(self, other: NodeSet) -> bool:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return bool(lib.nodeset_is_subset(self._ptr, self._same_size(other)._ptr))

    def __lt__(self, other: NodeSet) -> bool:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return self <= other and not lib.nodeset_equal(self._ptr, other._ptr)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeSet):
            return NotImplemented
        return bool(lib.nodeset_equal(self._ptr, other._ptr))

    def __hash__(self) -> int:
        return hash(lib.nodeset_hash(self._ptr))

    def __reduce__(self) -> tuple[object, tuple[str, int]]:
        return _rebuild, (str(self), self._size)


class NodeCounts:
    """A mutable number per node index (free CPUs during a pass), in a C ``int32_t``
    array: ``scan``'s ``counts``. The API of corral.pynodeset.NodeCounts."""

    __slots__ = ("_len", "_ptr")

    def __init__(self, values: Iterable[int]) -> None:
        values = list(values)
        self._len = len(values)
        self._ptr = ffi.new("int32_t[]", values)  # cffi: OverflowError out of int32

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> int:
        value: int = self._ptr[check_index(index, self._len)]
        return value

    def __setitem__(self, index: int, value: int) -> None:
        self._ptr[check_index(index, self._len)] = value

    def __repr__(self) -> str:
        return f"NodeCounts({list(self._ptr)!r})"


class NodeClaims:
    """Per node index, the ``[begin, end)`` intervals it is claimed for, in a C
    ``nodeclaims_t``: ``scan``'s ``claims``. The API of corral.pynodeset.NodeClaims."""

    __slots__ = ("_ptr", "_size")

    def __init__(self, size: int) -> None:
        self._size = check_size(size)
        ptr = lib.nodeclaims_alloc(self._size)
        if ptr == ffi.NULL:
            raise MemoryError(f"cannot allocate NodeClaims of size {size}")
        self._ptr = ffi.gc(ptr, lib.nodeclaims_free, size=self._size * 16 + 16)

    @property
    def size(self) -> int:
        return self._size

    def add(self, begin: int, end: int, indices: Iterable[int]) -> None:
        """Claim each of ``indices`` for ``[begin, end)``."""
        indices = [check_index(i, self._size) for i in indices]
        for index in indices:
            if lib.nodeclaims_add(self._ptr, index, begin, end) != 0:
                raise MemoryError("cannot grow NodeClaims")

    def overlaps(self, index: int, begin: int, end: int) -> bool:
        """Whether a claim of ``index`` overlaps ``[begin, end)``."""
        return bool(lib.nodeclaims_overlaps(self._ptr, check_index(index, self._size), begin, end))

    def spans(self, index: int) -> list[tuple[int, int]]:
        """The claims of ``index``, in the order added."""
        ptr, index = self._ptr, check_index(index, self._size)
        return [
            (lib.nodeclaims_begin(ptr, index, k), lib.nodeclaims_end(ptr, index, k))
            for k in range(lib.nodeclaims_count(ptr, index))
        ]


NodeSet._companions = (NodeCounts, NodeClaims)
