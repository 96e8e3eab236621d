"""The agent's side of trust with the controller: its hello's credential, and the
check of the controller's credential on every message it receives.

Only a holder of the cluster key can make an agent run or signal anything: every
message on the stream carries the controller's credential, made with the seal
key (``corral.auth.Keys``) for this agent, this kind of message and this message's
contents, by root or SlurmUser, with a nonce the agent admits once and a short
lifetime. A message without it is not acted on.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from corral import auth, credentials
from corral.credentials import Verifier
from corral.wire import corral_pb2 as pb


class AgentAuth:
    """The keys, names and lifetime an agent's stream needs."""

    def __init__(
        self, keys: auth.Keys, cluster: str, name: str, ttl: int, controllers: Collection[int]
    ) -> None:
        self.keys = keys
        self.ttl = ttl
        self.controller = auth.controller_receiver(cluster)
        self.controllers = frozenset(controllers)  # uids the controller may run as
        self.inbound = Verifier(keys.seal, auth.agent_receiver(cluster, name), ttl)

    def hello(self, hello: pb.AgentHello) -> pb.AgentHello:
        """``hello`` with this agent's credential for this stream (its own uid)."""
        stamped: pb.AgentHello = credentials.stamp(
            hello,
            self.keys.signer,
            uid=os.getuid(),
            gid=os.getgid(),
            method=credentials.ATTACH,
            receiver=self.controller,
            ttl=self.ttl,
        )
        return stamped

    def refusal(self, message: pb.ControllerMessage) -> str | None:
        """Why a controller message must not be acted on, or None when it may."""
        kind = message.WhichOneof("body") or ""
        try:
            cred = self.inbound.check(message, credentials.agent_message_method(kind))
        except auth.AuthError as exc:
            return str(exc)
        if cred.uid not in self.controllers:
            return f"uid {cred.uid} is not root or SlurmUser"
        return None
