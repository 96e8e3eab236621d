"""Cluster-key signatures: how daemons trust each other's messages.

The cluster key is a random secret shared by the daemons (`corral.key` beside
slurm.conf, mode 0600, owned by root or SlurmUser, written by `corral up` or the
administrator). Local CLI users need no key: the controller reads their uid from
the Unix socket (SO_PEERCRED), as MUNGE does.

No message is signed with the cluster key itself: each purpose has its own key,
derived from it under a label (``Keys``), so a signature made for one purpose
never verifies for another. A credential (``seal_payload``) names who calls,
and is bound to the call it was made for: the full method name, a digest of the
request, the receiver (which controller, dbd or agent), a random nonce and a
short lifetime. A receiver keeps the nonces it accepted until they expire
(``ReplayCache``), so a captured credential is worth nothing: it cannot be
replayed, nor moved to another method, body or receiver.

This module does not import protobuf (the client commands import it):
``corral.credentials`` puts credentials on messages.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pwd
import secrets
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from corral.errors import AuthError as AuthError  # raised here, defined there (corral.munge)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from corral.munge import Munge

KEY_BYTES = 32
NONCE_BYTES = 16

#: Seconds a credential stays valid unless AuthInfo=ttl=N says otherwise. Short, since
#: credentials are made per call; it also bounds the clock skew between hosts.
DEFAULT_TTL = 60

#: The most nonces a receiver remembers: about 8,700 credentials a second for the
#: default lifetime; past it a receiver refuses new credentials until some expire.
REPLAY_CAPACITY = 1 << 19

#: What each refusal says (the prefix is Slurm's message for a bad credential).
INVALID = "Invalid authentication credential"
EXPIRED = "Authentication credential expired"
REWOUND = "Invalid authentication credential: issued in the future (clock skew?)"
TOO_LONG = "Invalid authentication credential: lifetime longer than AuthInfo ttl"
REPLAYED = "Invalid authentication credential: replayed"
CACHE_FULL = "Authentication credential refused: too many credentials in flight"


# ---------------------------------------------------------------- key files


def key_path(slurm_conf_path: str) -> str:
    """Where the cluster key lives for a given slurm.conf."""
    return os.path.join(os.path.dirname(os.path.abspath(slurm_conf_path)), "corral.key")


def create_key(path: str) -> None:
    """Write a new random key readable only by its owner (fails if it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(KEY_BYTES) + "\n")


def daemon_uids(slurm_user: str) -> frozenset[int]:
    """root and SlurmUser (when this host knows it): the users daemons run as, so the
    only ones that may own a key file, attach as a node agent or write accounting."""
    try:
        return frozenset({0, pwd.getpwnam(slurm_user).pw_uid})
    except KeyError:
        return frozenset({0})


def check_key_file(path: str, what: str, owners: Collection[int]) -> None:
    """Refuse a key file anyone but its owner may read or write, or one not owned by
    root or SlurmUser, as munged refuses an insecure key: a key others can read is a
    key they hold, and a key another user owns is one they can replace."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise AuthError(f"cannot read {what} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AuthError(f"{what} {path} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise AuthError(
            f"{what} {path} is insecure: mode {mode:04o} lets group or others read or write "
            f"it (chmod 600 {path})"
        )
    if info.st_uid not in owners:
        raise AuthError(
            f"{what} {path} is insecure: owned by {_user(info.st_uid)}, not by root or "
            f"SlurmUser (chown it to the user the daemons run as)"
        )


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def load_key(path: str, owners: Collection[int] | None = None) -> bytes:
    """Read the cluster key, or raise AuthError saying why not (``check_key_file``).

    Daemons name the owners they accept (``daemon_uids``); a tool that reads its
    own cluster's key (a benchmark, a test) accepts root and itself.
    """
    check_key_file(path, "cluster key", {0, os.geteuid()} if owners is None else owners)
    try:
        with open(path) as src:
            text = src.read().strip()
    except OSError as exc:
        raise AuthError(f"cannot read cluster key {path}: {exc.strerror}") from None
    if len(text) < 2 * 16:
        raise AuthError(f"cluster key {path} is too short")
    return text.encode()


def load_jwt_key(path: str, owners: Collection[int]) -> bytes:
    """The HS256 key of ``AuthAltParameters=jwt_key=PATH``: the file's bytes, as Slurm's."""
    check_key_file(path, "JWT key", owners)
    try:
        with open(path, "rb") as src:
            data = src.read()
    except OSError as exc:
        raise AuthError(f"cannot read JWT key {path}: {exc.strerror}") from None
    if len(data) < 16:
        raise AuthError(f"JWT key {path} is too short (at least 16 bytes)")
    return data


# ---------------------------------------------------------------- keys


def derive(cluster_key: bytes, label: str) -> bytes:
    """The key of one purpose: HMAC-SHA256 of its label under the cluster key."""
    return hmac.new(cluster_key, b"corral key\0" + label.encode(), hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class Keys:
    """One key per purpose: who calls (credentials), what the controller asks agents to
    do (launches, signals: ``seal``), and the REST gateway's tokens (``jwt``)."""

    credential: bytes
    seal: bytes
    jwt: bytes
    munge: Munge | None = None  # AuthType=auth/munge: munged makes credentials instead

    @classmethod
    def derive(
        cls, cluster_key: bytes, jwt_key: bytes | None = None, munge: Munge | None = None
    ) -> Keys:
        """The keys of a cluster; ``jwt_key`` (AuthAltParameters=jwt_key) replaces the
        derived JWT key alone, ``munge`` the credential key alone."""
        return cls(
            credential=derive(cluster_key, "credential"),
            seal=derive(cluster_key, "controller to agent"),
            jwt=jwt_key if jwt_key is not None else derive(cluster_key, "jwt"),
            munge=munge,
        )

    @property
    def signer(self) -> bytes | Munge:
        """What makes and checks credentials: munged, or the credential key."""
        return self.munge if self.munge is not None else self.credential


# ---------------------------------------------------------------- receivers


def controller_receiver(cluster: str) -> str:
    """The receiver name of a cluster's controller (clusters may share a key)."""
    return f"corral-controller/{cluster}"


#: The receiver name of corral-dbd.
DBD_RECEIVER = "corral-dbd"


def agent_receiver(cluster: str, node: str) -> str:
    """The receiver name of the agent that attached first with ``node``."""
    return f"corral-nodeagent/{cluster}/{node}"


# ---------------------------------------------------------------- signing


def sign(key: bytes, payload: bytes) -> bytes:
    """HMAC-SHA256 of ``payload``."""
    return hmac.new(key, payload, hashlib.sha256).digest()


def verify(key: bytes, payload: bytes, signature: bytes) -> bool:
    """True when ``signature`` is ``sign(key, payload)`` (constant time)."""
    return hmac.compare_digest(sign(key, payload), signature)


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def seal_payload(method: str, receiver: str, body_digest: bytes, credential: bytes) -> bytes:
    """What a credential's signature covers: the call (method, receiver, request digest)
    and the credential's own fields (``credential``: serialized without the signature,
    so uid, gid, times and nonce are all signed)."""
    head = f"corral credential 2\0{method}\0{receiver}\0".encode()
    return head + body_digest + credential


def check_times(issued: int, expires: int, now: int, ttl: int) -> str | None:
    """Why a credential's lifetime is refused at ``now``, or None when it holds."""
    if now > expires:
        return EXPIRED
    if issued > now + ttl:
        return REWOUND
    if expires - issued > ttl:
        return TOO_LONG
    return None


class ReplayCache:
    """The nonces a receiver accepted, each until its credential expires.

    Memory is bounded twice: entries leave when they expire (pruned once a second,
    by the second they expire in), and past ``capacity`` new credentials are refused
    (only verified credentials get in, so only key holders can fill it).
    """

    def __init__(self, capacity: int = REPLAY_CAPACITY) -> None:
        self.capacity = capacity
        self._seen: set[bytes] = set()
        self._by_expiry: dict[int, list[bytes]] = {}
        self._pruned = -1

    def __len__(self) -> int:
        return len(self._seen)

    def admit(self, nonce: bytes, expires: int, now: int) -> str | None:
        """Remember ``nonce`` until ``expires``; why it is refused, or None."""
        if now != self._pruned:
            self._prune(now)
        if nonce in self._seen:
            return REPLAYED
        if len(self._seen) >= self.capacity:
            return CACHE_FULL
        self._seen.add(nonce)
        self._by_expiry.setdefault(expires, []).append(nonce)
        return None

    def _prune(self, now: int) -> None:
        self._pruned = now
        for second in [s for s in self._by_expiry if s < now]:
            self._seen.difference_update(self._by_expiry.pop(second))


# ---------------------------------------------------------------- settings


def _options(text: str) -> dict[str, str]:
    """``a=1,b,c=x`` as a dict (a flag without a value maps to "")."""
    out = {}
    for item in text.split(","):
        name, _, value = item.strip().partition("=")
        if name:
            out[name.strip().lower()] = value.strip()
    return out


def ttl_of(auth_info: str) -> int:
    """A credential's lifetime from ``AuthInfo`` (``ttl=N`` seconds, as for MUNGE);
    ValueError when N is not a positive number."""
    text = _options(auth_info).get("ttl")
    if text is None:
        return DEFAULT_TTL
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"AuthInfo=ttl={text}: expected a positive number of seconds")
    return int(text)


def jwt_key_path(alt_parameters: str) -> str | None:
    """The file of ``AuthAltParameters=jwt_key=PATH``, if any."""
    return _options(alt_parameters).get("jwt_key") or None


def cluster_keys(
    conf_path: str, alt_parameters: str, slurm_user: str, munge: Munge | None = None
) -> Keys:
    """The keys of the cluster whose slurm.conf (or slurmdbd.conf) is ``conf_path``:
    derived from the cluster key beside it, the JWT key from AuthAltParameters'
    ``jwt_key`` file if set. AuthError names the file and what is wrong with it."""
    owners = daemon_uids(slurm_user)
    cluster = load_key(key_path(conf_path), owners)
    jwt_file = jwt_key_path(alt_parameters)
    return Keys.derive(cluster, load_jwt_key(jwt_file, owners) if jwt_file else None, munge)


def settings_keys(conf_path: str, settings: Mapping[str, str]) -> tuple[Keys, int]:
    """A daemon's keys and credential lifetime from its config file's settings
    (``AuthType``, ``AuthInfo``, ``AuthAltParameters``, ``SlurmUser``); AuthError or
    ValueError. Only an ``AuthType=auth/munge`` written in the file turns MUNGE on
    (its ``AuthInfo=socket=PATH`` names munged's socket)."""
    info = settings.get("AuthInfo", "")
    ttl = ttl_of(info)
    munge = None
    if settings.get("AuthType", "").strip().lower() == "auth/munge":
        from corral.munge import Munge

        munge = Munge(_options(info).get("socket", ""), ttl)
    alt = settings.get("AuthAltParameters", "")
    return cluster_keys(conf_path, alt, settings.get("SlurmUser", "root"), munge), ttl
