"""scontrol token's JWTs: minted for a user, refused when forged, expired or malformed."""

from __future__ import annotations

import jwt
import pytest

from corral import tokens
from corral.auth import Keys

KEY = Keys.derive(b"cluster key").jwt


def test_a_token_names_its_user_until_it_expires() -> None:
    token = tokens.mint(KEY, "alice", now=1000, lifespan=60)
    assert tokens.user_of(KEY, token, now=1059) == "alice"
    claims = jwt.decode(token, KEY, algorithms=["HS256"], options={"verify_exp": False})
    assert claims == {"sun": "alice", "iat": 1000, "exp": 1060}  # slurmrestd's claims
    with pytest.raises(tokens.TokenError, match="token expired"):
        tokens.user_of(KEY, token, now=1060)


@pytest.mark.parametrize(
    "token",
    [
        tokens.mint(Keys.derive(b"another cluster").jwt, "alice", now=1000),  # forged
        jwt.encode({"sun": "alice", "exp": 9999}, KEY * 2, algorithm="HS384"),  # not HS256
        jwt.encode({"exp": 9999}, KEY, algorithm="HS256"),  # no user
        jwt.encode({"sun": "", "exp": 9999}, KEY, algorithm="HS256"),
        "not.a.token",
        "",
    ],
)
def test_bad_tokens_are_refused(token: str) -> None:
    with pytest.raises(tokens.TokenError):
        tokens.user_of(KEY, token, now=1001)


def test_the_jwt_key_is_not_the_cluster_key() -> None:
    assert KEY != b"cluster key" and len(KEY) == 32


def test_a_jwt_key_file_replaces_the_jwt_key_alone() -> None:
    derived, given = Keys.derive(b"cluster key"), Keys.derive(b"cluster key", b"x" * 32)
    assert given.jwt == b"x" * 32
    assert (given.credential, given.seal) == (derived.credential, derived.seal)
