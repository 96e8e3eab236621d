"""The controller's refusals back from gRPC: it aborts a call with the detail
``"<Slurm errno>: <message>"`` (controller/service.py), and every gRPC client
that speaks for users (the node agent's client proxy, restd) turns that back into
the ``SlurmError`` it was. Daemons only: this imports grpc."""

from __future__ import annotations

import grpc

from corral import errors
from corral.errors import SlurmError

__all__ = ["slurm_error"]


def slurm_error(exc: grpc.aio.AioRpcError) -> SlurmError:
    """The Slurm error a failed call stands for; an unreachable controller is
    Slurm's "Unable to contact slurm controller"."""
    detail = exc.details() or ""
    code, sep, message = detail.partition(": ")
    if sep and code.isdigit():
        return SlurmError(int(code), message)
    if exc.code() is grpc.StatusCode.UNAVAILABLE:
        return SlurmError(errors.SLURM_UNEXPECTED_MSG_ERROR, "Unable to contact slurm controller")
    return SlurmError(errors.SLURM_UNEXPECTED_MSG_ERROR, detail or exc.code().name)
