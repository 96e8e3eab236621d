"""JSON Schema building blocks, and the validator that applies them to requests.

The gateway describes every request and reply once, as JSON Schema (OpenAPI
3.0's dialect). The same objects are served in ``/openapi/v3`` and checked
against each request body and query here, so the document cannot drift from
what the handlers accept. Only the keywords the gateway uses are supported:
``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``enum``, ``oneOf``, ``minimum``, ``maximum``, ``maxLength`` and ``$ref`` into
the components this module collects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Schema = dict[str, Any]

__all__ = [
    "UNLIMITED",
    "UNSET",
    "Schema",
    "array",
    "boolean",
    "given",
    "integer",
    "limited",
    "moment",
    "no_val",
    "number",
    "obj",
    "ref",
    "string",
    "validate",
]

#: Largest unsigned 32-bit value: Slurm's ids and counts travel as uint32.
UINT32 = 0xFFFFFFFF
#: Times and sizes travel as int64; JSON clients stay within 2**53 anyway.
INT64 = 2**53


def string(description: str = "", *, enum: list[str] | None = None, max_length: int = 0) -> Schema:
    schema: Schema = {"type": "string"}
    if description:
        schema["description"] = description
    if enum:
        schema["enum"] = enum
    if max_length:
        schema["maxLength"] = max_length
    return schema


def integer(description: str = "", *, minimum: int = -INT64, maximum: int = INT64) -> Schema:
    schema: Schema = {"type": "integer", "format": "int64", "minimum": minimum, "maximum": maximum}
    if description:
        schema["description"] = description
    return schema


def number(description: str = "") -> Schema:
    schema: Schema = {"type": "number"}
    if description:
        schema["description"] = description
    return schema


def boolean(description: str = "") -> Schema:
    schema: Schema = {"type": "boolean"}
    if description:
        schema["description"] = description
    return schema


def array(items: Schema, description: str = "") -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if description:
        schema["description"] = description
    return schema


def obj(
    properties: Mapping[str, Schema],
    *,
    required: tuple[str, ...] = (),
    closed: bool = False,
    description: str = "",
) -> Schema:
    """An object; ``closed``: unknown fields are refused (request bodies)."""
    schema: Schema = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    if description:
        schema["description"] = description
    return schema


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def no_val(description: str = "", *, minimum: int = 0, maximum: int = UINT32) -> Schema:
    """Slurm's optional number: ``{"set", "infinite", "number"}`` (data_parser's
    ``*_NO_VAL``)."""
    return obj(
        {
            "set": boolean("whether the number is set"),
            "infinite": boolean("whether the value is infinite (unlimited)"),
            "number": integer(minimum=minimum, maximum=maximum),
        },
        closed=True,
        description=description,
    )


#: A ``no_val`` number that is not set, and one that is unlimited: shared, as records
#: are never changed once built, only written out.
UNSET = {"set": False, "infinite": False, "number": 0}
UNLIMITED = {"set": False, "infinite": True, "number": 0}


def given(number: int) -> dict[str, Any]:
    """A ``no_val`` number that is set."""
    return {"set": True, "infinite": False, "number": number}


def moment(seconds: int) -> dict[str, Any]:
    """A point in time as a ``no_val`` number: unset while unknown (0)."""
    return given(seconds) if seconds > 0 else UNSET


def limited(value: int, unlimited: bool) -> dict[str, Any]:
    """A limit as a ``no_val`` number: infinite when ``unlimited``."""
    return UNLIMITED if unlimited else given(value)


def no_val_input(description: str = "", *, minimum: int = 0, maximum: int = UINT32) -> Schema:
    """What a request may give for an optional number: the object, or a plain number."""
    return {
        "oneOf": [
            integer(minimum=minimum, maximum=maximum),
            no_val(minimum=minimum, maximum=maximum),
        ],
        "description": description,
    }


def validate(schema: Schema, value: Any, components: Mapping[str, Schema], where: str) -> list[str]:
    """What is wrong with ``value`` under ``schema`` (empty when nothing), each
    problem prefixed by the path of the value, e.g. ``job.tasks``."""
    if "$ref" in schema:
        return validate(components[schema["$ref"].rsplit("/", 1)[1]], value, components, where)
    if "oneOf" in schema:
        if any(not validate(option, value, components, where) for option in schema["oneOf"]):
            return []
        return [f"{where}: does not match any allowed form"]
    kind = schema.get("type")
    check = _CHECKS.get(kind) if isinstance(kind, str) else None
    if check is not None and not check(value):
        return [f"{where}: expected {kind}, got {_json_type(value)}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {', '.join(schema['enum'])}")
    if kind in ("integer", "number"):
        if value < schema.get("minimum", -INT64) or value > schema.get("maximum", INT64):
            problems.append(f"{where}: {value} is out of range")
    elif kind == "string" and len(value) > schema.get("maxLength", len(value)):
        problems.append(f"{where}: longer than {schema['maxLength']} characters")
    elif kind == "array":
        for i, item in enumerate(value):
            problems += validate(schema["items"], item, components, f"{where}[{i}]")
    elif kind == "object":
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                problems.append(f"{where}.{name}: required")
        for name, item in value.items():
            if name in properties:
                problems += validate(properties[name], item, components, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}.{name}: unknown field")
    return problems


def _json_type(value: Any) -> str:
    for name, check in _CHECKS.items():
        if check(value):
            return name
    return type(value).__name__


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
