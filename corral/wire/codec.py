"""Protobuf wire encoding without importing protobuf.

The CLI has a 30 ms budget per command and importing ``google.protobuf``
alone costs about 30 ms, so clients encode and decode the very same bytes with
this small codec, driven by the field tables that ``proto/generate.py`` writes
into ``schema.py``. Messages are plain dicts keyed by field name. Decoding fills
every field with its proto3 default; an unset ``optional`` field decodes to
``None``. Unknown fields are skipped, as protobuf does.

``tests/unit/test_codec.py`` checks this codec against the real protobuf
runtime on random messages.
"""

from __future__ import annotations

import struct

from corral.wire.schema import MESSAGES

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
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


# name -> (by_number, by_name, template)
_TABLES: dict[
    str, tuple[dict[int, tuple[str, str, bool]], dict[str, tuple[int, str, bool, bool]], Message]
] = {}


def _table(
    name: str,
) -> tuple[dict[int, tuple[str, str, bool]], dict[str, tuple[int, str, bool, bool]], Message]:
    table = _TABLES.get(name)
    if table is None:
        fields = MESSAGES[name]
        by_number = {num: (fname, kind, rep) for fname, num, kind, rep, _ in fields}
        by_name = {fname: (num, kind, rep, opt) for fname, num, kind, rep, opt in fields}
        template = {fname: _default(kind, rep, opt) for fname, _, kind, rep, opt in fields}
        table = _TABLES[name] = (by_number, by_name, template)
    return table


_CONTAINERS: dict[str, tuple[str, ...]] = {}


def _containers(name: str) -> tuple[str, ...]:
    """The repeated and map fields of ``name``, whose defaults are mutable."""
    found = _CONTAINERS.get(name)
    if found is None:
        template = _table(name)[2]
        found = tuple(f for f, v in template.items() if isinstance(v, (list, dict)))
        _CONTAINERS[name] = found
    return found


# ---------------------------------------------------------------- encoding


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
    _, by_name, _ = _table(name)
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


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _convert(kind: str, raw: int) -> Any:
    if kind == "bool":
        return raw != 0
    if kind in ("int64", "int32", "enum"):
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    if kind in _ZIGZAG:
        return (raw >> 1) ^ -(raw & 1)
    return raw


def _value(kind: str, data: bytes, start: int, end: int) -> Any:
    if kind == "string":
        return data[start:end].decode()
    if kind == "bytes":
        return data[start:end]
    return decode(kind[8:], data[start:end])


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


def decode(name: str, data: bytes) -> Message:
    """Decode protobuf bytes of message ``name`` into a dict with every field."""
    by_number, _, template = _table(name)
    message = template.copy()
    for fname in _containers(name):  # fresh lists and dicts: never share the defaults
        message[fname] = type(template[fname])()
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        field = by_number.get(number)
        if field is None:
            pos = _skip(data, pos, wire)
            continue
        fname, kind, repeated = field
        if wire == 0:
            raw, pos = _read_varint(data, pos)
            value: Any = _convert(kind, raw)
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            start, pos = pos, pos + length
            if kind.startswith("map:"):
                _, ktype, vtype = kind.split(":")
                k, v = _map_entry(data, start, pos, ktype, vtype)
                message[fname][k] = v
                continue
            if repeated and kind not in ("string", "bytes") and not kind.startswith("message:"):
                items = message[fname]
                while start < pos:
                    if kind == "double":
                        items.append(struct.unpack_from("<d", data, start)[0])
                        start += 8
                    elif kind == "float":
                        items.append(struct.unpack_from("<f", data, start)[0])
                        start += 4
                    else:
                        raw, start = _read_varint(data, start)
                        items.append(_convert(kind, raw))
                continue
            value = _value(kind, data, start, pos)
        elif wire == 1:
            value = struct.unpack_from("<d", data, pos)[0]
            pos += 8
        elif wire == 5:
            value = struct.unpack_from("<f", data, pos)[0]
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire} in {name}.{fname}")
        if repeated:
            message[fname].append(value)
        else:
            message[fname] = value
    return message


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
