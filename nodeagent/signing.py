"""The controller's signature on what it asks an agent to run (LaunchJob, LaunchStep).

Only a holder of the cluster key can make an agent run something as a user:
the controller signs every launch with it (over the message serialized
without its ``signature`` field) and the agent runs nothing whose signature
does not verify.
"""

from __future__ import annotations

from corral import auth
from corral.wire import corral_pb2 as pb

Signed = pb.LaunchJob | pb.LaunchStep


def signed_payload(msg: Signed) -> bytes:
    """The bytes the controller signs: the message without its signature.

    Deterministic serialization (map entries sorted by key) makes the
    environment map come out the same on both sides.
    """
    unsigned = type(msg)()
    unsigned.CopyFrom(msg)
    unsigned.ClearField("signature")
    payload: bytes = unsigned.SerializeToString(deterministic=True)
    return payload


def verified(key: bytes, msg: Signed) -> bool:
    """True when ``msg`` carries the controller's signature made with ``key``."""
    return auth.verify(key, signed_payload(msg), msg.signature)
