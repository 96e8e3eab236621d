"""Slurm's ``--constraint`` (``-C``): parsing and what it asks of nodes.

The grammar and its checks follow slurmctld (``_feature_string2list`` and
``_valid_feature_list`` in job_scheduler.c), and so does the meaning, which
node_scheduler.c gives in three separate passes over the same term list:

* ``allows``: the filter every node of the job must pass (``a&b`` all,
  ``a|b`` any, parentheses group), evaluated strictly left to right as Slurm
  does (``a|b&c`` is ``(a|b)&c``). Terms inside brackets are not part of it,
  and a constraint with any count filters nothing (``valid_feature_counts``).
* ``alternatives``: the matching OR ``[a|b]``, tried in order; every node of
  the allocation has the one alternative picked (``_valid_features``).
* ``counts``: ``a*2`` or ``[rack1*2&rack2*4]``: that many nodes with the
  feature (or parenthesised group) are forced into the allocation, the ones
  after an ``&`` inside brackets distinct from those picked before; the rest
  of the job's nodes may come from anywhere (``_get_req_features``).

Commas are read as ``&``, as Slurm does. A malformed expression raises
``ValueError``; admission turns it into ESLURM_INVALID_FEATURE.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Clause", "Constraint", "Count", "Op", "Term", "parse"]

_INT_MAX = 2**31 - 1


class Op(enum.Enum):
    """The operator after a term (FEATURE_OP_*): how it joins the next one."""

    AND = "&"  # outside brackets, or inside parentheses
    OR = "|"  # outside brackets, or inside parentheses
    XAND = "&[]"  # & inside brackets: counted sets of distinct nodes
    MOR = "|[]"  # | inside brackets: one alternative for all nodes
    END = ""  # the last term


@dataclass(frozen=True, slots=True)
class Term:
    """One feature as Slurm lists it: its count, nesting and following operator.

    As in Slurm, the term that closes a parenthesis or bracket already has the
    outer depth (``(a|b)&c``: ``b`` has paren 0).
    """

    name: str
    count: int
    paren: int
    bracket: int
    op: Op


@dataclass(frozen=True, slots=True)
class Clause:
    """A feature, or a parenthesised group of them joined left to right."""

    first: str
    rest: tuple[tuple[bool, str], ...] = ()  # (joined by AND, feature)

    def matches(self, features: frozenset[str]) -> bool:
        value = self.first in features
        for conjunctive, name in self.rest:
            value = (value and name in features) if conjunctive else (value or name in features)
        return value


@dataclass(frozen=True, slots=True)
class Count:
    """``clause*nodes``: that many nodes of the job must match ``clause``.

    After a counted set joined by ``&`` in brackets (``xand``), the sets that
    follow are picked from other nodes (and not from the ``-w`` ones), as Slurm does.
    """

    clause: Clause
    nodes: int
    xand: bool


@dataclass(frozen=True, slots=True)
class Constraint:
    """A parsed ``-C`` expression; the empty one asks for nothing."""

    text: str
    terms: tuple[Term, ...]
    alternatives: tuple[Clause, ...]  # matching OR choices, in order (none: no choice)
    counts: tuple[Count, ...]  # nodes forced in, in order

    @property
    def names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.terms)

    def allows(self, features: frozenset[str]) -> bool:
        """The filter on every node of the job (``valid_feature_counts``)."""
        if not self.terms or self.counts:
            return True
        last_op, paren_op, last_paren = Op.AND, Op.AND, 0
        result = group = True
        inside = False
        for term in self.terms:
            if last_paren < term.paren:  # a parenthesis opens
                inside_bracket = term.bracket and last_op not in (Op.XAND, Op.MOR)
                paren_op = Op.XAND if inside_bracket else last_op
                last_op, group, inside = Op.AND, True, True
            value = group if inside else result
            if term.op not in (Op.MOR, Op.XAND):
                if last_op is Op.AND:
                    value = value and term.name in features
                elif last_op is Op.OR:
                    value = value or term.name in features
            if inside:
                group = value
            else:
                result = value
            if last_paren > term.paren:  # the parenthesis closes
                if paren_op is Op.AND:
                    result = result and group
                elif paren_op is Op.OR:
                    result = result or group
                inside = False
            last_op, last_paren = term.op, term.paren
        return result

    def admits(self, features: frozenset[str]) -> bool:
        """Whether a node with ``features`` could be in some allocation of the job."""
        if not self.allows(features):
            return False
        choices = self.choices()
        return not choices or any(c.matches(features) for c in choices)

    def choices(self) -> tuple[Clause, ...]:
        """The alternatives node selection tries in turn (none: a single try).

        Once counted sets joined by ``&`` were picked, Slurm no longer restricts
        the rest of the job's nodes to one alternative.
        """
        return () if any(c.xand for c in self.counts) else self.alternatives


def _strtol(text: str, start: int) -> tuple[int, int]:
    """C's ``strtol(text + start)``: (value, index after it); (0, start) if no digits."""
    i = start
    while i < len(text) and text[i] in " \t\n\v\f\r":
        i += 1
    sign = 1
    if i < len(text) and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    digits = i
    while i < len(text) and text[i].isascii() and text[i].isdigit():
        i += 1
    if i == digits:
        return 0, start
    return sign * int(text[digits:i]), i


_SPECIAL = frozenset("*&|[]()")


def _terms(text: str) -> list[Term]:
    """``_feature_string2list``: the term list, or ValueError with Slurm's reason."""
    text = text.replace(",", "&")
    terms: list[Term] = []
    bracket = paren = count = sets = 0
    has_asterisk = False
    start: int | None = None  # where the current feature's name begins
    separated = False  # the previous character was an operator or bracket
    i = 0

    def name() -> str:
        assert start is not None
        end = start
        while end < len(text) and text[end] not in _SPECIAL:
            end += 1
        return text[start:end]

    while True:
        char = text[i] if i < len(text) else ""
        if char == "*":
            if not bracket:
                has_asterisk = True
            count, after = _strtol(text, i + 1)
            if start is None or count <= 0 or paren:
                raise ValueError("'*' must follow a feature or parentheses, with a positive count")
            if count > _INT_MAX:
                raise ValueError("count too large")
            i = after - 1  # like Slurm, whatever follows the count up to an operator is ignored
            separated = False
        elif char in ("&", "|"):
            if start is None:
                raise ValueError(f"'{char}' without a feature")
            if paren:
                op = Op.AND if char == "&" else Op.OR
            elif bracket:
                op = Op.XAND if char == "&" else Op.MOR
            else:
                op = Op.AND if char == "&" else Op.OR
            terms.append(Term(name(), count, paren, bracket, op))
            start, count, separated = None, 0, True
        elif char == "[":
            if start is not None or bracket or paren:
                raise ValueError("imbalanced brackets")
            bracket += 1
            sets += 1
            if sets > 1:
                raise ValueError("more than one set of brackets")
            separated = True
        elif char == "]":
            if start is None or not bracket or paren:
                raise ValueError("imbalanced brackets")
            bracket -= 1
            separated = True
        elif char == "(":
            if start is not None or paren:
                raise ValueError("imbalanced parentheses")
            paren += 1
            separated = True
        elif char == ")":
            if start is None or not paren:
                raise ValueError("imbalanced parentheses")
            paren -= 1
            separated = True
        elif char == "":
            if start is not None:
                terms.append(Term(name(), count, paren, bracket, Op.END))
            break
        elif start is None:
            start, separated = i, False
        elif separated:
            raise ValueError("')' and ']' must be followed by an operator")
        i += 1
    if bracket:
        raise ValueError("unbalanced brackets")
    if paren:
        raise ValueError("unbalanced parentheses")
    if has_asterisk and len(terms) > 1:
        raise ValueError("'*' outside of brackets with more than one feature")
    return terms


def _check(terms: Iterable[Term]) -> None:
    """``_valid_feature_list`` without the node check: counts with & in brackets, not with |."""
    bracket = paren = 0
    has_xand = has_mor = False
    for term in terms:
        if term.op in (Op.MOR, Op.XAND):
            bracket = term.paren + 1
        paren = term.paren
        if term.op is Op.XAND and not term.count:
            raise ValueError(f"feature {term.name}: '&' in brackets needs counts")
        if term.op is Op.MOR and term.count:
            raise ValueError(f"feature {term.name}: '|' in brackets takes no counts")
        if bracket > paren and term.op not in (Op.MOR, Op.XAND):
            if has_xand and not term.count:
                raise ValueError(f"feature {term.name}: '&' in brackets needs counts")
            if has_mor and term.count:
                raise ValueError(f"feature {term.name}: '|' in brackets takes no counts")
            bracket = 0
            has_xand = has_mor = False
        if term.op is Op.XAND:
            has_xand = True
        if term.op is Op.MOR:
            has_mor = True


def _group(terms: list[Term], i: int) -> tuple[Clause, int]:
    """The parenthesised group opening at ``terms[i]``: its clause and closing index."""
    first = terms[i]
    rest: list[tuple[bool, str]] = []
    op = first.op
    j = i
    while j + 1 < len(terms):
        j += 1
        rest.append((op is Op.AND, terms[j].name))
        op = terms[j].op
        if terms[j].paren < first.paren:
            break
    return Clause(first.name, tuple(rest)), j


def _alternatives(terms: list[Term]) -> tuple[Clause, ...]:
    """The matching-OR positions (``_valid_features``)."""
    out: list[Clause] = []
    last_op, last_paren, i = Op.AND, 0, 0
    while i < len(terms):
        term = terms[i]
        if term.paren > last_paren:
            if term.bracket and last_op not in (Op.XAND, Op.MOR):
                last_op = Op.XAND
            clause, i = _group(terms, i)
            term = terms[i]
            last_paren = term.paren
        else:
            clause = Clause(term.name)
        if term.op in (Op.XAND, Op.MOR) or last_op in (Op.XAND, Op.MOR):
            out.append(clause)
            last_op = term.op
        i += 1
    return tuple(out)


def _has_mor(terms: list[Term]) -> bool:
    """Whether ``valid_feature_counts`` finds a matching OR or counted set."""
    last_op, paren_op, last_paren = Op.AND, Op.AND, 0
    found = False
    for term in terms:
        if last_paren < term.paren:
            inside_bracket = term.bracket and last_op not in (Op.XAND, Op.MOR)
            paren_op = Op.XAND if inside_bracket else last_op
            last_op = Op.AND
        if term.op in (Op.MOR, Op.XAND):
            found = True
        if last_paren > term.paren and paren_op in (Op.MOR, Op.XAND):
            found = True
        last_op, last_paren = term.op, term.paren
    return found


def _counts(terms: list[Term]) -> tuple[Count, ...]:
    """Counted terms and groups (``_get_req_features``)."""
    out: list[Count] = []
    i = 0
    while i < len(terms):
        term = terms[i]
        if term.paren > 0:
            clause, i = _group(terms, i)
            term = terms[i]
        else:
            clause = Clause(term.name)
        if term.count:
            out.append(Count(clause, term.count, term.op is Op.XAND))
        i += 1
    return tuple(out)


@lru_cache(maxsize=4096)
def parse(text: str) -> Constraint:
    """Parse a ``-C`` expression; ValueError if Slurm would refuse it."""
    terms = _terms(text)
    _check(terms)
    alternatives = _alternatives(terms) if _has_mor(terms) else ()
    return Constraint(text, tuple(terms), alternatives, _counts(terms))
