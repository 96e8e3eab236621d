"""Cluster-key signatures: how daemons trust each other's messages.

The cluster key is a random secret shared by the controller and node agents
(`corral.key` beside slurm.conf, mode 0600, written by `corral up` or the
administrator). The controller signs every LaunchJob with it, so an agent runs
nothing a stranger sent; agents and API clients sign their credentials with it.
Local CLI users need no key: the controller reads their uid from the Unix
socket (SO_PEERCRED), as MUNGE does.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KEY_BYTES = 32


class AuthError(CorralError):
    """A missing key or a signature that does not verify."""


def key_path(slurm_conf_path: str) -> str:
    """Where the cluster key lives for a given slurm.conf."""
    return os.path.join(os.path.dirname(os.path.abspath(slurm_conf_path)), "corral.key")


def create_key(path: str) -> None:
    """Write a new random key readable only by its owner (no-op if it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(KEY_BYTES) + "\n")


def load_key(path: str) -> bytes:
    """Read the cluster key, or raise AuthError saying why not."""
    try:
        with open(path) as src:
            text = src.read().strip()
    except OSError as exc:
        raise AuthError(f"cannot read cluster key {path}: {exc.strerror}") from None
    if len(text) < 2 * 16:
        raise AuthError(f"cluster key {path} is too short")
    return text.encode()


def sign(key: bytes, payload: bytes) -> bytes:
    """HMAC-SHA256 of ``payload``."""
    return hmac.new(key, payload, hashlib.sha256).digest()


def verify(key: bytes, payload: bytes, signature: bytes) -> bool:
    """True when ``signature`` is ``sign(key, payload)`` (constant time)."""
    return hmac.compare_digest(sign(key, payload), signature)


#: Seconds a signed credential stays valid (clock skew between hosts included).
CREDENTIAL_TTL = 300


def credential_payload(uid: int, gid: int, issued: int) -> bytes:
    """What a ``Credential`` signs: who, and when it was issued."""
    return f"{uid}:{gid}:{issued}".encode()


def credential(key: bytes, uid: int, gid: int, now: int) -> dict[str, Any]:
    """A signed ``Credential`` (as a dict for the wire) saying ``uid``/``gid`` calls."""
    signature = sign(key, credential_payload(uid, gid, now))
    return {"uid": uid, "gid": gid, "issued": now, "signature": signature}


def check_credential(
    key: bytes, uid: int, gid: int, issued: int, signature: bytes, now: int
) -> str | None:
    """Why a credential is refused (Slurm's wording), or None when it holds."""
    if not signature or not verify(key, credential_payload(uid, gid, issued), signature):
        return "Invalid authentication credential"
    if abs(now - issued) > CREDENTIAL_TTL:
        return "Authentication credential expired"
    return None
