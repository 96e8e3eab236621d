"""The pure parts of trust: key files, derived keys, lifetimes, the replay cache,
and credentials on messages (made for one call, refused for any other)."""

from __future__ import annotations

import ctypes.util
import os
import pwd
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from cli.corral import write_config
from corral import auth, credentials
from corral.auth import AuthError, Keys, ReplayCache
from corral.credentials import Verifier
from corral.wire import corral_pb2 as pb

KEY = b"k" * 32
CTLD = auth.controller_receiver("alpha")
SUBMIT = credentials.controller_method("Submit")


# ---------------------------------------------------------------- key files


def _key(tmp_path: Path, mode: int = 0o600) -> str:
    path = str(tmp_path / "corral.key")
    auth.create_key(path)
    os.chmod(path, mode)
    return path


def test_a_private_key_owned_by_root_or_slurmuser_is_read(tmp_path: Path) -> None:
    path = _key(tmp_path)
    assert len(auth.load_key(path, {os.getuid()})) == 64


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o660])
def test_a_key_others_may_read_or_write_is_refused_naming_file_and_mode(
    tmp_path: Path, mode: int
) -> None:
    path = _key(tmp_path, mode)
    with pytest.raises(AuthError) as refused:
        auth.load_key(path, {os.getuid()})
    assert str(refused.value) == (
        f"cluster key {path} is insecure: mode {mode:04o} lets group or others read or "
        f"write it (chmod 600 {path})"
    )


def test_a_key_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = _key(tmp_path)
    with pytest.raises(AuthError, match=f"cluster key {path} is insecure: owned by .*not by root"):
        auth.load_key(path, {os.getuid() + 1})


def test_a_jwt_key_file_is_checked_as_strictly(tmp_path: Path) -> None:
    path = tmp_path / "jwt_hs256.key"
    path.write_bytes(b"j" * 32)
    path.chmod(0o644)
    with pytest.raises(AuthError, match=f"JWT key {path} is insecure: mode 0644"):
        auth.load_jwt_key(str(path), {os.getuid()})
    path.chmod(0o600)
    assert auth.load_jwt_key(str(path), {os.getuid()}) == b"j" * 32


def test_jwt_key_replaces_the_derived_jwt_key_alone(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    _key(tmp_path)
    jwt_file = tmp_path / "jwt.key"
    jwt_file.write_bytes(b"j" * 32)
    jwt_file.chmod(0o600)
    me = pwd.getpwuid(os.getuid()).pw_name
    plain = auth.cluster_keys(str(conf), "", me)
    given = auth.cluster_keys(str(conf), f"jwt_key={jwt_file},max_token_lifespan=60", me)
    assert given.jwt == b"j" * 32 and plain.jwt != given.jwt
    assert (given.credential, given.seal) == (plain.credential, plain.seal)


def test_keys_are_separate_per_purpose() -> None:
    keys = Keys.derive(KEY)
    assert len({keys.credential, keys.seal, keys.jwt, KEY}) == 4


def test_corral_up_as_an_ordinary_user_makes_them_slurmuser(tmp_path: Path) -> None:
    """The key `corral up` writes is owned by whoever runs it; as an ordinary user the
    config names them SlurmUser, so the daemons take their key (a forked child, which
    drops to that user, writes the config and loads the keys as a daemon would)."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    directory = Path(tempfile.mkdtemp(prefix="corral-up-")) / "up"  # pytest's is root's alone
    directory.parent.chmod(0o755)
    directory.mkdir()
    os.chown(directory, user.pw_uid, user.pw_gid)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is its exit status
        code = 1
        try:
            os.setgid(user.pw_gid)
            os.setgroups([])
            os.setuid(user.pw_uid)
            conf = write_config(str(directory), 1, [])
            text = Path(conf).read_text()
            _, ttl = auth.settings_keys(conf, {"SlurmUser": user.pw_name})
            code = 0 if f"SlurmUser={user.pw_name}\n" in text and ttl == 60 else 2
        except BaseException as exc:
            print(f"child: {exc}", file=sys.stderr)
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    shutil.rmtree(directory.parent)
    assert os.waitstatus_to_exitcode(status) == 0


# ---------------------------------------------------------------- settings


def test_authinfo_ttl() -> None:
    assert auth.ttl_of("") == auth.DEFAULT_TTL == 60
    assert auth.ttl_of("cred_expire=30,ttl=15") == 15
    for bad in ("ttl=0", "ttl=soon", "ttl=-5"):
        with pytest.raises(ValueError, match="AuthInfo=ttl="):
            auth.ttl_of(bad)


def test_jwt_key_path() -> None:
    assert auth.jwt_key_path("") is None
    assert auth.jwt_key_path("disable_token_creation,jwt_key=/etc/slurm/j.key") == (
        "/etc/slurm/j.key"
    )


# ---------------------------------------------------------------- lifetimes and replays


def test_lifetimes() -> None:
    assert auth.check_times(100, 160, 160, 60) is None
    assert auth.check_times(100, 160, 161, 60) == auth.EXPIRED
    assert auth.check_times(300, 360, 200, 60) == auth.REWOUND
    assert auth.check_times(100, 1000, 150, 60) == auth.TOO_LONG


def test_the_replay_cache_admits_a_nonce_once_until_it_expires() -> None:
    cache = ReplayCache()
    assert cache.admit(b"a" * 16, 160, 100) is None
    assert cache.admit(b"a" * 16, 160, 159) == auth.REPLAYED
    assert cache.admit(b"b" * 16, 170, 160) is None
    assert len(cache) == 2
    assert cache.admit(b"c" * 16, 230, 161) is None  # a new second prunes what expired
    assert len(cache) == 2


def test_the_replay_cache_is_bounded() -> None:
    cache = ReplayCache(capacity=2)
    assert cache.admit(b"a" * 16, 110, 100) is None
    assert cache.admit(b"b" * 16, 120, 100) is None
    assert cache.admit(b"c" * 16, 120, 100) == auth.CACHE_FULL
    assert cache.admit(b"c" * 16, 120, 111) is None  # "a" expired and left


# ---------------------------------------------------------------- credentials on messages


def _submit(name: str = "job") -> pb.SubmitRequest:
    return pb.SubmitRequest(spec=pb.JobSpec(name=name, script="#!/bin/sh\ntrue\n"))


def _stamped(message: pb.SubmitRequest, *, key: bytes = KEY, ttl: int = 60) -> pb.SubmitRequest:
    stamped: pb.SubmitRequest = credentials.stamp(
        message, key, uid=1000, gid=1000, method=SUBMIT, receiver=CTLD, ttl=ttl, now=1000
    )
    return stamped


def _verifier(now: int = 1010) -> Verifier:
    return Verifier(KEY, CTLD, 60, clock=lambda: now)


def test_a_credential_names_its_caller_once() -> None:
    verifier = _verifier()
    request = _stamped(_submit())
    assert verifier.check(request, SUBMIT).uid == 1000
    with pytest.raises(AuthError, match="replayed"):
        verifier.check(request, SUBMIT)


def test_a_credential_serves_no_other_method_body_or_receiver() -> None:
    request = _stamped(_submit())
    with pytest.raises(AuthError, match=r"^Invalid authentication credential$"):
        _verifier().check(request, credentials.controller_method("Signal"))
    moved = _submit("another job")
    moved.cred.CopyFrom(request.cred)
    with pytest.raises(AuthError, match=r"^Invalid authentication credential$"):
        _verifier().check(moved, SUBMIT)
    for receiver in (auth.controller_receiver("beta"), auth.DBD_RECEIVER):
        with pytest.raises(AuthError, match=r"^Invalid authentication credential$"):
            Verifier(KEY, receiver, 60, clock=lambda: 1010).check(request, SUBMIT)


def test_a_credential_with_a_changed_field_or_another_key_is_refused() -> None:
    raised = _stamped(_submit())
    raised.cred.uid = 0
    with pytest.raises(AuthError, match=r"^Invalid authentication credential$"):
        _verifier().check(raised, SUBMIT)
    longer = _stamped(_submit())
    longer.cred.expires += 3600
    with pytest.raises(AuthError, match=r"^Invalid authentication credential$"):
        _verifier().check(longer, SUBMIT)
    with pytest.raises(AuthError, match=r"^Invalid authentication credential$"):
        _verifier().check(_stamped(_submit(), key=b"x" * 32), SUBMIT)
    with pytest.raises(AuthError, match="none given"):
        _verifier().check(_submit(), SUBMIT)


def test_an_expired_or_overlong_credential_is_refused() -> None:
    with pytest.raises(AuthError, match="expired"):
        _verifier(now=1061).check(_stamped(_submit()), SUBMIT)
    with pytest.raises(AuthError, match="longer than AuthInfo ttl"):
        _verifier().check(_stamped(_submit(), ttl=3600), SUBMIT)


def test_the_digest_ignores_the_credential_and_restores_it() -> None:
    request = _stamped(_submit())
    before = request.SerializeToString()
    assert credentials.digest(request) == credentials.digest(_submit())
    assert request.SerializeToString() == before


def test_authtype_munge_written_in_the_file_turns_munge_on(tmp_path: Path) -> None:
    if ctypes.util.find_library("munge") is None:
        pytest.skip("no libmunge")
    _key(tmp_path)
    conf = str(tmp_path / "slurm.conf")
    me = pwd.getpwuid(os.getuid()).pw_name
    plain, _ = auth.settings_keys(conf, {"SlurmUser": me})
    assert plain.munge is None and plain.signer == plain.credential
    settings = {"SlurmUser": me, "AuthType": "auth/munge", "AuthInfo": "socket=/run/m.sock,ttl=9"}
    keys, ttl = auth.settings_keys(conf, settings)
    assert keys.munge is not None and keys.signer is keys.munge
    assert (keys.munge.socket, keys.munge.ttl, ttl) == ("/run/m.sock", 9, 9)
