"""Credentials on messages: made for one call, checked once by the receiver.

Every message that crosses a trust boundary on gRPC has a ``cred`` field (a
``Credential``). ``stamp`` fills it for a call: who calls, a fresh nonce, an
expiry, and a signature (``corral.auth.seal_payload``) over the method, the
receiver, the digest of the message itself and those fields. ``Verifier`` is a
receiver's side: it recomputes all of that, refuses what does not match, and
admits each nonce once (its ``ReplayCache``).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Collection
from typing import Any

from corral import auth
from corral.auth import AuthError
from corral.munge import Munge
from corral.wire import corral_pb2 as pb

CONTROLLER_SERVICE = "/corral.v1.Controller/"
ACCOUNTING_SERVICE = "/corral.v1.Accounting/"
ATTACH = "/corral.v1.AgentLink/Attach"


def controller_method(name: str) -> str:
    return CONTROLLER_SERVICE + name


def accounting_method(name: str) -> str:
    return ACCOUNTING_SERVICE + name


def agent_message_method(kind: str) -> str:
    """What a message the controller sends on an agent's stream counts as (its kind)."""
    return f"{ATTACH}#{kind}"


def digest(message: Any) -> bytes:
    """SHA-256 of ``message`` serialized deterministically with its ``cred`` cleared.

    The field is detached and put back, not copied around: requests can be large.
    """
    had = message.HasField("cred")
    saved = pb.Credential()
    if had:
        saved.CopyFrom(message.cred)
        message.ClearField("cred")
    try:
        data: bytes = message.SerializeToString(deterministic=True)
    finally:
        if had:
            message.cred.CopyFrom(saved)
    return hashlib.sha256(data).digest()


def _unsigned(cred: pb.Credential) -> bytes:
    bare = pb.Credential()
    bare.CopyFrom(cred)
    bare.ClearField("signature")
    data: bytes = bare.SerializeToString(deterministic=True)
    return data


def stamp(
    message: Any,
    key: bytes | Munge,
    *,
    uid: int,
    gid: int,
    method: str,
    receiver: str,
    ttl: int = auth.DEFAULT_TTL,
    user: str = "",
    now: int | None = None,
) -> Any:
    """Put a credential for one call of ``method`` on ``receiver`` on ``message``;
    returns ``message``. With MUNGE (``key`` a ``Munge``) the signature is a MUNGE
    credential of this process carrying what the HMAC would cover."""
    issued = int(time.time()) if now is None else now
    cred = pb.Credential(
        uid=uid, gid=gid, user=user, issued=issued, expires=issued + ttl, nonce=auth.new_nonce()
    )
    payload = auth.seal_payload(method, receiver, digest(message), _unsigned(cred))
    cred.signature = key.encode(payload) if isinstance(key, Munge) else auth.sign(key, payload)
    message.cred.CopyFrom(cred)
    return message


class Verifier:
    """A receiver's check of credentials: its key, its name, its lifetime, its cache.

    With MUNGE, munged says who made a credential: the uid it names, or one of
    ``vouchers`` (root and SlurmUser: daemons carrying their callers' calls).
    """

    def __init__(
        self,
        key: bytes | Munge,
        receiver: str,
        ttl: int = auth.DEFAULT_TTL,
        cache: auth.ReplayCache | None = None,
        clock: Callable[[], float] = time.time,
        vouchers: Collection[int] = (0,),
    ) -> None:
        self.key = key
        self.receiver = receiver
        self.ttl = ttl
        self.cache = cache if cache is not None else auth.ReplayCache()
        self.clock = clock
        self.vouchers = frozenset(vouchers)

    def check(self, message: Any, method: str) -> pb.Credential:
        """The credential on ``message`` if it was made for this call here, now, and
        never seen before; AuthError saying why not otherwise."""
        cred: pb.Credential = message.cred
        if not message.HasField("cred") or not cred.signature:
            raise AuthError(auth.INVALID + ": none given")
        if len(cred.nonce) != auth.NONCE_BYTES:
            raise AuthError(auth.INVALID)
        payload = auth.seal_payload(method, self.receiver, digest(message), _unsigned(cred))
        if isinstance(self.key, Munge):
            self._munged(payload, cred)
        elif not auth.verify(self.key, payload, cred.signature):
            raise AuthError(auth.INVALID)
        now = int(self.clock())
        refused = auth.check_times(cred.issued, cred.expires, now, self.ttl)
        if refused is None:
            refused = self.cache.admit(cred.nonce, cred.expires, now)
        if refused is not None:
            raise AuthError(refused)
        return cred

    def _munged(self, payload: bytes, cred: pb.Credential) -> None:
        assert isinstance(self.key, Munge)
        try:
            carried, uid, _ = self.key.decode(cred.signature)
        except AuthError as exc:
            raise AuthError(f"{auth.INVALID}: {exc}") from None
        if not hmac.compare_digest(carried, payload):
            raise AuthError(auth.INVALID)
        if uid != cred.uid and uid not in self.vouchers:
            raise AuthError(f"{auth.INVALID}: uid {uid} made it for uid {cred.uid}")
