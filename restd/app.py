"""The aiohttp application: routing by ``restd.api.OPERATIONS``, checking each
request against its schemas, and answering in Slurm's envelope.

Every answer, errors included, is JSON with ``meta``, ``errors`` and
``warnings``: a token that fails (401/403), a body that is not JSON or does
not follow its schema (400), one that is too large (413), an unknown path
(404) or method (405), and the controller's own refusals (Slurm's errno and
message). Nothing a client sends can make the gateway answer with a
traceback: an unexpected exception is logged and answered 500 in the
envelope.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from corral import SLURM_VERSION, errors
from corral.errors import SlurmError
from restd.api import OPERATIONS, SCHEMAS, Call, Operation
from restd.auth import AuthFailure, Verified, authenticate
from restd.controller import Callers, Controller
from restd.joblist import JobListing
from restd.metrics import CONTENT_TYPE, RequestMetrics
from restd.openapi import document
from restd.schema import validate

__all__ = ["Gateway", "build_app"]

log = logging.getLogger(__name__)

#: Errors that mean "no such thing" when a path names it.
_NOT_FOUND = frozenset(
    {
        errors.ESLURM_INVALID_JOB_ID,
        errors.ESLURM_INVALID_NODE_NAME,
        errors.ESLURM_INVALID_PARTITION_NAME,
        errors.ESLURM_RESERVATION_INVALID,
    }
)
_FORBIDDEN = frozenset({errors.ESLURM_ACCESS_DENIED, errors.ESLURM_USER_ID_MISSING})
_UNAVAILABLE = frozenset({errors.SLURM_UNEXPECTED_MSG_ERROR, errors.ESLURM_DB_CONNECTION})


class Gateway:
    """What every request needs: the controller, the token key, and who may proxy."""

    def __init__(
        self,
        controller: Controller,
        jwt_key: bytes,
        cluster: str,
        proxies: frozenset[str],
        max_body: int,
    ) -> None:
        self.controller = controller
        self.verified = Verified(jwt_key)
        self.callers = Callers()
        self.cluster = cluster
        self.proxies = proxies
        self.max_body = max_body
        self.metrics = RequestMetrics()
        self.listing = JobListing()
        self.openapi = orjson.dumps(document())


def _status(exc: SlurmError, op: Operation | None) -> int:
    if exc.code in _FORBIDDEN:
        return 403
    if exc.code in _NOT_FOUND and op is not None and "{" in op.path:
        return 404
    if exc.code in _UNAVAILABLE:
        return 503
    return 400


def _meta(gateway: Gateway, version: str, api: str, user: str, source: str) -> dict[str, Any]:
    major, minor, micro = SLURM_VERSION.split(".")
    return {
        "plugin": {
            "type": f"openapi/{api}",
            "name": f"Slurm OpenAPI {api}",
            "data_parser": f"data_parser/{version}",
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": source, "user": user, "group": ""},
        "command": [],
        "slurm": {
            "version": {"major": major, "micro": micro, "minor": minor},
            "release": SLURM_VERSION,
            "cluster": gateway.cluster,
        },
    }


def _error(status: int, code: int, message: str, source: str) -> web.Response:
    body = {
        "errors": [
            {"description": message, "error_number": code, "error": message, "source": source}
        ],
        "warnings": [],
    }
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _parse_query(op: Operation, request: web.Request) -> dict[str, Any]:
    """Path and query parameters, typed and checked; SlurmError for a bad one."""
    known = {p.name: p for p in op.params}
    values: dict[str, Any] = dict(request.match_info)
    for name, text in request.query.items():
        param = known.get(name)
        if param is None or param.where != "query":
            raise SlurmError(errors.EINVAL, f"Unknown query parameter: {name[:64]}")
        value: Any = text
        if param.schema.get("type") == "integer":
            if not text.isdigit():
                raise SlurmError(errors.EINVAL, f"{name}: expected an integer")
            value = int(text)
        problems = validate(param.schema, value, SCHEMAS, name)
        if problems:
            raise SlurmError(errors.EINVAL, "; ".join(problems[:5]))
        values[name] = value
    return values


async def _parse_body(op: Operation, request: web.Request) -> Any:
    if op.body is None:
        return None
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise SlurmError(errors.EINVAL, "Unable to parse the request body as JSON") from None
    problems = validate(op.body, body, SCHEMAS, "body")
    if problems:
        raise SlurmError(errors.EINVAL, "; ".join(problems[:5]))
    return body


def _handler(gateway: Gateway, op: Operation, version: str) -> Callable[..., Any]:
    source = f"{op.method} /{op.api}/{version}/{op.path}"

    async def serve(request: web.Request) -> web.Response:
        user = ""
        payload: dict[str, Any] = {}
        status = 200
        problems: list[dict[str, Any]] = []
        warnings: list[str] = []
        try:
            user = authenticate(
                request.headers, gateway.verified, int(time.time()), gateway.proxies
            )
            call = Call(
                version=version,
                caller=gateway.callers.named(user),
                params=_parse_query(op, request),
                body=await _parse_body(op, request),
                controller=gateway.controller,
                listing=gateway.listing,
            )
            payload = await op.handler(call)
            warnings = call.warnings
        except AuthFailure as exc:
            return _error(exc.status, errors.ESLURM_ACCESS_DENIED, exc.message, source)
        except SlurmError as exc:
            status = _status(exc, op)
            problems.append(
                {
                    "description": exc.message,
                    "error_number": exc.code,
                    "error": errors.MESSAGES.get(exc.code, exc.message),
                    "source": source,
                }
            )
        body = {
            **payload,
            "meta": _meta(gateway, version, op.api, user, request.remote or ""),
            "errors": problems,
            "warnings": [{"description": w, "source": source} for w in warnings],
        }
        return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")

    return serve


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _middleware(gateway: Gateway) -> Any:
    @web.middleware
    async def envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.monotonic()
        route = request.match_info.route.resource
        name = route.canonical if route is not None else "unmatched"
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = _error(exc.status, errors.EINVAL, exc.reason, request.path[:200])
            if exc.status == 404:
                response = _error(
                    404, errors.EINVAL, "Unknown path: see /openapi/v3", request.path[:200]
                )
        except Exception:
            log.exception("%s %s", request.method, request.path[:200])
            response = _error(500, errors.SLURM_UNEXPECTED_MSG_ERROR, "Internal error", "")
        gateway.metrics.observe(request.method, name, response.status, time.monotonic() - started)
        return response

    return envelope


def build_app(gateway: Gateway) -> web.Application:
    app = web.Application(client_max_size=gateway.max_body, middlewares=[_middleware(gateway)])
    # Fixed paths before templated ones: job/submit is not job/{job_id}.
    for op in sorted(OPERATIONS, key=lambda o: "{" in o.path):
        for version in op.versions:
            path = f"/{op.api}/{version}/{op.path}"
            serve = _handler(gateway, op, version)
            app.router.add_route(op.method, path, serve)
            app.router.add_route(op.method, path + "/", serve)

    async def openapi(request: web.Request) -> web.Response:
        return web.Response(body=gateway.openapi, content_type="application/json")

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=gateway.metrics.text(), headers={"Content-Type": CONTENT_TYPE})

    for path in ("/openapi/v3", "/openapi", "/openapi.json"):
        app.router.add_get(path, openapi)
    app.router.add_get("/metrics", metrics)
    return app
