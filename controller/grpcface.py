"""The Controller service's gRPC face: every request must carry a credential made
for exactly that call (``authenticate``), passes the per-user rate limit, and is run
by ``Handlers`` (``controller/service.py``); domain errors become gRPC statuses
through one table (``GRPC_STATUS``). The CLI's framed socket is the other face
(``controller/framed.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc

from controller.principal import Principal, principal_for
from controller.service import METHODS, Dispatcher, Encoded
from corral import auth, credentials, errors
from corral.credentials import Verifier
from corral.errors import SlurmError
from corral.ratelimit import Gate
from corral.wire import corral_pb2_grpc as pb_grpc

GRPC_STATUS: dict[int, grpc.StatusCode] = {
    errors.ESLURM_ACCESS_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    errors.ESLURM_INVALID_JOB_ID: grpc.StatusCode.NOT_FOUND,
    errors.ESLURM_INVALID_NODE_NAME: grpc.StatusCode.NOT_FOUND,
    errors.ESLURM_INVALID_PARTITION_NAME: grpc.StatusCode.NOT_FOUND,
    errors.ESLURM_ALREADY_DONE: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ESLURM_JOB_PENDING: grpc.StatusCode.FAILED_PRECONDITION,
    errors.SLURMCTLD_COMMUNICATIONS_BACKOFF: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.EAGAIN: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.ESLURM_IN_STANDBY_MODE: grpc.StatusCode.UNAVAILABLE,
}


def authenticate(verifier: Verifier, request: Any, method: str) -> Principal:
    """Who calls ``method`` with ``request`` (a credential made for exactly this call,
    here, never seen before), or SlurmError."""
    try:
        cred = verifier.check(request, credentials.controller_method(method))
    except auth.AuthError as exc:
        raise SlurmError(errors.ESLURM_ACCESS_DENIED, str(exc)) from None
    return principal_for(cred.uid, cred.gid)


class GrpcController(pb_grpc.ControllerServicer):
    """The gRPC face of ``Handlers``: every request must carry a credential made for it."""

    def __init__(self, handlers: Dispatcher, verifier: Verifier, gate: Gate) -> None:
        self.handlers = handlers
        self.verifier = verifier
        self.gate = gate  # the per-user rate limit, keyed by the credential's uid
        for method in METHODS:
            setattr(self, method, self._wrap(method))

    def _wrap(self, method: str) -> Callable[..., Any]:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                if method == "Ping":
                    who = principal_for(0, 0)
                else:
                    who = authenticate(self.verifier, request, method)
                    if not self.gate.allow(who.uid, time.monotonic()):
                        raise SlurmError(errors.SLURMCTLD_COMMUNICATIONS_BACKOFF)
                reply = await self.handlers.dispatch(method, request, who)
                return reply.message() if isinstance(reply, Encoded) else reply
            except SlurmError as exc:
                await context.abort(
                    GRPC_STATUS.get(exc.code, grpc.StatusCode.INVALID_ARGUMENT),
                    f"{exc.code}: {exc.message}",
                )

        return call
