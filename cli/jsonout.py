"""``--json`` and ``--yaml`` of squeue and sinfo: restd's records, in Slurm's envelope.

Why through restd's builders: slurmrestd and the commands' ``--json`` print the
same data_parser records, so Corral builds them once (``restd.jobs.job_info``,
``restd.cluster.node`` and ``partition``, which take the wire's messages). The
CLI's replies are the protobuf-free codec's dicts; each record is encoded back
to its message's bytes and parsed by protobuf, which restd's builders read.
Imported only for ``--json``/``--yaml``: protobuf and the builders cost far more
than a plain listing's start-up budget.
"""

from __future__ import annotations

import json
import os
import pwd
import socket

from corral import SLURM_VERSION
from corral.wire import codec

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

#: The one data_parser these outputs follow (``--json=v0.0.42`` or none).
PARSER = "v0.0.42"


def check_parser(prog: str, value: str | None) -> str | None:
    """None if ``--json[=PARSER]``'s value is this one, else the error to print."""
    if value and value.removeprefix("data_parser/") != PARSER:
        return f"{prog}: error: --json={value} is not supported: only data_parser {PARSER} is"
    return None


def messages(kind: str, records: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The codec's dicts of message ``kind`` as protobuf messages."""
    from corral.wire import corral_pb2 as pb

    message = getattr(pb, kind)
    return [message.FromString(codec.encode(kind, dict(record))) for record in records]


def envelope(payload: dict[str, Any], argv: Sequence[str], cluster: str) -> dict[str, Any]:
    """``payload`` with data_parser's ``meta``, ``errors`` and ``warnings``."""
    major, minor, micro = SLURM_VERSION.split(".")
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = str(os.getuid())
    meta = {
        "plugin": {
            "type": "",
            "name": "",
            "data_parser": f"data_parser/{PARSER}",
            "accounting_storage": "",
        },
        "client": {"source": socket.gethostname(), "user": user, "group": ""},
        "command": list(argv),
        "slurm": {
            "version": {"major": major, "micro": micro, "minor": minor},
            "release": SLURM_VERSION,
            "cluster": cluster,
        },
    }
    return {**payload, "meta": meta, "errors": [], "warnings": []}


def render(document: dict[str, Any], as_yaml: bool) -> str:
    """The document as Slurm prints it: indented JSON, or block YAML."""
    if not as_yaml:
        return json.dumps(document, indent=2) + "\n"
    return "---\n" + "".join(_yaml(document, 0)) + "\n"


#: Characters a plain (unquoted) scalar may hold here; anything else is quoted.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./- ()=+")
#: Words YAML 1.1 readers take for booleans or null when plain.
_WORDS = frozenset({"null", "true", "false", "yes", "no", "on", "off", "y", "n"})


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    plain = (
        bool(text)
        and text[0].isascii()
        and (text[0].isalpha() or text[0] in "_/")
        and all(c in _PLAIN for c in text)
        and text.strip() == text
        and text.lower() not in _WORDS
    )
    return text if plain else _quoted(text)


#: Characters YAML will not read raw in a double-quoted scalar (besides the controls).
_ESCAPED = frozenset({0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF})


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar: escapes for what YAML will not read raw (controls,
    line separators, the byte-order mark), other characters as they are."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or code in _ESCAPED:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _yaml(value: Any, depth: int) -> Iterable[str]:
    """Block YAML lines of ``value`` (a mapping or list) at ``depth``."""
    pad = "  " * depth
    if isinstance(value, dict):
        if not value:
            yield f"{pad}{{}}\n"
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                yield f"{pad}{_scalar(key)}:\n"
                yield from _yaml(item, depth + 1)
            else:
                empty = "{}" if isinstance(item, dict) else "[]" if isinstance(item, list) else ""
                yield f"{pad}{_scalar(key)}: {empty or _scalar(item)}\n"
        return
    for item in value:
        if isinstance(item, (dict, list)) and item:
            lines = list(_yaml(item, depth + 1))
            yield f"{pad}- {lines[0].lstrip()}"
            yield from lines[1:]
        else:
            empty = "{}" if isinstance(item, dict) else "[]" if isinstance(item, list) else ""
            yield f"{pad}- {empty or _scalar(item)}\n"
