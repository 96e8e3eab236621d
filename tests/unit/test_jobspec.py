"""controller.jobspec: the typed JobSpec is the wire message, field for field."""

from __future__ import annotations

import dataclasses
from typing import Any

from controller.jobspec import JobSpec, from_fields, from_wire
from corral.wire import codec
from corral.wire import corral_pb2 as pb
from corral.wire.schema import MESSAGES

WIRE = {
    name: (kind, repeated, optional) for name, _, kind, repeated, optional in MESSAGES["JobSpec"]
}
FIELDS = {f.name: f for f in dataclasses.fields(JobSpec)}

#: A value for each wire kind that differs from its default.
SAMPLE: dict[str, Any] = {
    "string": "x",
    "bool": True,
    "int32": -3,
    "int64": 7,
    "uint32": 5,
    "uint64": 1 << 40,
}


def _sample(kind: str, repeated: bool) -> Any:
    if kind.startswith("map:"):
        return {"A": "1", "B": "2"}
    return ["p", "q"] if repeated else SAMPLE[kind]


def test_every_wire_field_is_a_jobspec_field_and_no_other() -> None:
    assert list(FIELDS) == list(WIRE)


def test_defaults_are_the_wires() -> None:
    """Presence fields default to None (unset), the rest to their zero value."""
    empty = JobSpec()
    for name, (kind, repeated, optional) in WIRE.items():
        value = getattr(empty, name)
        if optional:
            assert value is None, name
        elif kind.startswith("map:"):
            assert dict(value) == {}, name
        elif repeated:
            assert value == (), name
        else:
            assert value == type(SAMPLE[kind])(), name


def test_from_wire_and_from_fields_agree_on_a_message_with_every_field_set() -> None:
    fields = {name: _sample(kind, repeated) for name, (kind, repeated, _) in WIRE.items()}
    message = pb.JobSpec(**fields)
    typed = from_wire(message)
    assert typed == from_fields(codec.decode("JobSpec", message.SerializeToString()))
    for name, value in fields.items():
        got = getattr(typed, name)
        assert (dict(got) if name == "environment" else got) == (
            tuple(value) if isinstance(value, list) else value
        ), name


def test_an_empty_message_is_the_default_spec() -> None:
    assert from_wire(pb.JobSpec()) == JobSpec()
    assert from_fields(codec.decode("JobSpec", b"")) == JobSpec()


def test_zero_values_with_presence_are_kept_apart_from_unset() -> None:
    """``-N 0``-like zeros arrive as 0, not as None: admission tells them apart."""
    typed = from_wire(pb.JobSpec(min_nodes=0, requeue=False, time_limit=0))
    assert (typed.min_nodes, typed.requeue, typed.time_limit) == (0, False, 0)
