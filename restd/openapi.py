"""The OpenAPI 3 document at ``/openapi/v3``, written from ``restd.api.OPERATIONS``.

Nothing here is written by hand per endpoint: paths, parameters, request
bodies and reply schemas all come from the table the handlers are routed by,
so a client generated from this document speaks exactly what is served.
"""

from __future__ import annotations

from typing import Any

from corral import SLURM_VERSION, __version__
from restd.api import OPERATIONS, SCHEMAS, Operation
from restd.schema import Schema, array, integer, obj, ref, string

__all__ = ["document", "operation_id", "reply_schema"]

META = obj(
    {
        "plugin": obj(
            {
                "type": string(),
                "name": string(),
                "data_parser": string(),
                "accounting_storage": string(),
            }
        ),
        "client": obj({"source": string(), "user": string(), "group": string()}),
        "command": array(string()),
        "slurm": obj(
            {
                "version": obj({"major": string(), "micro": string(), "minor": string()}),
                "release": string(),
                "cluster": string(),
            }
        ),
    }
)
ERROR = obj(
    {
        "description": string(),
        "error_number": integer(),
        "error": string(),
        "source": string(),
    }
)
WARNING = obj({"description": string(), "source": string()})
ENVELOPE = {
    "meta": ref("openapi_meta"),
    "errors": array(ref("openapi_error")),
    "warnings": array(ref("openapi_warning")),
}


def reply_schema(op: Operation) -> Schema:
    return obj({**op.reply, **ENVELOPE}, required=("errors", "warnings"))


def operation_id(op: Operation, version: str) -> str:
    words = [op.method.lower(), op.api, version.replace(".", "_"), *op.path.split("/")]
    return "_".join(w.strip("{}") for w in words)


def _operation(op: Operation, version: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "operationId": operation_id(op, version),
        "summary": op.summary,
        "tags": [op.api],
        "parameters": [
            {
                "name": p.name,
                "in": p.where,
                "required": p.where == "path",
                "description": p.description or p.schema.get("description", ""),
                "schema": p.schema,
            }
            for p in op.params
        ],
        "responses": {
            "200": {
                "description": "done",
                "content": {"application/json": {"schema": reply_schema(op)}},
            },
            "default": {
                "description": "an error, in Slurm's envelope",
                "content": {"application/json": {"schema": ref("openapi_resp")}},
            },
        },
        "security": [{"user": [], "token": []}, {"bearer": []}],
    }
    if op.body is not None:
        spec["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": op.body}},
        }
    return spec


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        for version in op.versions:
            path = f"/{op.api}/{version}/{op.path}"
            paths.setdefault(path, {})[op.method.lower()] = _operation(op, version)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Corral REST API (Slurm-compatible)",
            "version": __version__,
            "description": (
                f"slurmrestd's API as of Slurm {SLURM_VERSION} (data parsers v0.0.40 to "
                "v0.0.42), served by corral-restd. Authenticate with a token from "
                "`scontrol token`."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": {
                **SCHEMAS,
                "openapi_meta": META,
                "openapi_error": ERROR,
                "openapi_warning": WARNING,
                "openapi_resp": obj(ENVELOPE, required=("errors", "warnings")),
            },
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "X-SLURM-USER-TOKEN"},
                "user": {"type": "apiKey", "in": "header", "name": "X-SLURM-USER-NAME"},
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            },
        },
    }
