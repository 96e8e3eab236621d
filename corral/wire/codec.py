"""Protobuf wire encoding without importing protobuf.

The CLI has a 30 ms budget per command and importing ``google.protobuf``
alone costs about 30 ms, so clients encode and decode the very same bytes with
this small codec, driven by the field tables that ``proto/generate.py`` writes
into ``schema.py``. Messages are plain dicts keyed by field name. Decoding fills
every field with its proto3 default; an unset ``optional`` field decodes to
``None``. Unknown fields are skipped, as protobuf does, and so is a known field
that arrives with a wire type its kind never uses (protobuf keeps such a field
as unknown too). Bytes that end inside a field raise an exception rather than
decode to a shorter value.

``tests/unit/test_codec.py`` checks this codec against the real protobuf
runtime on random messages.
"""

from __future__ import annotations

import struct

from corral.wire.schema import MESSAGES

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

Message = dict[str, "Any"]

_VARINT = frozenset({"int64", "uint64", "int32", "uint32", "bool", "enum"})
_ZIGZAG = frozenset({"sint32", "sint64"})
_DEFAULTS: dict[str, Any] = {
    "double": 0.0,
    "float": 0.0,
    "string": "",
    "bytes": b"",
    "bool": False,
}


def _default(kind: str, repeated: bool, optional: bool) -> Any:
    if repeated:
        return []
    if optional or kind.startswith("message:"):
        return None
    if kind.startswith("map:"):
        return {}
    return _DEFAULTS.get(kind, 0)


# ---------------------------------------------------------------- encoding

# name -> {field: (number, kind, repeated, optional)}
_BY_NAME: dict[str, dict[str, tuple[int, str, bool, bool]]] = {}


def _fields_by_name(name: str) -> dict[str, tuple[int, str, bool, bool]]:
    by_name = _BY_NAME.get(name)
    if by_name is None:
        by_name = _BY_NAME[name] = {
            fname: (num, kind, rep, opt) for fname, num, kind, rep, opt in MESSAGES[name]
        }
    return by_name


def _is_default(kind: str, value: Any) -> bool:
    """proto3 omits default scalars; -0.0 is not the default (its sign bit is set)."""
    if kind in ("double", "float"):
        return bool(value == 0.0 and struct.pack("<d", value) == b"\0" * 8)
    return bool(value == _DEFAULTS.get(kind, 0))


def _varint(value: int, out: bytearray) -> None:
    if value < 0:
        value += 1 << 64
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _scalar(number: int, kind: str, value: Any, out: bytearray) -> None:
    if kind in _VARINT:
        _varint(number << 3, out)
        _varint(int(value), out)
    elif kind in _ZIGZAG:
        _varint(number << 3, out)
        _varint((value << 1) ^ (value >> 63), out)
    elif kind == "string" or kind == "bytes":
        data = value.encode() if isinstance(value, str) else bytes(value)
        _varint((number << 3) | 2, out)
        _varint(len(data), out)
        out += data
    elif kind == "double":
        _varint((number << 3) | 1, out)
        out += struct.pack("<d", value)
    elif kind == "float":
        _varint((number << 3) | 5, out)
        out += struct.pack("<f", value)
    elif kind.startswith("message:"):
        data = encode(kind[8:], value)
        _varint((number << 3) | 2, out)
        _varint(len(data), out)
        out += data
    else:
        raise TypeError(f"unsupported field kind {kind}")


def encode(name: str, message: Message) -> bytes:
    """Encode ``message`` (a dict of field values) as protobuf message ``name``."""
    by_name = _fields_by_name(name)
    out = bytearray()
    for fname, value in message.items():
        if value is None:
            continue
        try:
            number, kind, repeated, optional = by_name[fname]
        except KeyError:
            raise KeyError(f"{name} has no field {fname!r}") from None
        if kind.startswith("map:"):
            _, ktype, vtype = kind.split(":")
            for k, v in value.items():
                entry = bytearray()
                _scalar(1, ktype, k, entry)
                _scalar(2, vtype, v, entry)
                _varint((number << 3) | 2, out)
                _varint(len(entry), out)
                out += entry
        elif repeated:
            for item in value:
                _scalar(number, kind, item, out)
        elif optional or kind.startswith("message:") or not _is_default(kind, value):
            _scalar(number, kind, value, out)
    return bytes(out)


# ---------------------------------------------------------------- decoding
#
# Decoding is a client's hot path: a 10,000-job squeue reply holds 100,000 fields
# or more, and every Python-level step per field shows in its wall time. So each
# message gets a table, built on first use, that maps a whole tag as it appears
# on the wire (field number and wire type together) straight to the field name
# and an operation code; the loop in ``_fill`` handles the common kinds inline,
# reads one-byte tags, lengths and varints without a call, decodes each string
# with one slice, and decodes nested messages in place rather than slicing them
# out. Rarer kinds (zigzag, floating point, bytes, maps, repeated scalars) go
# through ``_other``.

# Operation codes. The loop hands _MAP and above to ``_other`` and tests the
# rest in this order, the most frequent first.
_STRING = 0
_UNSIGNED = 1
_SIGNED = 2
_BOOL = 3
_APPEND_MESSAGE = 4
_MESSAGE = 5
_APPEND_STRING = 6
_MAP = 7
_OTHER = 8
_SKIP = 9

_WIRE_TYPES = {"double": (1,), "float": (5,)}  # every other scalar is a varint (0)
#: Singular scalars the loop decodes inline; the others (zigzag, floating point) go to _other.
_SCALAR_OPS = {
    "uint32": _UNSIGNED,
    "uint64": _UNSIGNED,
    "int32": _SIGNED,
    "int64": _SIGNED,
    "enum": _SIGNED,
    "bool": _BOOL,
}


class _Decoder:
    """One message's decoding table: tag -> (field, operation, argument), and its defaults.

    ``lists`` and ``maps`` are the repeated and map fields, whose defaults are
    mutable and so are made fresh for every decoded message.
    """

    __slots__ = ("lists", "maps", "name", "ops", "template")

    def __init__(self, name: str) -> None:
        self.name = name
        self.ops: dict[int, tuple[str, int, Any]] = {}
        self.template: Message = {}
        self.lists: tuple[str, ...] = ()
        self.maps: tuple[str, ...] = ()


#: ``decode``'s ``narrow``: (message name, the fields to keep) pairs.
Narrowing = tuple[tuple[str, tuple[str, ...]], ...]

_DECODERS: dict[tuple[str, Narrowing], _Decoder] = {}


def _decoder(name: str, narrow: Narrowing = ()) -> _Decoder:
    """Message ``name``'s table, built on first use and kept: a client decodes few kinds.

    A message that ``narrow`` names gets a table of its listed fields alone: the
    others are skipped on the wire and absent from the decoded dict.
    """
    key = (name, narrow)
    found = _DECODERS.get(key)
    if found is not None:
        return found
    decoder = _DECODERS[key] = _Decoder(name)  # registered first: messages may nest themselves
    ops = decoder.ops
    keep = dict(narrow).get(name)
    for fname, number, kind, repeated, optional in MESSAGES[name]:
        if keep is not None and fname not in keep:
            for wire in (0, 1, 2, 5):
                ops[(number << 3) | wire] = (fname, _SKIP, None)
            continue
        default = decoder.template[fname] = _default(kind, repeated, optional)
        if isinstance(default, list):
            decoder.lists += (fname,)
        elif isinstance(default, dict):
            decoder.maps += (fname,)
        delimited = (number << 3) | 2
        if kind.startswith("message:"):
            op = _APPEND_MESSAGE if repeated else _MESSAGE
            ops[delimited] = (fname, op, _decoder(kind[8:], narrow))
        elif kind.startswith("map:"):
            _, ktype, vtype = kind.split(":")
            ops[delimited] = (fname, _MAP, (ktype, vtype))
        elif kind == "string":
            ops[delimited] = (fname, _APPEND_STRING if repeated else _STRING, None)
        elif kind == "bytes":
            ops[delimited] = (fname, _OTHER, (kind, repeated))
        else:
            for wire in _WIRE_TYPES.get(kind, (0,)):
                op = _OTHER if repeated else _SCALAR_OPS.get(kind, _OTHER)
                ops[(number << 3) | wire] = (fname, op, (kind, repeated))
            if repeated:  # packed
                ops[delimited] = (fname, _OTHER, (kind, repeated))
    return decoder


def decode(name: str, data: bytes, narrow: Narrowing = ()) -> Message:
    """Decode protobuf bytes of message ``name`` into a dict with every field.

    Bytes that are not such a message raise ValueError, whatever part of them is
    wrong (a varint or fixed field running past the end included), so a caller
    has one error to expect.

    ``narrow`` names messages (at any depth) of which only some fields are wanted,
    e.g. ``(("JobInfo", ("job_id", "state")),)``: their dicts hold just those. A
    listing of 100,000 jobs that reads 21 of JobInfo's 119 fields is then 100,000
    small dicts instead of large ones, a fraction of the memory to fill and to
    walk again (squeue's sort and columns).
    """
    try:
        return _fill(_decoder(name, narrow), data, 0, len(data), {})
    except (IndexError, struct.error) as exc:
        raise ValueError(f"truncated {name} message") from exc


def _fill(decoder: _Decoder, data: bytes, pos: int, end: int, strings: dict[bytes, str]) -> Message:
    """The message encoded in ``data[pos:end]``; ``strings`` holds the strings decoded so far.

    The same few strings (user, partition, state, reason) recur in every record
    of a long listing; reusing one object for each saves memory and time.
    """
    message = decoder.template.copy()
    for fname in decoder.lists:  # fresh lists and dicts: never share the mutable defaults
        message[fname] = []
    for fname in decoder.maps:
        message[fname] = {}
    ops = decoder.ops
    while pos < end:
        tag = data[pos]
        pos += 1
        if tag > 0x7F:  # two bytes: field numbers 16 to 2047
            second = data[pos]
            if second > 0x7F:
                tag, pos = _varint_rest(data, pos, tag)
            else:
                tag = (tag & 0x7F) | (second << 7)
                pos += 1
        try:
            fname, op, arg = ops[tag]
        except KeyError:  # an unknown field (a rare case: try costs nothing until it fails)
            pos = _skip(data, pos, tag & 7)
            continue
        if op >= _MAP:
            pos = _other(message, fname, op, arg, tag & 7, data, pos)
            continue
        value = data[pos]  # the varint, or the length of a delimited field
        pos += 1
        if value > 0x7F:
            value, pos = _varint_rest(data, pos, value)
        if op == _STRING:
            start = pos
            pos += value
            raw = data[start:pos]
            text = strings.get(raw)
            if text is None:
                text = strings[raw] = raw.decode()
            message[fname] = text
        elif op == _UNSIGNED:
            message[fname] = value
        elif op == _SIGNED:
            message[fname] = value - 0x10000000000000000 if value > 0x7FFFFFFFFFFFFFFF else value
        elif op == _BOOL:
            message[fname] = value != 0
        elif op == _APPEND_MESSAGE:
            start = pos
            pos += value
            message[fname].append(_fill(arg, data, start, pos, strings))
        elif op == _MESSAGE:
            start = pos
            pos += value
            message[fname] = _fill(arg, data, start, pos, strings)
        else:  # _APPEND_STRING
            start = pos
            pos += value
            message[fname].append(data[start:pos].decode())
    if pos > end:
        raise ValueError(f"truncated {decoder.name} message")
    return message


#: The last nine bytes of -1 as a varint: Slurm's INFINITE and UNLIMITED (time limits)
#: are -1, ten bytes on the wire, common enough to skip the loop for.
_MINUS_ONE_TAIL = b"\xff" * 8 + b"\x01"


def _varint_rest(data: bytes, pos: int, first: int) -> tuple[int, int]:
    """A varint whose first byte, ``first`` (continuation bit set), was read before ``pos``."""
    if first == 0xFF and data.startswith(_MINUS_ONE_TAIL, pos):
        return 0xFFFFFFFFFFFFFFFF, pos + 9
    result = first & 0x7F
    shift = 7
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    return _varint_rest(data, pos + 1, byte)


def _convert(kind: str, raw: int) -> Any:
    if kind == "bool":
        return raw != 0
    if kind in ("int64", "int32", "enum"):
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    if kind in _ZIGZAG:
        return (raw >> 1) ^ -(raw & 1)
    return raw


def _other(
    message: Message, fname: str, op: int, arg: Any, wire: int, data: bytes, pos: int
) -> int:
    """Decode one field of a rarer kind into ``message``; return the position after it."""
    if op == _SKIP:
        return _skip(data, pos, wire)
    if op == _MAP:
        length, pos = _read_varint(data, pos)
        key, entry = _map_entry(data, pos, pos + length, *arg)
        message[fname][key] = entry
        return pos + length
    kind, repeated = arg
    if wire == 0:
        raw, pos = _read_varint(data, pos)
        value: Any = _convert(kind, raw)
    elif wire == 1:
        value = struct.unpack_from("<d", data, pos)[0]
        pos += 8
    elif wire == 5:
        value = struct.unpack_from("<f", data, pos)[0]
        pos += 4
    else:
        length, pos = _read_varint(data, pos)
        start, pos = pos, pos + length
        if kind != "bytes":  # a packed run of repeated scalars
            _unpack(message[fname], kind, data, start, pos)
            return pos
        value = data[start:pos]
    if repeated:
        message[fname].append(value)
    else:
        message[fname] = value
    return pos


def _unpack(items: list[Any], kind: str, data: bytes, pos: int, end: int) -> None:
    while pos < end:
        if kind == "double":
            items.append(struct.unpack_from("<d", data, pos)[0])
            pos += 8
        elif kind == "float":
            items.append(struct.unpack_from("<f", data, pos)[0])
            pos += 4
        else:
            raw, pos = _read_varint(data, pos)
            items.append(_convert(kind, raw))


def _value(kind: str, data: bytes, start: int, end: int) -> Any:
    """A map entry's length-delimited key or value: a string, bytes or a message; any
    other kind does not come length-delimited (a malformed entry: ValueError)."""
    if kind == "string":
        return data[start:end].decode()
    if kind == "bytes":
        return data[start:end]
    if kind.startswith("message:"):
        return decode(kind[8:], data[start:end])
    raise ValueError(f"a length-delimited map entry of type {kind}")


def _skip(data: bytes, pos: int, wire: int) -> int:
    if wire == 0:
        return _read_varint(data, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    if wire == 2:
        length, pos = _read_varint(data, pos)
        return pos + length
    raise ValueError(f"unsupported wire type {wire}")


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """A serialized message's fields in wire order, undecoded: (number, value), a
    varint's value or a length-delimited field's bytes; fixed-width ones are skipped.
    For readers that want a message's parts as bytes (restd's job listing)."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        wire = key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield key >> 3, value
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            if pos + length > end:
                raise ValueError("truncated message")
            yield key >> 3, data[pos : pos + length]
            pos += length
        else:
            pos = _skip(data, pos, wire)


def _map_entry(data: bytes, pos: int, end: int, ktype: str, vtype: str) -> tuple[Any, Any]:
    key: Any = _DEFAULTS.get(ktype, 0)
    value: Any = _DEFAULTS.get(vtype, 0)
    while pos < end:
        tag, pos = _read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        kind = ktype if number == 1 else vtype
        if wire == 0:
            raw, pos = _read_varint(data, pos)
            item: Any = _convert(kind, raw)
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            item = _value(kind, data, pos, pos + length)
            pos += length
        else:
            pos = _skip(data, pos, wire)
            continue
        if number == 1:
            key = item
        else:
            value = item
    return key, value
