"""A service's handlers on a gRPC server, with request bytes parsed by our code.

The generated ``add_*Servicer_to_server`` lets grpc hand a unary call's bytes to
protobuf itself: bytes that do not parse end the call with UNKNOWN and a
seven-line traceback logged at ERROR, for every such call, before any credential
is looked at, so anyone able to connect could fill a daemon's log with them.
Here a unary request that does not parse reaches the handler as ``Unparsed`` and
is refused with Slurm's "Protocol error" (INVALID_ARGUMENT) and one log line. A
stream's messages (AgentLink) are parsed as they are read, inside the handler,
which already ends a stream whose message does not parse with one log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from corral import errors
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)

#: The refusal of a request that does not parse, as the controller words its errors.
PROTOCOL_ERROR = f"{errors.ESLURM_PROTOCOL_ERROR}: {errors.MESSAGES[errors.ESLURM_PROTOCOL_ERROR]}"


class Unparsed:
    """What a unary request whose bytes do not parse becomes."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _parser(kind: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return kind.FromString(data)
        except DecodeError as exc:
            return Unparsed(str(exc))

    return parse


def _refusing_unparsed(method: str, behaviour: Any) -> Any:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, Unparsed):
            log.warning("%s from %s did not parse: %s", method, context.peer(), request.reason)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, PROTOCOL_ERROR)
        return await behaviour(request, context)

    return handle


def add_service(server: grpc.aio.Server, name: str, servicer: Any) -> None:
    """Serve ``servicer``'s methods as the proto's service ``name`` (e.g. "Controller")."""
    service = pb.DESCRIPTOR.services_by_name[name]
    handlers = {}
    for method in service.methods:
        request = getattr(pb, method.input_type.name)
        reply = getattr(pb, method.output_type.name)
        behaviour = getattr(servicer, method.name)
        if method.client_streaming and method.server_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                behaviour,
                request_deserializer=request.FromString,
                response_serializer=reply.SerializeToString,
            )
        elif not method.client_streaming and not method.server_streaming:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _refusing_unparsed(f"{name}/{method.name}", behaviour),
                request_deserializer=_parser(request),
                response_serializer=reply.SerializeToString,
            )
        else:
            raise TypeError(f"{service.full_name}/{method.name}: a half-streaming method")
    generic = grpc.method_handlers_generic_handler(service.full_name, handlers)
    server.add_generic_rpc_handlers((generic,))
