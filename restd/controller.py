"""The gateway's calls to the controller: gRPC, signed as the caller.

restd holds the cluster key, as a node agent does: it signs a ``Credential``
for the user its token names and for that one call (``corral.credentials``), so
the controller applies that user's rights (their own jobs only, PrivateData,
operator checks) exactly as for the CLI.
Errors come back as the ``SlurmError`` the controller raised.
"""

from __future__ import annotations

import pwd
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from corral import auth, credentials, errors, grpctls
from corral.errors import SlurmError
from corral.munge import Munge
from corral.rpcerror import slurm_error
from corral.tlsconf import TlsConfig
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc

__all__ = ["Caller", "Callers", "Controller"]

#: A listing of 10,000 jobs is a few MiB; gRPC's default cap is 4 MiB.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),
    ("grpc.max_send_message_length", 64 << 20),
]
CALL_TIMEOUT_S = 60.0


class Caller:
    """The user a request acts as (from its token)."""

    __slots__ = ("gid", "home", "name", "uid")

    def __init__(self, name: str, uid: int, gid: int, home: str = "/tmp") -> None:
        self.name = name
        self.uid = uid
        self.gid = gid
        self.home = home

    @classmethod
    def named(cls, name: str) -> Caller:
        """The local account ``name``; SlurmError if this host does not know it."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise SlurmError(errors.ESLURM_USER_ID_MISSING, f"Invalid user: {name}") from None
        return cls(name, entry.pw_uid, entry.pw_gid, entry.pw_dir or "/tmp")


class Callers:
    """Local accounts by name, looked up at most once a minute each."""

    TTL_S = 60.0

    def __init__(self) -> None:
        self._known: dict[str, tuple[Caller, float]] = {}

    def named(self, name: str) -> Caller:
        now = time.monotonic()
        known = self._known.get(name)
        if known is not None and now - known[1] < self.TTL_S:
            return known[0]
        caller = Caller.named(name)
        if len(self._known) >= 4096:
            self._known.clear()
        self._known[name] = (caller, now)
        return caller


class Controller:
    """One gRPC channel per SlurmctldHost line, shared by every request; a call goes
    to the controller that served last, and on to the next line's when that one
    cannot be reached or is a backup in standby (docs/ha.md)."""

    def __init__(
        self,
        targets: Sequence[str],
        key: bytes | Munge,
        receiver: str,
        tls: TlsConfig,
        ttl: int = auth.DEFAULT_TTL,
    ) -> None:
        self.targets = list(targets)
        self.key = key  # the credential key (or munged)
        self.receiver = receiver  # the controller's name in credentials
        self.ttl = ttl
        self.channels = [grpctls.channel(t, tls, options=CHANNEL_OPTIONS) for t in self.targets]
        self.stubs: list[Any] = [
            pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
            for channel in self.channels
        ]
        self.serving = 0  # the index of the controller that answered last
        self._raw: list[dict[str, Any]] = [{} for _ in self.targets]

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()

    def _request(self, method: str, caller: Caller | None, fields: dict[str, Any]) -> Any:
        request = getattr(pb, f"{method}Request")(**fields)
        if caller is not None:
            credentials.stamp(
                request,
                self.key,
                uid=caller.uid,
                gid=caller.gid,
                user=caller.name,
                method=credentials.controller_method(method),
                receiver=self.receiver,
                ttl=self.ttl,
            )
        return request

    async def _serving(self, attempt: Callable[[int], Awaitable[Any]]) -> Any:
        """``attempt(index)`` at the serving controller: the last one that served,
        then the others in order; the last refusal when none serves."""
        order = [self.serving, *(i for i in range(len(self.targets)) if i != self.serving)]
        refused: SlurmError | None = None
        for index in order:
            try:
                reply = await attempt(index)
            except grpc.aio.AioRpcError as exc:
                refused = slurm_error(exc)
                if exc.code() is grpc.StatusCode.UNAVAILABLE:
                    continue  # away, or a backup in standby: the next line's controller
                raise refused from None
            self.serving = index
            return reply
        assert refused is not None
        raise refused

    async def call(self, method: str, caller: Caller | None, **fields: Any) -> Any:
        """``method`` with a request made of ``fields``, signed for ``caller``."""

        async def attempt(index: int) -> Any:
            request = self._request(method, caller, fields)  # a credential is good once
            return await getattr(self.stubs[index], method)(request, timeout=CALL_TIMEOUT_S)

        return await self._serving(attempt)

    async def call_raw(self, method: str, caller: Caller | None, **fields: Any) -> bytes:
        """The same call, its reply left serialized (``restd.joblist`` splits it)."""

        async def attempt(index: int) -> bytes:
            call = self._raw[index].get(method)
            if call is None:
                call = self._raw[index][method] = self.channels[index].unary_unary(
                    f"/corral.v1.Controller/{method}",
                    request_serializer=_serialize,
                    response_deserializer=None,
                )
            reply: bytes = await call(self._request(method, caller, fields), timeout=CALL_TIMEOUT_S)
            return reply

        data: bytes = await self._serving(attempt)
        return data


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data
