"""Per-user request rate limits, connection ceilings and request sizes, as slurm.conf sets them.

Why: the controller answers every user from one event loop, so without a
ceiling one user's tight loop of requests (or of idle connections) costs
everyone else their turn. Slurm's answer is a token bucket per uid
(``SlurmctldParameters=rl_enable``): each request takes a token, tokens come
back at ``rl_refill_rate`` per ``rl_refill_period`` seconds up to
``rl_bucket_size``, and a request with no token left is answered
SLURMCTLD_COMMUNICATIONS_BACKOFF ("Rate limit exceeded, please retry
momentarily") without being run. Root and SlurmUser are never limited.
Slurm's defaults apply (off unless ``rl_enable``; 30 tokens, 2 per second,
8192 users tracked, the least recently seen forgotten first).

Connections: ``conmgr_max_connections`` (default 150) caps the connections
served at once on a socket; one user may hold at most a quarter of them
(Corral's rule, so one user's idle connections cannot take every slot), and
each must deliver its request within MessageTimeout (default 10 s).

Size: a request is read only up to what a submission at its ceilings needs
(``SchedulerParameters=max_script_size`` for the script, the same again for
the environment and for the arguments, and 1 MiB for the rest), checked
against its length before the body is read.
"""

from __future__ import annotations

import pwd
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.config import SlurmConfig

DEFAULT_BUCKET_SIZE = 30
DEFAULT_REFILL_RATE = 2
DEFAULT_REFILL_PERIOD = 1
DEFAULT_TABLE_SIZE = 8192
DEFAULT_MAX_CONNECTIONS = 150
DEFAULT_MESSAGE_TIMEOUT = 10
#: Slurm's default ``SchedulerParameters=max_script_size`` and its ceiling (512 MiB).
DEFAULT_MAX_SCRIPT_SIZE = 4 << 20
MAX_SCRIPT_SIZE_CEILING = 512 << 20


def max_script_size(conf: SlurmConfig) -> int:
    """``SchedulerParameters=max_script_size=N`` (bytes), else Slurm's 4 MiB."""
    value = conf.scheduler_param("max_script_size")
    if value and value.isascii() and value.isdigit():
        return min(int(value), MAX_SCRIPT_SIZE_CEILING)
    return DEFAULT_MAX_SCRIPT_SIZE


def request_limit(script_size: int) -> int:
    """The largest request a daemon reads: a submission whose script, environment and
    arguments are each at ``script_size``, and 1 MiB for the rest.

    Checked against a frame's length before its body is read, so an oversized
    request costs nothing but its four-byte header.
    """
    return 3 * script_size + (1 << 20)


@dataclass(frozen=True, slots=True)
class RateSettings:
    bucket_size: int = DEFAULT_BUCKET_SIZE
    refill_rate: int = DEFAULT_REFILL_RATE
    refill_period: int = DEFAULT_REFILL_PERIOD
    table_size: int = DEFAULT_TABLE_SIZE


@dataclass(frozen=True, slots=True)
class Limits:
    """What a daemon's client socket allows: read from slurm.conf by ``limits``."""

    rate: RateSettings | None = None  # None: rl_enable not set
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    read_timeout: float = DEFAULT_MESSAGE_TIMEOUT
    exempt: frozenset[int] = frozenset({0})  # root and SlurmUser
    max_frame: int = request_limit(DEFAULT_MAX_SCRIPT_SIZE)  # bytes of one request

    @property
    def per_user_connections(self) -> int:
        return max(1, self.max_connections // 4)


def _number(key: str, value: str, lowest: int) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < lowest:
        raise ValueError(f"bad SlurmctldParameters value '{key}={value}'")
    return int(value)


def limits(
    settings: dict[str, str], slurm_uid: int = 0, script_size: int = DEFAULT_MAX_SCRIPT_SIZE
) -> Limits:
    """``SlurmctldParameters`` and ``MessageTimeout`` (raw slurm.conf values) as ``Limits``.

    ValueError names a malformed number.
    """
    params = {}
    for item in settings.get("SlurmctldParameters", "").split(","):
        key, _, value = item.strip().partition("=")
        if key:
            params[key.lower()] = value
    rate = None
    if "rl_enable" in params:
        rate = RateSettings(
            _number("rl_bucket_size", params.get("rl_bucket_size") or "30", 1),
            _number("rl_refill_rate", params.get("rl_refill_rate") or "2", 1),
            _number("rl_refill_period", params.get("rl_refill_period") or "1", 1),
            _number("rl_table_size", params.get("rl_table_size") or "8192", 1),
        )
    connections = params.get("conmgr_max_connections") or str(DEFAULT_MAX_CONNECTIONS)
    timeout = settings.get("MessageTimeout") or str(DEFAULT_MESSAGE_TIMEOUT)
    return Limits(
        rate,
        _number("conmgr_max_connections", connections, 1),
        _number("MessageTimeout", timeout, 1),
        frozenset({0, slurm_uid}),
        request_limit(script_size),
    )


def from_config(conf: SlurmConfig) -> Limits:
    """``limits`` of a loaded slurm.conf, SlurmUser's uid looked up here."""
    try:
        slurm_uid = pwd.getpwnam(conf.slurm_user).pw_uid
    except KeyError:
        slurm_uid = 0
    return limits(dict(conf.settings), slurm_uid, max_script_size(conf))


class TokenBuckets:
    """One token bucket per uid, at most ``table_size`` of them."""

    def __init__(self, settings: RateSettings) -> None:
        self.settings = settings
        self._buckets: OrderedDict[int, tuple[float, float]] = OrderedDict()  # uid -> (tokens, at)

    def allow(self, uid: int, now: float) -> bool:
        """Take a token for ``uid`` at monotonic time ``now``; False when none is left."""
        s = self.settings
        tokens, at = self._buckets.pop(uid, (float(s.bucket_size), now))
        tokens = min(s.bucket_size, tokens + (now - at) * s.refill_rate / s.refill_period)
        allowed = tokens >= 1
        self._buckets[uid] = (tokens - 1 if allowed else tokens, now)
        if len(self._buckets) > s.table_size:
            self._buckets.popitem(last=False)  # the least recently seen user starts afresh
        return allowed


class Gate:
    """The connections a socket serves at once, and each user's request rate."""

    def __init__(self, settings: Limits) -> None:
        self.limits = settings
        self.buckets = TokenBuckets(settings.rate) if settings.rate else None
        self.open = 0
        self.by_user: dict[int, int] = {}

    def enter(self, uid: int) -> bool:
        """Count a new connection from ``uid``; False (not counted) when over a ceiling."""
        held = self.by_user.get(uid, 0)
        if self.open >= self.limits.max_connections:
            return False
        if uid not in self.limits.exempt and held >= self.limits.per_user_connections:
            return False
        self.open += 1
        self.by_user[uid] = held + 1
        return True

    def leave(self, uid: int) -> None:
        self.open -= 1
        held = self.by_user[uid] - 1
        if held:
            self.by_user[uid] = held
        else:
            del self.by_user[uid]

    def allow(self, uid: int, now: float) -> bool:
        """May ``uid`` make one more request now (the rate limit)?"""
        if self.buckets is None or uid in self.limits.exempt:
            return True
        return self.buckets.allow(uid, now)
