"""corral.wire.codec against the real protobuf runtime (corral.wire.corral_pb2).

Messages are generated from the schema tables themselves, so every field of
every tested message (strings with unicode, negative and extreme integers,
optional fields set to zero, maps, repeated scalars and nested messages) is
exercised: a field added to the .proto is covered without touching this file.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.wire import codec
from corral.wire import corral_pb2 as pb
from corral.wire.schema import MESSAGES

Message = dict[str, Any]

# The messages the brief names, plus ones that cover the remaining kinds
# (double, bytes, repeated uint32, nested oneof-like wrappers).
NAMES = [
    "JobSpec",
    "JobInfo",
    "JobsReply",
    "JobControlRequest",
    "SubmitRequest",
    "NodeInfo",
    "NodesReply",
    "LaunchJob",
    "Credential",
    "AgentMessage",
    "ControllerMessage",
    "JobsRequest",
    "PartitionsReply",
    "JobDone",
]

_INT_RANGES = {
    "uint32": (0, 2**32 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "sint32": (-(2**31), 2**31 - 1),
    "sint64": (-(2**63), 2**63 - 1),
}
_ZERO: dict[str, Any] = {"string": "", "bytes": b"", "bool": False, "double": 0.0, "float": 0.0}


def _fields(name: str) -> dict[str, tuple[int, str, bool, bool]]:
    return {f: (num, kind, rep, opt) for f, num, kind, rep, opt in MESSAGES[name]}


def scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        edges = sorted({lo, hi, 0, 1, max(lo, -1), min(hi, 127), min(hi, 128)})
        return st.one_of(st.sampled_from(edges), st.integers(lo, hi))
    if kind == "bool":
        return st.booleans()
    if kind == "string":
        return st.one_of(st.text(max_size=12), st.sampled_from(["", "ü", "日本語", "🐄", "a\x00b"]))
    if kind == "bytes":
        return st.binary(max_size=12)
    if kind == "double":
        return st.one_of(st.just(-0.0), st.floats(allow_nan=False))
    if kind == "float":
        return st.one_of(st.just(-0.0), st.floats(width=32, allow_nan=False))
    raise AssertionError(f"no strategy for {kind}")


def field_value(kind: str, repeated: bool, depth: int) -> st.SearchStrategy[Any]:
    if kind.startswith("map:"):
        _, ktype, vtype = kind.split(":")
        return st.dictionaries(scalar(ktype), scalar(vtype), max_size=3)
    if kind.startswith("message:"):
        sub = kind[8:]
        one: st.SearchStrategy[Any] = (
            st.deferred(lambda: message(sub, depth + 1)) if depth < 2 else st.just({})
        )
    else:
        one = scalar(kind)
    return st.lists(one, max_size=3) if repeated else one


def _oneofs(name: str) -> list[list[str]]:
    """Real oneof groups (proto3 ``optional`` makes one-field synthetic ones: not those)."""
    groups = getattr(pb, name).DESCRIPTOR.oneofs
    return [[f.name for f in g.fields] for g in groups if len(g.fields) > 1]


@functools.cache
def message(name: str, depth: int = 0) -> st.SearchStrategy[Message]:
    """Any subset of ``name``'s fields, each set to any value of its kind (zero included).

    Of a oneof group at most one member is set, as protobuf keeps only one.
    """
    values = {
        fname: field_value(kind, rep, depth) for fname, (_, kind, rep, _) in _fields(name).items()
    }
    groups = _oneofs(name)
    grouped = {f for g in groups for f in g}
    plain = st.fixed_dictionaries(
        {}, optional={f: v for f, v in values.items() if f not in grouped}
    )
    for group in groups:
        choice = st.one_of(st.just({}), *[values[f].map(_only(f)) for f in group])
        plain = st.tuples(plain, choice).map(_merged)
    return plain


def _only(fname: str) -> Callable[[Any], Message]:
    return lambda value: {fname: value}


def _merged(pair: tuple[Message, Message]) -> Message:
    return {**pair[0], **pair[1]}


def to_pb(name: str, msg: Message) -> Any:
    """The protobuf object for a codec dict (nested dicts become nested messages)."""
    fields = _fields(name)
    kwargs: dict[str, Any] = {}
    for fname, value in msg.items():
        _, kind, repeated, _ = fields[fname]
        if kind.startswith("message:"):
            sub = kind[8:]
            kwargs[fname] = [to_pb(sub, v) for v in value] if repeated else to_pb(sub, value)
        else:
            kwargs[fname] = value
    return getattr(pb, name)(**kwargs)


def decoded(name: str, msg: Message) -> Message:
    """What codec.decode must return for ``msg``: every field, defaults filled in."""
    out: Message = {}
    for fname, (_, kind, repeated, optional) in _fields(name).items():
        if fname in msg:
            value = msg[fname]
            if kind.startswith("message:"):
                sub = kind[8:]
                value = [decoded(sub, v) for v in value] if repeated else decoded(sub, value)
            out[fname] = value
        elif kind.startswith("map:"):
            out[fname] = {}
        elif repeated:
            out[fname] = []
        elif optional or kind.startswith("message:"):
            out[fname] = None
        else:
            out[fname] = _ZERO.get(kind, 0)
    return out


# ---------------------------------------------------------------- properties


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_protobuf_bytes_decode_to_the_same_message(name: str, data: st.DataObject) -> None:
    msg = data.draw(message(name))
    wire = to_pb(name, msg).SerializeToString()
    assert codec.decode(name, wire) == decoded(name, msg)


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_codec_encoding_parses_in_protobuf(name: str, data: st.DataObject) -> None:
    msg = data.draw(message(name))
    assert getattr(pb, name).FromString(codec.encode(name, msg)) == to_pb(name, msg)


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_pb_codec_pb_round_trip(name: str, data: st.DataObject) -> None:
    original = to_pb(name, data.draw(message(name)))
    again = codec.encode(name, codec.decode(name, original.SerializeToString()))
    assert getattr(pb, name).FromString(again) == original


_BYTE_EXACT = ["JobSpec", "JobInfo", "NodeInfo", "Credential", "LaunchJob"]


def _byte_exact_fields(name: str) -> list[str]:
    """Scalar and map fields (protobuf packs repeated scalars; the codec does not)."""
    return [
        fname
        for fname, (_, kind, rep, _) in _fields(name).items()
        if not rep and not kind.startswith("message:")
    ]


@pytest.mark.parametrize("name", _BYTE_EXACT, ids=_BYTE_EXACT)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_single_field_bytes_are_identical(name: str, data: st.DataObject) -> None:
    """Field by field, the codec writes exactly protobuf's bytes (tags, varints, lengths)."""
    fname = data.draw(st.sampled_from(_byte_exact_fields(name)))
    _, kind, repeated, _ = _fields(name)[fname]
    value = data.draw(field_value(kind, repeated, depth=1))
    if kind.startswith("map:"):
        value = dict(list(value.items())[:1])  # protobuf may order map entries differently
    msg = {fname: value}
    assert codec.encode(name, msg) == to_pb(name, msg).SerializeToString()


# ---------------------------------------------------------------- unknown fields

# Above every field number in the schema (fields added apart from others are numbered 120+).
_TOP = max(f.number for m in pb.DESCRIPTOR.message_types_by_name.values() for f in m.fields)
_UNKNOWN_NUMBER = st.integers(_TOP + 1, 536_870_911)
_UNKNOWN = st.one_of(
    st.tuples(_UNKNOWN_NUMBER, st.just(0), st.integers(0, 2**64 - 1)),
    st.tuples(_UNKNOWN_NUMBER, st.just(1), st.binary(min_size=8, max_size=8)),
    st.tuples(_UNKNOWN_NUMBER, st.just(2), st.binary(max_size=20)),
    st.tuples(_UNKNOWN_NUMBER, st.just(5), st.binary(min_size=4, max_size=4)),
)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _unknown_field(number: int, wire: int, payload: int | bytes) -> bytes:
    key = _varint((number << 3) | wire)
    if isinstance(payload, int):
        return key + _varint(payload)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


@pytest.mark.parametrize(
    "name",
    ["JobSpec", "JobsReply", "JobControlRequest"],
    ids=["JobSpec", "JobsReply", "JobControlRequest"],
)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_unknown_fields_are_skipped(name: str, data: st.DataObject) -> None:
    msg = data.draw(message(name))
    # Encode field by field so every gap between fields is a place to insert junk.
    pieces = [codec.encode(name, {k: v}) for k, v in msg.items()]
    junk = data.draw(st.lists(_UNKNOWN, max_size=4))
    for number, wire, payload in junk:
        at = data.draw(st.integers(0, len(pieces)))
        pieces.insert(at, _unknown_field(number, wire, payload))
    wire_bytes = b"".join(pieces)
    assert codec.decode(name, wire_bytes) == decoded(name, msg)
    # protobuf agrees on the known part
    parsed = getattr(pb, name).FromString(wire_bytes)
    parsed.DiscardUnknownFields()
    assert parsed == to_pb(name, msg)


def _wire_types(kind: str, repeated: bool) -> set[int]:
    """The wire types a field of ``kind`` may arrive in (repeated scalars also packed)."""
    if kind in ("string", "bytes") or kind.startswith(("message:", "map:")):
        return {2}
    scalar = {"double": 1, "float": 5}.get(kind, 0)
    return {scalar, 2} if repeated else {scalar}


def _payload(wire: int) -> st.SearchStrategy[int | bytes]:
    if wire == 0:
        return st.integers(0, 2**64 - 1)
    if wire == 2:
        return st.binary(max_size=20)
    return st.binary(min_size=8 if wire == 1 else 4, max_size=8 if wire == 1 else 4)


@pytest.mark.parametrize("name", ["JobInfo", "JobSpec", "JobsReply"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_known_field_with_a_foreign_wire_type_is_skipped(name: str, data: st.DataObject) -> None:
    """As protobuf does, a known field number in a wire type its kind never uses is unknown."""
    msg = data.draw(message(name))
    pieces = [codec.encode(name, {k: v}) for k, v in msg.items()]
    fields = _fields(name)
    for _ in range(data.draw(st.integers(1, 3))):
        number, kind, repeated, _ = fields[data.draw(st.sampled_from(sorted(fields)))]
        wire = data.draw(st.sampled_from(sorted({0, 1, 2, 5} - _wire_types(kind, repeated))))
        junk = _unknown_field(number, wire, data.draw(_payload(wire)))
        pieces.insert(data.draw(st.integers(0, len(pieces))), junk)
    wire_bytes = b"".join(pieces)
    assert codec.decode(name, wire_bytes) == decoded(name, msg)
    parsed = getattr(pb, name).FromString(wire_bytes)
    parsed.DiscardUnknownFields()
    assert parsed == to_pb(name, msg)


@pytest.mark.parametrize(
    "wire",
    [
        pb.JobInfo(name="x" * 40).SerializeToString()[:-1],  # a string cut short
        pb.JobInfo(submit_time=2**40).SerializeToString()[:-1],  # a varint cut short
        pb.JobsReply(jobs=[pb.JobInfo(name="x")]).SerializeToString()[:-1],  # a nested message
        pb.NodeInfo(cpu_load=1.5).SerializeToString()[:-1],  # a double
    ],
    ids=["string", "varint", "nested", "double"],
)
def test_truncated_message_is_refused(wire: bytes) -> None:
    """Bytes that end inside a field are an error, not a shorter value, as in protobuf."""
    name = {0x0A: "JobsReply", 0x32: "JobInfo", 0xE0: "JobInfo"}.get(wire[0], "NodeInfo")
    with pytest.raises((ValueError, IndexError, struct.error)):
        codec.decode(name, wire)
    with pytest.raises(DecodeError):
        getattr(pb, name).FromString(wire)


@pytest.mark.parametrize("size", [127, 128, 300, 16383, 16384, 70000])
def test_long_strings_and_many_records(size: int) -> None:
    """One-, two- and three-byte lengths, tags and varints on both sides of each boundary."""
    jobs = [
        {"job_id": size + i, "name": "ü" * (size // 2), "submit_time": 2**35 + i, "nice": -i}
        for i in range(3)
    ]
    wire = to_pb("JobsReply", {"jobs": jobs, "now": size}).SerializeToString()
    assert codec.decode("JobsReply", wire) == decoded("JobsReply", {"jobs": jobs, "now": size})


# ---------------------------------------------------------------- optional presence

OPTIONALS = [
    ("JobSpec", "min_nodes", 0),
    ("JobSpec", "num_tasks", 0),
    ("JobSpec", "mem_per_node", 0),
    ("JobSpec", "time_limit", 0),
    ("JobSpec", "time_limit", -1),
    ("JobSpec", "requeue", False),
    ("JobSpec", "priority", 0),
    ("JobInfo", "array_task_id", 0),
    ("LaunchJob", "array_task_id", 0),
]


@pytest.mark.parametrize(
    ("name", "fname", "value"),
    OPTIONALS,
    ids=[f"{n}.{f}={v}" for n, f, v in OPTIONALS],
)
def test_optional_field_set_to_zero_is_present(name: str, fname: str, value: Any) -> None:
    encoded = codec.encode(name, {fname: value})
    assert encoded, "an optional field set to its zero value must still be written"
    assert getattr(pb, name).FromString(encoded).HasField(fname)
    assert codec.decode(name, encoded)[fname] == value
    assert codec.decode(name, encoded)[fname] is not None
    assert codec.decode(name, to_pb(name, {fname: value}).SerializeToString())[fname] == value


@pytest.mark.parametrize(
    ("name", "fname"),
    [(n, f) for n, f, _ in OPTIONALS if _ != -1],
    ids=[f"{n}.{f}" for n, f, v in OPTIONALS if v != -1],
)
def test_unset_optional_field_decodes_to_none(name: str, fname: str) -> None:
    assert codec.decode(name, b"")[fname] is None
    assert codec.decode(name, getattr(pb, name)().SerializeToString())[fname] is None


@pytest.mark.parametrize(
    ("name", "msg"),
    [
        ("JobSpec", {"nice": 0, "hold": False, "name": "", "argv": [], "environment": {}}),
        ("JobInfo", {"job_id": 0, "state_flags": [], "cpus_per_node": []}),
        ("JobsReply", {"jobs": [], "now": 0}),
    ],
    ids=["jobspec-zero-scalars", "jobinfo-zero-scalars", "jobsreply-empty"],
)
def test_non_optional_zero_values_are_not_written(name: str, msg: Message) -> None:
    assert codec.encode(name, msg) == b""


def test_none_values_are_left_out() -> None:
    assert (
        codec.encode("JobSpec", {"min_nodes": None, "name": "x"})
        == pb.JobSpec(name="x").SerializeToString()
    )


def test_unknown_field_name_is_refused() -> None:
    with pytest.raises(KeyError, match="no_such_field"):
        codec.encode("JobSpec", {"no_such_field": 1})


def test_empty_nested_message_is_present() -> None:
    encoded = codec.encode("SubmitRequest", {"spec": {}})
    assert pb.SubmitRequest.FromString(encoded).HasField("spec")
    assert codec.decode("SubmitRequest", encoded)["spec"] == decoded("JobSpec", {})
    assert codec.decode("SubmitRequest", b"")["spec"] is None


def test_negative_int32_and_int64_round_trip() -> None:
    msg: dict[str, Any] = {"nice": -5, "begin_time": -(2**63), "time_limit": -1}
    wire = pb.JobSpec(**msg).SerializeToString()
    got = codec.decode("JobSpec", wire)
    assert (got["nice"], got["begin_time"], got["time_limit"]) == (-5, -(2**63), -1)
    assert pb.JobSpec.FromString(codec.encode("JobSpec", msg)) == pb.JobSpec(**msg)


def test_packed_repeated_uint32_is_decoded() -> None:
    wire = pb.JobInfo(cpus_per_node=[1, 300, 2**32 - 1]).SerializeToString()
    assert codec.decode("JobInfo", wire)["cpus_per_node"] == [1, 300, 2**32 - 1]


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def test_negative_zero_double_round_trips() -> None:
    original = pb.NodeInfo(cpu_load=-0.0)
    wire = original.SerializeToString()
    assert wire  # protobuf writes -0.0: its sign bit makes it not the default
    decoded_msg = codec.decode("NodeInfo", wire)
    assert _bits(decoded_msg["cpu_load"]) == _bits(-0.0)
    again = codec.encode("NodeInfo", decoded_msg)
    assert again == wire
    assert math.copysign(1.0, pb.NodeInfo.FromString(again).cpu_load) == -1.0


def test_positive_zero_double_is_not_written() -> None:
    assert codec.encode("NodeInfo", {"cpu_load": 0.0}) == b""


def test_decoded_defaults_are_not_shared_between_messages() -> None:
    first = codec.decode("JobSpec", b"")
    first["argv"].append("leaked")
    first["environment"]["LEAKED"] = "1"
    second = codec.decode("JobSpec", b"")
    assert (second["argv"], second["environment"]) == ([], {})


def _containers(msg: Message) -> list[list[Any] | dict[Any, Any]]:
    return [v for v in msg.values() if isinstance(v, list | dict)]


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_no_decoded_container_is_shared(name: str) -> None:
    """Every list and map of every message is a fresh object, also after decoding data."""
    fresh = [codec.decode(name, b"") for _ in range(2)]
    full = codec.decode(name, to_pb(name, {}).SerializeToString())
    for msg in [*fresh, full]:
        for value in _containers(msg):
            if isinstance(value, list):
                value.append("leaked")
            else:
                value["leaked"] = "leaked"
    again = codec.decode(name, b"")
    assert again == decoded(name, {})
    ids = [id(v) for m in (*fresh, full, again) for v in _containers(m)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_decoding_does_not_change_later_decodes(name: str, data: st.DataObject) -> None:
    """Decoding a message with repeated fields and maps set leaves the defaults empty."""
    wire = to_pb(name, data.draw(message(name))).SerializeToString()
    codec.decode(name, wire)
    assert codec.decode(name, b"") == decoded(name, {})
