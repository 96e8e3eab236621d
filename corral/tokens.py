"""JSON Web Tokens for the REST gateway, as ``scontrol token`` mints them.

HS256, as slurmrestd's ``auth/jwt``: the claims are ``sun`` (the user name,
Slurm's claim), ``iat`` and ``exp``. The signing key is ``corral.auth.Keys.jwt``:
derived from the cluster key (``corral.key``) rather than being it, so a token
and a message signature can never stand for each other, or the file named by
``AuthAltParameters=jwt_key=PATH``, as Slurm's. PyJWT does the encoding and the
checks (signature, expiry) that are easy to get subtly wrong by hand.
"""

from __future__ import annotations

import jwt

__all__ = ["DEFAULT_LIFESPAN", "TokenError", "mint", "user_of", "verify"]

#: scontrol token's default lifespan, seconds (Slurm's).
DEFAULT_LIFESPAN = 1800


class TokenError(Exception):
    """A token that is malformed, forged or expired; str() says which."""


def mint(key: bytes, user: str, now: int, lifespan: int = DEFAULT_LIFESPAN) -> str:
    """A token for ``user`` valid from ``now`` for ``lifespan`` seconds."""
    return jwt.encode({"sun": user, "iat": now, "exp": now + lifespan}, key, algorithm="HS256")


def user_of(key: bytes, token: str, now: int) -> str:
    """The user a valid token names; TokenError if it is not valid at ``now``."""
    return verify(key, token, now)[0]


def verify(key: bytes, token: str, now: int) -> tuple[str, int]:
    """(the user, the expiry) of a token valid at ``now``; TokenError if it is not."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=["HS256"],
            options={"require": ["exp", "sun"], "verify_exp": False},
        )
    except jwt.PyJWTError as exc:
        raise TokenError(f"invalid token: {exc}") from None
    expires = int(claims["exp"])
    if expires <= now:
        raise TokenError("token expired")
    user = claims["sun"]
    if not isinstance(user, str) or not user:
        raise TokenError("invalid token: no user")
    return user, expires
