"""Who a request comes from: slurmrestd's JWT headers.

``X-SLURM-USER-TOKEN: <jwt>`` (with an optional ``X-SLURM-USER-NAME``), or
``Authorization: Bearer <jwt>``; both at once is refused, as slurmrestd does.
The token is HS256 with the cluster's JWT key (``corral.tokens``), as
``scontrol token`` mints it. ``X-SLURM-USER-NAME`` may name another user only
when the token is root's or SlurmUser's (a trusted proxy acting for users);
otherwise it must name the token's own user.
"""

from __future__ import annotations

from collections.abc import Mapping

from corral import tokens

__all__ = ["AuthFailure", "Verified", "authenticate"]

#: Tokens remembered as verified (a client sends the same one with every request).
VERIFIED_MAX = 4096


class Verified:
    """Tokens already verified, with their expiry: a signature is checked once per
    token, not once per request (PyJWT's decode is most of a small request's work)."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._users: dict[str, tuple[str, int]] = {}

    def user_of(self, token: str, now: int) -> str:
        known = self._users.get(token)
        if known is not None and known[1] > now:
            return known[0]
        user, expires = tokens.verify(self.key, token, now)
        if len(self._users) >= VERIFIED_MAX:
            self._users.clear()
        self._users[token] = (user, expires)
        return user


class AuthFailure(Exception):
    """401 (no or bad token) or 403 (a valid token for something it may not do)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def authenticate(
    headers: Mapping[str, str], verified: Verified, now: int, proxies: frozenset[str]
) -> str:
    """The user name the request acts as; AuthFailure when it may not act at all.
    ``proxies``: token users who may act for others (root, SlurmUser)."""
    token = headers.get("X-SLURM-USER-TOKEN", "")
    bearer = headers.get("Authorization", "")
    if token and bearer:
        raise AuthFailure(401, "Authentication failure: both X-SLURM-USER-TOKEN and Bearer")
    if bearer:
        scheme, _, token = bearer.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthFailure(401, "Authentication failure: malformed Authorization header")
        token = token.strip()
    if not token:
        raise AuthFailure(401, "Authentication failure: no token")
    try:
        user = verified.user_of(token, now)
    except tokens.TokenError as exc:
        raise AuthFailure(401, f"Authentication failure: {exc}") from None
    asked = headers.get("X-SLURM-USER-NAME", "")
    if not asked or asked == user:
        return user
    if user in proxies:
        return asked
    raise AuthFailure(403, f"Authentication failure: {user}'s token cannot act as {asked}")
