"""``corral sim --map``: who the trace's users are on a configured cluster.

An SWF trace knows its jobs' users and groups only as numbers (fields 12 and
13), and has no accounts, partitions or QOS. With ``-f slurm.conf`` the sim
needs all three (fair share is per account and user, PriorityWeightPartition
reads the partition, PriorityWeightQOS the QOS), so this small text file gives
them, one rule a line (docs/simconfig.md)::

    # trace user 12 is alice of physics, in partition gpu, with QOS high
    user=12 name=alice account=physics partition=gpu qos=high
    group=3 account=chem
    default account=other
    # a QOS the rules name: sacctmgr's QOS columns (Priority, UsageFactor, limits)
    qos high Priority=100 UsageFactor=2 MaxJobsPU=4

A job takes its user's rule, then its group's for what that left out, then
``default``'s; what no rule gives it is Slurm's default: its user ``uN``
(``N`` the trace's number), no account (the user's DefaultAccount in an
accounting dump, else none), the default partition, QOS ``normal``.

A ``qos`` line defines a QOS as ``sacctmgr add qos`` would (columns as
``sacctmgr show qos`` names them); an accounting dump has no QOS, so this is
where a replay's QOS come from. Every line that cannot be used (an unknown
word, a user or group given twice, a second default, a number that is not
one) is refused with its file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.sim.errors import SimError

__all__ = ["QOS_COLUMNS", "Rule", "SiteMap", "load", "parse"]

#: The QOS columns a ``qos`` line may set (``controller/assocrows.qos`` reads them).
QOS_COLUMNS = (
    "Priority",
    "UsageFactor",
    "MaxWall",
    "MaxJobsPU",
    "MaxSubmitPU",
    "MaxJobsPA",
    "MaxSubmitPA",
    "GrpJobs",
    "GrpSubmit",
    "GrpWall",
    "GrpTRES",
    "GrpTRESMins",
    "MaxTRES",
    "MaxTRESPerNode",
    "MaxTRESMins",
    "MaxTRESPU",
    "MaxTRESPA",
)
_QOS_KEYS = {column.lower(): column for column in QOS_COLUMNS}
_RULE_KEYS = ("name", "account", "partition", "qos")


@dataclass(frozen=True, slots=True)
class Rule:
    """What one line gives a job ("" where it gives nothing)."""

    name: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""

    def over(self, other: Rule) -> Rule:
        """This rule, with ``other``'s values where this one has none."""
        return Rule(
            self.name or other.name,
            self.account or other.account,
            self.partition or other.partition,
            self.qos or other.qos,
        )


@dataclass(frozen=True, slots=True)
class SiteMap:
    """The rules by trace user and group number, the default, and the QOS defined."""

    users: Mapping[int, Rule] = field(default_factory=dict)
    groups: Mapping[int, Rule] = field(default_factory=dict)
    default: Rule = Rule()
    qos: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> columns

    def rule(self, user: int, group: int) -> Rule:
        """Everything the rules give a job of ``user`` in ``group``."""
        found = self.users.get(user, Rule()).over(self.groups.get(group, Rule()))
        return found.over(self.default)

    def named(self) -> set[tuple[str, str]]:
        """Every (what, name) the rules use: ("account", a), ("partition", p), ("qos", q)."""
        used: set[tuple[str, str]] = set()
        for rule in (*self.users.values(), *self.groups.values(), self.default):
            used.update((key, getattr(rule, key)) for key in _RULE_KEYS[1:] if getattr(rule, key))
        return used


def load(path: str) -> SiteMap:
    """The map in the file at ``path``."""
    try:
        with open(path, encoding="utf-8") as src:
            text = src.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, path)


def parse(text: str, path: str) -> SiteMap:
    """The map in ``text`` (read from ``path``, for messages)."""
    users: dict[int, Rule] = {}
    groups: dict[int, Rule] = {}
    default: Rule | None = None
    qos: dict[str, dict[str, str]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        words = raw.partition("#")[0].split()
        if not words:
            continue
        where = f"{path}:{lineno}"
        first = words[0].lower()
        if first == "qos":
            name, columns = _qos(words[1:], where)
            if name in qos:
                raise SimError(f"{where}: QOS {name} is defined twice")
            qos[name] = columns
            continue
        rule = _rule(words[1:], where)
        if first == "default":
            if default is not None:
                raise SimError(f"{where}: a second default line")
            if rule.name:
                raise SimError(f"{where}: default cannot name a user (name= is per trace user)")
            default = rule
            continue
        key, eq, value = first.partition("=")
        if key not in ("user", "group") or not eq:
            raise SimError(
                f"{where}: expected user=N, group=N, default or qos first, got {words[0]!r}"
            )
        try:
            number = int(value)
        except ValueError:
            raise SimError(
                f"{where}: {key} wants the trace's number (SWF field 12 or 13), got {value!r}"
            ) from None
        if key == "group" and rule.name:
            raise SimError(f"{where}: name= is for a user=N rule, not a group")
        table = users if key == "user" else groups
        if number in table:
            raise SimError(f"{where}: {key} {number} is mapped twice")
        table[number] = rule
    return SiteMap(users, groups, default or Rule(), qos)


def _rule(words: list[str], where: str) -> Rule:
    """``name=``, ``account=``, ``partition=``, ``qos=`` (at least one, each once)."""
    if not words:
        raise SimError(f"{where}: a rule gives at least one of {', '.join(_RULE_KEYS)}=")
    given: dict[str, str] = {}
    for word in words:
        key, eq, value = word.partition("=")
        key = key.lower()
        if key not in _RULE_KEYS or not eq or not value:
            raise SimError(
                f"{where}: expected {'=, '.join(_RULE_KEYS)}= with a value, got {word!r}"
            )
        if key in given:
            raise SimError(f"{where}: {key}= given twice")
        given[key] = value if key == "name" else value.lower()
    return Rule(**given)


def _qos(words: list[str], where: str) -> tuple[str, dict[str, str]]:
    """``qos NAME Column=value ...`` as the name and sacctmgr's columns."""
    if not words or "=" in words[0]:
        raise SimError(f"{where}: expected qos NAME Column=value ...")
    name = words[0].lower()
    columns = {"Name": name}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        column = _QOS_KEYS.get(key.lower())
        if column is None or not eq or not value:
            raise SimError(
                f"{where}: QOS {name}: expected one of {', '.join(QOS_COLUMNS)}=value, got {word!r}"
            )
        columns[column] = value
    return name, columns
