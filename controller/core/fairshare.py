"""Fair share: usage per association, its decay, and the fair-share factor.

Slurm keeps a tree of associations: ``root`` at the top, accounts under it
(and under each other), users under accounts. Until accounting provides the
tree, an association is (account, user) with the account being the job's
``--account`` or else the user's group, every account hangs under root and
every share is 1. An account named ``root`` is the root itself, so
``("root", "root")`` is a user directly under root, as in Slurm's database.

Usage
    ``Usage`` holds the raw usage of each user association: CPU-seconds
    (Slurm's billable TRES-seconds with no TRESBillingWeights), decayed with
    PriorityDecayHalfLife. An account's usage is the sum of its children's,
    as Slurm adds each job's usage all the way up to root. ``advance`` brings
    a ``Usage`` from its ``last_decay`` to ``now``: a PriorityUsageResetPeriod
    boundary in between zeroes it, then everything decays by
    ``2**(-dt/half_life)`` and every job's CPUs are charged for the part of
    its run inside the interval, decayed from when it was used. ``reset``
    is PriorityUsageResetPeriod=NOW.

    Where this differs from Slurm, on purpose: Slurm decays by
    ``(1 - 0.693/half_life)**dt`` (a first-order ``ln 2``: 0.50007 after one
    half-life instead of 0.5) and charges an interval's usage as if it had
    all happened at its start (``dt * d**dt``). Here both are exact, so
    advancing in two steps gives the same usage as one step over both, and
    the controller may advance as often as it likes (every scheduling cycle
    or every PriorityCalcPeriod) with the same result.

The factor
    ``share_tree`` lays the associations out as ``sshare`` lists them and
    computes each one's normalised shares and usage, and the users'
    fair-share factors, by Fair Tree (Slurm's default, ``fair_tree.c``) or
    by classic fair share (``PriorityFlags=NO_FAIR_TREE``,
    ``F = 2**(-UE/S/d)``).

Nothing here reads a clock or does I/O: ``now`` and the time zone of the
calendar resets are parameters, and ``Usage`` round-trips through JSON for
the controller to keep in its journal.

Why this module is over 500 lines: usage, its decay, the classic factor and
Fair Tree are one algorithm over one tree; split, each part would need the
others' walk of it.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = [
    "ROOT",
    "Account",
    "Assoc",
    "Charge",
    "ShareRow",
    "ShareTree",
    "Usage",
    "accrued",
    "advance",
    "decay_factor",
    "next_reset",
    "reset",
    "share_tree",
]

ROOT = "root"
#: A user association: (account, user).
Assoc = tuple[str, str]

_LN2 = math.log(2.0)
_JSON_VERSION = 1


# ------------------------------------------------------------------ usage
@dataclass(frozen=True, slots=True)
class Charge:
    """A job's use of the cluster: its association, CPUs and run interval.

    ``end`` is 0 while the job runs. Charging only the part of ``[start,
    end]`` inside the interval being advanced makes it harmless to pass a
    job again after it was charged in full.
    """

    account: str
    user: str
    cpus: float  # billing a second, times the QOS's UsageFactor
    start: int
    end: int = 0
    qos: str = ""  # its QOS, whose GrpTRESMins and GrpWall count it too
    #: What it holds of each TRES a second (cpu, mem in MiB, node, gres/...), for
    #: GrpTRESMins on TRES other than billing.
    tres: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """Decayed raw usage per user association as of ``last_decay``.

    ``last_decay`` is 0 before the first ``advance`` (Slurm's
    ``priority_last_decay_ran``); ``last_reset`` is when usage was last
    zeroed (or first tracked). ``raw`` is never mutated: every change makes
    a new ``Usage``. ``wall`` is the same decayed sum of wall-clock seconds
    (a job counts once, whatever its size): what GrpWall limits.
    """

    raw: Mapping[Assoc, float] = field(default_factory=dict)
    last_decay: int = 0
    last_reset: int = 0
    wall: Mapping[Assoc, float] = field(default_factory=dict)
    #: The same two sums per QOS (keyed ("", name)), for the QOS's own Grp limits.
    qos: Mapping[Assoc, float] = field(default_factory=dict)
    qos_wall: Mapping[Assoc, float] = field(default_factory=dict)
    #: TRES-seconds per user association and TRES (keyed (account, "user/tres")),
    #: and per QOS and TRES (keyed ("", "qos/tres")): GrpTRESMins of mem, node, gres.
    tres: Mapping[Assoc, float] = field(default_factory=dict)
    qos_tres: Mapping[Assoc, float] = field(default_factory=dict)

    def of(self, account: str, user: str) -> float:
        return self.raw.get((account, user), 0.0)

    def held(self) -> dict[Assoc, dict[str, float]]:
        """``tres`` by user association: {(account, user): {tres: seconds}}."""
        return _by_owner(self.tres)

    def qos_held(self) -> dict[str, dict[str, float]]:
        """``qos_tres`` by QOS: {qos: {tres: seconds}}."""
        return {qos: held for (_, qos), held in _by_owner(self.qos_tres).items()}

    def to_json(self) -> str:
        """The usage as JSON text, associations sorted (stable for diffs and tests)."""
        return json.dumps(
            {
                "version": _JSON_VERSION,
                "last_decay": self.last_decay,
                "last_reset": self.last_reset,
                "usage": _rows(self.raw),
                "wall": _rows(self.wall),
                "qos": _rows(self.qos),
                "qos_wall": _rows(self.qos_wall),
                "tres": _rows(self.tres),
                "qos_tres": _rows(self.qos_tres),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Usage:
        """The ``Usage`` ``to_json`` wrote; ValueError if ``text`` is not one."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != _JSON_VERSION:
            raise ValueError("not a Corral fair-share usage record")
        last_decay, last_reset, rows = (
            data.get("last_decay"),
            data.get("last_reset"),
            data.get("usage"),
        )
        if not isinstance(last_decay, int) or not isinstance(last_reset, int):
            raise ValueError("usage record: bad times")
        return cls(
            _read_rows(rows),
            last_decay,
            last_reset,
            _read_rows(data.get("wall", [])),
            _read_rows(data.get("qos", [])),
            _read_rows(data.get("qos_wall", [])),
            _read_rows(data.get("tres", [])),
            _read_rows(data.get("qos_tres", [])),
        )


def _by_owner(sums: Mapping[Assoc, float]) -> dict[Assoc, dict[str, float]]:
    """Sums keyed (account, "owner/tres") regrouped per (account, owner)."""
    grouped: dict[Assoc, dict[str, float]] = {}
    for (account, owner_tres), seconds in sums.items():
        owner, _, name = owner_tres.partition("/")
        grouped.setdefault((account, owner), {})[name] = seconds
    return grouped


def _rows(usage: Mapping[Assoc, float]) -> list[list[str | float]]:
    return [[account, user, value] for (account, user), value in sorted(usage.items())]


def _read_rows(rows: object) -> dict[Assoc, float]:
    if not isinstance(rows, list):
        raise ValueError("usage record: bad usage list")
    usage: dict[Assoc, float] = {}
    for row in rows:
        if (
            not isinstance(row, list)
            or len(row) != 3
            or not isinstance(row[0], str)
            or not isinstance(row[1], str)
            or isinstance(row[2], bool)
            or not isinstance(row[2], int | float)
            or not math.isfinite(row[2])
            or row[2] < 0
        ):
            raise ValueError(f"usage record: bad row {row!r}")
        usage[(row[0], row[1])] = float(row[2])
    return usage


def decay_factor(seconds: float, half_life: int) -> float:
    """What usage is multiplied by over ``seconds``: ``2**(-seconds/half_life)``.

    A half-life of 0 means no decay (PriorityDecayHalfLife=0).
    """
    if half_life <= 0 or seconds <= 0:
        return 1.0
    return math.pow(2.0, -seconds / half_life)


def accrued(cpus: float, start: float, end: float, now: float, half_life: int) -> float:
    """Usage at ``now`` of ``cpus`` CPUs used from ``start`` to ``end`` (<= ``now``).

    Each CPU-second used at time t has decayed to ``2**(-(now-t)/h)`` by
    ``now``, so the usage is ``cpus * h/ln2 * (2**(-(now-end)/h) - 2**(-(now-start)/h))``;
    without decay it is ``cpus * (end - start)``.
    """
    if end <= start or cpus <= 0:
        return 0.0
    if half_life <= 0:
        return cpus * (end - start)
    span = half_life / _LN2
    return cpus * span * (decay_factor(now - end, half_life) - decay_factor(now - start, half_life))


def reset(usage: Usage, now: int) -> Usage:
    """Usage zeroed at ``now`` (PriorityUsageResetPeriod=NOW, or a period boundary)."""
    return Usage(
        dict.fromkeys(usage.raw, 0.0),
        usage.last_decay,
        now,
        dict.fromkeys(usage.wall, 0.0),
        dict.fromkeys(usage.qos, 0.0),
        dict.fromkeys(usage.qos_wall, 0.0),
        dict.fromkeys(usage.tres, 0.0),
        dict.fromkeys(usage.qos_tres, 0.0),
    )


def next_reset(period: str, last_reset: int, tz: _dt.tzinfo = _dt.UTC) -> int | None:
    """The first PriorityUsageResetPeriod boundary after ``last_reset``; None for NONE/NOW.

    As Slurm's ``_next_reset``: the next midnight (DAILY), the next Sunday
    00:00 (WEEKLY), the first of the next month, quarter (January, April,
    July, October) or year, in ``tz`` (Slurm uses the controller's local time).
    """
    when = _dt.datetime.fromtimestamp(last_reset, tz)
    midnight = when.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "DAILY":
        nxt = midnight + _dt.timedelta(days=1)
    elif period == "WEEKLY":
        days_since_sunday = (midnight.weekday() + 1) % 7
        nxt = midnight + _dt.timedelta(days=7 - days_since_sunday)
    elif period in ("MONTHLY", "QUARTERLY", "YEARLY"):
        year, month = midnight.year, midnight.month
        if period == "MONTHLY":
            month += 1
        elif period == "QUARTERLY":
            month = (month - 1) // 3 * 3 + 4
        else:
            month = 13
        if month > 12:
            year, month = year + 1, 1
        nxt = midnight.replace(year=year, month=month, day=1)
    else:
        return None
    # The wall-clock date in ``tz`` as epoch seconds.
    return int(nxt.replace(tzinfo=None).replace(tzinfo=tz).timestamp())


def advance(
    usage: Usage,
    now: int,
    charges: Iterable[Charge],
    *,
    half_life: int,
    reset_period: str = "NONE",
    tz: _dt.tzinfo = _dt.UTC,
) -> Usage:
    """``usage`` brought forward to ``now``: reset, decayed, and charged with ``charges``.

    ``charges`` are the jobs that ran at some time since ``usage.last_decay``
    (running ones with ``end`` 0, and those that ended since). The first
    call only starts the clock (Slurm charges nothing on its first decay
    pass either). A ``now`` at or before ``last_decay`` changes nothing.
    """
    if usage.last_decay <= 0:
        return replace(usage, last_decay=now, last_reset=usage.last_reset or now)
    start = usage.last_decay
    if now <= start:
        return usage
    sums = [
        dict(values)
        for values in (
            usage.raw,
            usage.wall,
            usage.qos,
            usage.qos_wall,
            usage.tres,
            usage.qos_tres,
        )
    ]
    last_reset = usage.last_reset or start
    crossed = False
    boundary = next_reset(reset_period, last_reset, tz)
    while boundary is not None and boundary <= now:
        last_reset, crossed = boundary, True
        boundary = next_reset(reset_period, last_reset, tz)
    if crossed:  # usage before the last boundary is gone; only what follows it counts
        sums = [dict.fromkeys(values, 0.0) for values in sums]
        start = max(start, last_reset)
    factor = decay_factor(now - start, half_life)
    if factor != 1.0:
        sums = [{key: value * factor for key, value in values.items()} for values in sums]
    raw, wall, qos, qos_wall, tres, qos_tres = sums
    for charge in charges:
        if charge.start <= 0:
            continue
        begin = max(charge.start, start)
        end = min(charge.end or now, now)
        amount = accrued(charge.cpus, begin, end, now, half_life)
        if amount > 0:
            seconds = accrued(1, begin, end, now, half_life)
            key = (charge.account, charge.user)
            raw[key] = raw.get(key, 0.0) + amount
            wall[key] = wall.get(key, 0.0) + seconds
            if charge.qos:
                named = ("", charge.qos)
                qos[named] = qos.get(named, 0.0) + amount
                qos_wall[named] = qos_wall.get(named, 0.0) + seconds
            for name, per_second in charge.tres:
                held = per_second * seconds
                mine = (charge.account, f"{charge.user}/{name}")
                tres[mine] = tres.get(mine, 0.0) + held
                if charge.qos:
                    theirs = ("", f"{charge.qos}/{name}")
                    qos_tres[theirs] = qos_tres.get(theirs, 0.0) + held
    return Usage(raw, now, last_reset, wall, qos, qos_wall, tres, qos_tres)


# ------------------------------------------------------------------ the tree
@dataclass(frozen=True, slots=True)
class Account:
    """An account of the association tree: its parent account and its shares."""

    name: str
    parent: str = ROOT
    shares: int = 1


@dataclass(frozen=True, slots=True)
class ShareRow:
    """One association as ``sshare`` shows it.

    ``user`` is "" for an account (and root). ``parent`` is the account above
    (a user's own account; "" for root). ``raw_shares`` is None for root.
    ``norm_usage`` is None where Slurm never computes it (root);
    ``level_fs`` None for root; ``fairshare`` None for accounts under Fair
    Tree (Slurm ranks only users). Usage is in CPU-seconds.
    """

    account: str
    user: str
    parent: str
    depth: int
    raw_shares: int | None
    norm_shares: float
    raw_usage: float
    norm_usage: float | None
    effective_usage: float
    level_fs: float | None
    fairshare: float | None


@dataclass(frozen=True, slots=True)
class ShareTree:
    """Every association in ``sshare`` order, and each user association's factor."""

    rows: tuple[ShareRow, ...]
    factors: Mapping[Assoc, float]
    fair_tree: bool

    def fairshare(self, account: str, user: str) -> float:
        """The fair-share factor of a job of ``user`` under ``account`` (0 if unknown)."""
        return self.factors.get((account, user), 0.0)


@dataclass(slots=True, eq=False)
class _Node:
    """A node of the tree while it is computed (identity, not value, equality)."""

    account: str
    user: str
    parent: _Node | None
    shares: int
    children: list[_Node] = field(default_factory=list)
    raw_usage: float = 0.0
    level_shares: int = 0
    norm_shares: float = 0.0
    norm_usage: float | None = None
    effective_usage: float = 0.0
    level_fs: float | None = None
    fairshare: float | None = None

    @property
    def is_user(self) -> bool:
        return bool(self.user)


def share_tree(
    usage: Usage,
    users: Iterable[Assoc] = (),
    accounts: Iterable[Account] = (),
    *,
    user_shares: Mapping[Assoc, int] | None = None,
    fair_tree: bool = True,
    damping: int = 1,
    root_user: bool = True,
) -> ShareTree:
    """The association tree with shares, usage and fair-share factors.

    The user associations are ``users``, every association with usage, and
    (``root_user``) ``("root", "root")``, which Slurm's database always
    holds. ``accounts`` places accounts under other accounts and gives them
    shares; an account named by a user but not listed sits under root with
    1 share. ``user_shares`` gives users other shares than 1. ``damping`` is
    FairShareDampeningFactor (classic fair share only).
    """
    account_defs = {account.name: account for account in accounts}
    wanted: set[Assoc] = set(users) | {assoc for assoc in usage.raw}
    if root_user:
        wanted.add((ROOT, ROOT))
    shares_of = user_shares or {}
    root = _Node(ROOT, "", None, 1)
    nodes: dict[str, _Node] = {ROOT: root}

    def account_node(name: str, trail: tuple[str, ...] = ()) -> _Node:
        found = nodes.get(name)
        if found is not None:
            return found
        if name in trail:
            raise ValueError(f"account {name} is its own ancestor")
        define = account_defs.get(name, Account(name))
        parent = account_node(define.parent or ROOT, (*trail, name))
        node = _Node(name, "", parent, define.shares)
        parent.children.append(node)
        nodes[name] = node
        return node

    for name in sorted(account_defs):
        account_node(name)
    for account, user in sorted(wanted):
        parent = account_node(account or ROOT)
        node = _Node(parent.account, user, parent, shares_of.get((account, user), 1))
        node.raw_usage = usage.of(account, user)
        parent.children.append(node)

    ordered = _order(root)
    for node in reversed(ordered):  # children before parents: sum usage upwards
        if node.children:
            node.raw_usage = sum(child.raw_usage for child in node.children)
        level = sum(child.shares for child in node.children)
        for child in node.children:
            child.level_shares = level
    total = root.raw_usage
    for node in ordered[1:]:
        node.norm_usage = min(node.raw_usage / total, 1.0) if total else 0.0
    root.effective_usage = 1.0
    if fair_tree:
        _fair_tree(root, ordered)
    else:
        _classic(root, ordered, damping)
    rows = tuple(_row(node) for node in ordered)
    factors = {
        (_account_key(node), node.user): node.fairshare or 0.0 for node in ordered if node.is_user
    }
    return ShareTree(rows, factors, fair_tree)


def _account_key(user_node: _Node) -> str:
    assert user_node.parent is not None
    return user_node.parent.account


def _order(root: _Node) -> list[_Node]:
    """Depth first, each level's users (by name) before its accounts (by name), as sshare."""
    out: list[_Node] = []

    def visit(node: _Node) -> None:
        out.append(node)
        node.children.sort(key=lambda child: (not child.is_user, child.user or child.account))
        for child in node.children:
            visit(child)

    visit(root)
    return out


def _depth(node: _Node) -> int:
    depth = 0
    while node.parent is not None:
        node = node.parent
        depth += 1
    return depth


def _row(node: _Node) -> ShareRow:
    parent = node.parent
    return ShareRow(
        account=node.account,
        user=node.user,
        parent="" if parent is None else parent.account,
        depth=_depth(node),
        raw_shares=None if parent is None else node.shares,
        norm_shares=node.norm_shares,
        raw_usage=node.raw_usage,
        norm_usage=node.norm_usage,
        effective_usage=node.effective_usage,
        level_fs=node.level_fs,
        fairshare=node.fairshare,
    )


def _fair_tree(root: _Node, ordered: list[_Node]) -> None:
    """Slurm's Fair Tree (``fair_tree.c``): rank users by Level FS, level by level.

    Per association: ``S = shares / sum of siblings' shares``,
    ``U = usage / parent's usage`` (0 when the parent has none), and
    ``LF = S/U`` (0 when S is 0, infinite when U is 0). Siblings are visited
    in descending LF, users before accounts on ties; a user gets
    ``rank / user count`` and lowers the rank for the next, tied users share
    a rank, and an account tied with the sibling before it starts tied.
    Root's normalised shares print as 0 (its shares over Slurm's NO_VAL).
    """
    for node in ordered[1:]:
        parent = node.parent
        assert parent is not None
        node.norm_shares = node.shares / node.level_shares if node.level_shares else 0.0
        node.effective_usage = node.raw_usage / parent.raw_usage if parent.raw_usage else 0.0
        if node.norm_shares == 0.0:
            node.level_fs = 0.0
        elif node.effective_usage == 0.0:
            node.level_fs = math.inf
        else:
            node.level_fs = node.norm_shares / node.effective_usage
    count = sum(1 for node in ordered if node.is_user)
    state = [count, count]  # rank, rank without ties (Slurm's rank and rnt)

    def visit(siblings: list[_Node], account_tied: bool) -> None:
        ranked = sorted(siblings, key=lambda n: (-_lf(n), not n.is_user))
        previous: float | None = None
        for index, node in enumerate(ranked):
            tied = account_tied if index == 0 else previous == _lf(node)
            if node.is_user:
                if not tied:
                    state[0] = state[1]
                node.fairshare = state[0] / count
                state[1] -= 1
            else:
                # Slurm means to merge the children of tied sibling accounts here,
                # but its _count_tied_accounts stops at the first account it meets,
                # so in practice each account is descended alone; so it is here.
                visit(node.children, tied)
            previous = _lf(node)

    visit(root.children, False)


def _lf(node: _Node) -> float:
    return 0.0 if node.level_fs is None else node.level_fs


def _classic(root: _Node, ordered: list[_Node], damping: int) -> None:
    """Classic fair share (``PriorityFlags=NO_FAIR_TREE``, classic_fair_share.shtml).

    ``S`` is the product, from the association up to root, of
    ``shares / sum of siblings' shares``. Effective usage ``UE`` is the
    normalised usage for children of root, else
    ``UA + (UE_parent - UA) * shares / siblings' shares``.
    ``F = 2**(-UE/S/damping)`` for every association (0 when S is 0).
    """
    root.norm_shares = 1.0
    root.level_fs = 0.0
    root.fairshare = _classic_factor(root.effective_usage, root.norm_shares, damping)
    for node in ordered[1:]:
        parent = node.parent
        assert parent is not None
        ratio = node.shares / node.level_shares if node.level_shares else 0.0
        node.norm_shares = parent.norm_shares * ratio
        mine = node.norm_usage or 0.0
        if parent is root:
            node.effective_usage = mine
        elif not node.level_shares:
            node.effective_usage = parent.effective_usage
        else:
            node.effective_usage = mine + (parent.effective_usage - mine) * ratio
        node.level_fs = 0.0
        node.fairshare = _classic_factor(node.effective_usage, node.norm_shares, damping)


def _classic_factor(effective_usage: float, norm_shares: float, damping: int) -> float:
    """Slurm's ``priority_p_calc_fs_factor``: ``2**(-(UE/S)/d)``, 0 without shares."""
    if norm_shares <= 0:
        return 0.0
    return math.pow(2.0, -(effective_usage / norm_shares) / max(damping, 1))
