"""Client calls carried to a controller's gRPC API, this cluster's or another's.

A client command speaks the framed protocol to a daemon on its host (the
controller's socket, or a node agent's), which learns the caller's uid and gid
from the kernel. To reach a controller over gRPC that daemon signs a credential
for the caller and that one call (``corral.credentials``) and makes it:
``ControllerCalls``. A node agent does so for every call to its own controller
(nodeagent/clientproxy.py); both daemons do so for a frame that names another
cluster (``-M``): ``ClusterRoutes``.

Slurm's multi-cluster operation needs one MUNGE key on every cluster; here the
clusters share the cluster key (each signs for ``corral-controller/NAME``, so a
credential made for one cluster serves no other) and the CA their controllers'
certificates come from. Where a cluster's controller is comes from the accounting
daemon they share (``sacctmgr show cluster``: ControlHost, ControlPort), asked
through the local controller's ``Clusters`` and kept for ``CACHE_S``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from corral import auth, credentials, errors, grpctls
from corral.munge import Munge
from corral.rpcerror import slurm_error
from corral.tlsconf import TlsConfig
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc

#: How long a call may take on the far side (an sbatch of a large array, sacct).
CALL_TIMEOUT_S = 120.0
#: How long the list of clusters is kept before it is asked again.
CACHE_S = 30.0

#: The clusters known now: lower-case name -> "host:port" of its controller.
Lookup = Callable[[], Awaitable[dict[str, str]]]


_STANDBY = errors.ESLURM_IN_STANDBY_MODE


def frame_error(code: int, message: str, detail: str = "") -> pb.Frame:
    return pb.Frame(code=code, error=message, detail=detail)


def _unreachable() -> pb.Frame:
    return frame_error(errors.SLURM_UNEXPECTED_MSG_ERROR, "Unable to contact slurm controller")


class ControllerCalls:
    """Signed calls to controllers' gRPC APIs on behalf of local callers, one channel
    per controller address kept open."""

    def __init__(self, key: bytes | Munge, tls: TlsConfig, ttl: int = auth.DEFAULT_TTL) -> None:
        self.key = key  # the credential key (or munged)
        self.tls = tls
        self.ttl = ttl
        self._stubs: dict[str, tuple[grpc.aio.Channel, Any]] = {}
        self._serving = ""  # the controller that last served a ``call_serving``

    async def call_serving(
        self, targets: Sequence[str], receiver: str, frame: pb.Frame, uid: int, gid: int
    ) -> pb.Frame:
        """``call`` at whichever of ``targets`` (SlurmctldHost order) serves: the one
        that served last first, then the others in order, passing over a controller
        that cannot be reached or is in standby. When none served, a standby's
        refusal if one answered (the client waits for a takeover), else the
        unreachable error."""
        order = sorted(targets, key=lambda target: target != self._serving)
        refused = None
        for target in order:
            reply = await self._call(target, receiver, frame, uid, gid)
            if reply is None:
                continue
            if reply.code != _STANDBY:
                self._serving = target
                return reply
            refused = reply
        return refused or _unreachable()

    async def call(
        self, target: str, receiver: str, frame: pb.Frame, uid: int, gid: int
    ) -> pb.Frame:
        """``frame``'s request made at ``target`` (whose credentials name it
        ``receiver``) as uid/gid; the reply, or the Slurm error, as a frame."""
        return await self._call(target, receiver, frame, uid, gid) or _unreachable()

    def _stub(self, target: str) -> Any:
        if target not in self._stubs:
            channel = grpctls.channel(target, self.tls)
            self._stubs[target] = (channel, pb_grpc.ControllerStub(channel))  # type: ignore[no-untyped-call]
        return self._stubs[target][1]

    async def _call(
        self, target: str, receiver: str, frame: pb.Frame, uid: int, gid: int
    ) -> pb.Frame | None:
        """``call``'s answer; None when ``target`` could not be reached."""
        request_type = getattr(pb, f"{frame.method}Request", None)
        call = getattr(self._stub(target), frame.method, None)
        if request_type is None or call is None:
            return frame_error(errors.SLURM_UNEXPECTED_MSG_ERROR, "unknown request")
        try:
            request = request_type.FromString(frame.body)
        except Exception:
            return frame_error(errors.ESLURM_PROTOCOL_ERROR, "malformed request")
        if "cred" in request_type.DESCRIPTOR.fields_by_name:
            request.ClearField("cred")
            credentials.stamp(
                request,
                self.key,
                uid=uid,
                gid=gid,
                method=credentials.controller_method(frame.method),
                receiver=receiver,
                ttl=self.ttl,
            )
        try:
            reply = await call(request, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            refused = slurm_error(exc)
            if exc.code() is grpc.StatusCode.UNAVAILABLE and refused.code != _STANDBY:
                return None
            return frame_error(refused.code, refused.message, refused.detail)
        return pb.Frame(method=frame.method, body=reply.SerializeToString())

    async def close(self) -> None:
        for channel, _ in self._stubs.values():
            await channel.close()
        self._stubs.clear()


class ClusterRoutes:
    """Where a frame that names another cluster is answered: that cluster's
    controller, found through ``lookup`` (kept ``CACHE_S``, asked again at once
    for a name it lacks, so a cluster registered a moment ago is found)."""

    def __init__(self, own: str, lookup: Lookup, calls: ControllerCalls) -> None:
        self.own = own.lower()
        self.lookup = lookup
        self.calls = calls
        self._known: dict[str, str] = {}
        self._asked = float("-inf")

    def elsewhere(self, frame: pb.Frame) -> bool:
        """Whether ``frame`` is for another cluster's controller."""
        return bool(frame.cluster) and frame.cluster.lower() != self.own

    async def _target(self, name: str) -> str | None:
        stale = time.monotonic() - self._asked > CACHE_S
        if stale or name not in self._known:
            self._known = await self.lookup()
            self._asked = time.monotonic()
        return self._known.get(name)

    async def call(self, frame: pb.Frame, uid: int, gid: int) -> pb.Frame:
        """Answer ``frame`` at the controller of the cluster it names."""
        name = frame.cluster.lower()
        try:
            target = await self._target(name)
        except Exception as exc:  # the local controller or dbd away: say so, as Slurm does
            failed = exc if isinstance(exc, errors.SlurmError) else None
            message = failed.message if failed else "Unable to contact slurm controller"
            return frame_error(errors.SLURM_UNEXPECTED_MSG_ERROR, message)
        if not target:
            code = errors.ESLURM_INVALID_CLUSTER_NAME
            return frame_error(code, errors.MESSAGES[code])
        forwarded = pb.Frame(method=frame.method, body=frame.body)
        return await self.calls.call(target, auth.controller_receiver(name), forwarded, uid, gid)


def targets_of(reply: pb.ClustersReply) -> dict[str, str]:
    """``Clusters``' answer as ``Lookup`` gives it: lower-case name -> host:port
    (clusters registered without an address are left out: nothing can reach them)."""
    return {c.name.lower(): f"{c.host}:{c.port}" for c in reply.clusters if c.host and c.port}


def via_controller(calls: ControllerCalls, targets: Sequence[str], receiver: str) -> Lookup:
    """A ``Lookup`` that asks this cluster's serving controller (one of ``targets``),
    as this daemon (root or SlurmUser), which clusters there are."""

    async def lookup() -> dict[str, str]:
        ask = pb.Frame(method="Clusters", body=pb.ClustersRequest().SerializeToString())
        reply = await calls.call_serving(targets, receiver, ask, os.getuid(), os.getgid())
        if reply.code:
            raise errors.SlurmError(reply.code, reply.error)
        return targets_of(pb.ClustersReply.FromString(reply.body))

    return lookup
