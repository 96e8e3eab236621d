"""``corral sim --queue-map``: which account each trace job is charged to.

An SWF trace knows its jobs' users and groups only as numbers (fields 12 and
13) and has no accounts, while queues.conf puts jobs in queues by account (as
the controller does, ``controller/queueviews.queue_of``). The map is a small
text file that gives each trace job an account, one rule a line::

    # trace user 12 runs for team A; every job of group 3 for team B
    user=12 account=teama
    group=3 account=teamb
    default account=other

A job takes its user's rule, else its group's, else ``default``; with no rule
that fits it has no account (and lands in a queue only by partition, if
queues.conf routes partition ``batch``). ``#`` starts a comment. A line that
cannot be used (an unknown word, a user or group given twice, a second
default, an id that is not a number) is refused with the file and line, and so
is an account that no queue of queues.conf takes: in the sim an account exists
only to reach a queue, so one that reaches none is a mistake.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.sim.errors import SimError
from corral.queueconf import QueueConf

__all__ = ["QueueMap", "load", "parse"]


@dataclass(frozen=True, slots=True)
class QueueMap:
    """Trace user and group numbers to accounts (``default``: "" when none)."""

    users: Mapping[int, str]
    groups: Mapping[int, str]
    default: str = ""

    def account(self, user: int, group: int) -> str:
        """The account of a job of ``user`` in ``group`` ("" when no rule fits)."""
        found = self.users.get(user)
        if found is None:
            found = self.groups.get(group, self.default)
        return found


def load(path: str, conf: QueueConf) -> QueueMap:
    """The map in the file at ``path``, checked against the queues of ``conf``."""
    try:
        with open(path, encoding="utf-8") as src:
            text = src.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, path, conf)


def parse(text: str, path: str, conf: QueueConf) -> QueueMap:
    """The map in ``text`` (read from ``path``, for messages)."""
    users: dict[int, str] = {}
    groups: dict[int, str] = {}
    default: str | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        words = raw.partition("#")[0].split()
        if not words:
            continue
        where = f"{path}:{lineno}"
        account = _account(words[1:], where)
        if conf.queue_of(account, "", "") is None:
            raise SimError(f"{where}: account {account!r} is in no queue of queues.conf")
        key, eq, value = words[0].partition("=")
        key = key.lower()
        if key == "default" and not eq:
            if default is not None:
                raise SimError(f"{where}: a second default line")
            default = account
            continue
        if key not in ("user", "group") or not eq:
            raise SimError(f"{where}: expected user=N, group=N or default first, got {words[0]!r}")
        try:
            number = int(value)
        except ValueError:
            raise SimError(
                f"{where}: {key} wants the trace's number (SWF field 12 or 13), got {value!r}"
            ) from None
        table = users if key == "user" else groups
        if number in table:
            raise SimError(f"{where}: {key} {number} is mapped twice")
        table[number] = account
    return QueueMap(users, groups, default or "")


def _account(words: list[str], where: str) -> str:
    """The ``account=NAME`` that must follow a rule's first word, and nothing else."""
    if len(words) != 1:
        raise SimError(f"{where}: each line is one rule and one account=NAME")
    key, eq, value = words[0].partition("=")
    if key.lower() != "account" or not eq or not value:
        raise SimError(f"{where}: expected account=NAME, got {words[0]!r}")
    return value.lower()
