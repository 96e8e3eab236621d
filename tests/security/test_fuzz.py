"""Fuzzing the controller's framed socket: random bytes and random messages, no crash, no hang.

A real controller (one per module) takes, from an ordinary user: every
request type with random field values (built from the schema tables, encoded
by the CLI's codec), random bytes as request bodies, and broken frames
(truncated, lying lengths, garbage, nothing). Each connection must be
answered with a frame or closed within the timeout, and afterwards the
controller still answers Ping and its process is alive. The codec itself
must turn random bytes into a message or a ValueError, never anything else.
Example counts are bounded so the module runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.service import METHODS
from corral.wire import codec
from corral.wire.schema import MESSAGES
from tests.integration.cluster import TEST_USERS, Cluster

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
TIMEOUT_S = 10.0

_INTS = {
    "uint32": (0, 2**32 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "sint32": (-(2**31), 2**31 - 1),
    "sint64": (-(2**63), 2**63 - 1),
}


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        lo, hi = _INTS[kind]
        return st.one_of(st.sampled_from([lo, hi, 0, 1]), st.integers(lo, hi))
    if kind in ("bool", "enum"):
        return st.booleans() if kind == "bool" else st.integers(0, 3)
    if kind == "string":
        return st.one_of(st.text(max_size=20), st.sampled_from(["0", "-1", "ALL", "*", "1-3"]))
    if kind == "bytes":
        return st.binary(max_size=20)
    return st.floats(width=32 if kind == "float" else 64, allow_nan=False)


def _message(name: str, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Any subset of ``name``'s fields with random values (nested two levels deep)."""
    values: dict[str, st.SearchStrategy[Any]] = {}
    for fname, _, kind, repeated, _ in MESSAGES[name]:
        if kind.startswith("map:"):
            _, ktype, vtype = kind.split(":")
            values[fname] = st.dictionaries(_scalar(ktype), _scalar(vtype), max_size=3)
            continue
        if kind.startswith("message:"):
            if depth >= 2:
                continue
            one = _message(kind[8:], depth + 1)
        else:
            one = _scalar(kind)
        values[fname] = st.lists(one, max_size=3) if repeated else one
    return st.fixed_dictionaries({}, optional=values)


@contextlib.contextmanager
def _as_user(name: str) -> Iterator[None]:
    """Connections opened inside are the user's: SO_PEERCRED records the effective ids."""
    user = pwd.getpwnam(name)
    os.setegid(user.pw_gid)
    os.seteuid(user.pw_uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Cluster]:
    """A controller whose socket an ordinary user can reach (pytest's directories are 0700)."""
    if os.geteuid() != 0:
        pytest.skip("acting as an ordinary user needs root")
    for name in TEST_USERS[:1]:
        try:
            pwd.getpwnam(name)
        except KeyError:
            pytest.skip(f"no user {name} (the integration tests' users fixture creates it)")
    top = Path(tempfile.mkdtemp(prefix="corral-fuzz-", dir="/tmp"))
    top.chmod(0o755)
    c = Cluster(top / "cluster", nodes=1, settings=("MessageTimeout=2",))
    try:
        yield c.start()
        assert c.controller is not None and c.controller.poll() is None, "controller died"
        assert c.client.call("Ping") is not None
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def _exchange(c: Cluster, data: bytes, close_write: bool = True) -> bytes:
    """Send ``data`` as the test user; what comes back before the controller closes."""
    with _as_user(TEST_USERS[0]):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(c.socket)
    with sock:
        sock.settimeout(TIMEOUT_S)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
            if close_write:
                sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:  # socket.timeout here is the hang this suite looks for
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _framed(method: str, body: bytes) -> bytes:
    frame = codec.encode("Frame", {"method": method, "body": body})
    return struct.pack(">I", len(frame)) + frame


def _reply(raw: bytes) -> dict[str, Any]:
    (size,) = struct.unpack(">I", raw[:4])
    assert len(raw) == 4 + size
    return dict(codec.decode("Frame", raw[4:]))


def _still_serving(c: Cluster) -> None:
    assert c.controller is not None and c.controller.poll() is None, "controller died"
    assert _reply(_exchange(c, _framed("Ping", b"")))["code"] == 0


# ------------------------------------------------------------ every request type


@st.composite
def _requests(draw: st.DrawFn) -> tuple[str, bytes]:
    method = draw(st.sampled_from(METHODS))
    message = draw(_message(f"{method}Request"))
    if method == "Submit":  # nothing random runs: the job waits held
        message.setdefault("spec", {})["hold"] = True
    return method, codec.encode(f"{method}Request", message)


@FUZZ
@given(request=_requests())
def test_random_requests_of_every_type_are_answered(
    fuzzed: Cluster, request: tuple[str, bytes]
) -> None:
    method, body = request
    reply = _reply(_exchange(fuzzed, _framed(method, body)))
    assert reply["code"] or reply["method"] == method
    _still_serving(fuzzed)


@FUZZ
@given(method=st.sampled_from([*METHODS, "Nope", ""]), body=st.binary(max_size=200))
def test_random_bytes_as_a_request_body_are_answered(
    fuzzed: Cluster, method: str, body: bytes
) -> None:
    reply = _reply(_exchange(fuzzed, _framed(method, body)))
    assert reply["code"] or reply["method"] == method


# ------------------------------------------------------------ the framing itself


@FUZZ
@given(
    length=st.one_of(st.integers(0, 64), st.sampled_from([2**31, 2**32 - 1, 64 << 20])),
    body=st.binary(max_size=64),
)
def test_lying_lengths_and_garbage_frames_end_cleanly(
    fuzzed: Cluster, length: int, body: bytes
) -> None:
    raw = _exchange(fuzzed, struct.pack(">I", length) + body)
    if raw:  # an answer is one whole frame; otherwise the connection was closed
        assert _reply(raw)["code"] or len(body) >= length


@FUZZ
@given(garbage=st.binary(max_size=3))
def test_a_truncated_header_ends_cleanly(fuzzed: Cluster, garbage: bytes) -> None:
    assert _exchange(fuzzed, garbage) == b""


def test_a_frame_cut_short_and_left_open_is_dropped(fuzzed: Cluster) -> None:
    """The client keeps the connection open: the read timeout, not EOF, ends it."""
    assert _exchange(fuzzed, struct.pack(">I", 50) + b"x" * 10, close_write=False) == b""
    _still_serving(fuzzed)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(MESSAGES)), data=st.binary(max_size=64))
def test_the_codec_decodes_random_bytes_or_refuses_them(name: str, data: bytes) -> None:
    with contextlib.suppress(ValueError):
        codec.decode(name, data)


def test_a_map_value_of_the_wrong_wire_type_is_refused() -> None:
    """A QosLimitsRecord whose grp_tres entry (string to int64) carries its value
    length-delimited: refused as malformed (ValueError), not a KeyError from looking
    up a message type named by the value's kind (hypothesis found it, above)."""
    entry = b"\x0a\x01c" + b"\x12\x01x"  # key "c", value field 2 as bytes
    with pytest.raises(ValueError, match="length-delimited map entry of type int64"):
        codec.decode("QosLimitsRecord", b"\x6a" + bytes([len(entry)]) + entry)
