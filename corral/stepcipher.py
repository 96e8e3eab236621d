"""Encryption of srun's I/O stream: what a reader of the wire between srun and a step runner gets.

srun's step key travels to the runners inside TLS (gRPC) or the controller's
Unix socket, never on the I/O connection itself. Each runner opens its
connection with a random 16-byte salt (in clear); both ends derive two
AES-256-GCM keys from the step key and that salt, one per direction, and from
then on every byte goes in sealed records::

    !I length of what follows | AES-GCM(frames) with its 16-byte tag

The nonce of a record is its sequence number in its direction (0, 1, ...), and
the length prefix is authenticated with it, so a record changed, dropped,
replayed or moved breaks the stream (``ProtocolError``) instead of reaching a
task's stdin or srun's output. The salt makes every connection's keys fresh: a
runner started again for the same node, or a copy of an old connection, never
reuses a (key, nonce) pair. The runner's first record is its HELLO (node and
task count), so srun learns who connected only from a peer that holds the key.

Keys come from keyed BLAKE2b (RFC 7693), which takes a key, a salt and a
personalization string directly: a key derivation in one call, with no HMAC or
HKDF construction around it. This module is imported by srun after it has asked
for the step and while the runners start, so its cost hides behind that wait;
the AES-GCM class is taken from ``cryptography``'s Rust binding, the very class
``cryptography.hazmat.primitives.ciphers.aead.AESGCM`` names, without that
package's ``typing``/``enum`` imports (~8 ms of a client's start).
"""

from __future__ import annotations

import os
import struct
from _blake2 import blake2b

from corral import stepio

try:  # the class itself, without the package's Python imports
    from cryptography.hazmat.bindings._rust import openssl as _openssl

    AESGCM = _openssl.aead.AESGCM
except (ImportError, AttributeError):  # a cryptography release laid out otherwise
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
SALT_BYTES = 16
TAG_BYTES = 16
LENGTH = struct.Struct("!I")
NONCE = struct.Struct("!4xQ")
#: The largest sealed record: one frame of the largest payload (stepio.MAX_PAYLOAD), and room.
MAX_RECORD = (1 << 20) + 64
#: BLAKE2b personalization (16 bytes each): which direction a key seals.
_UP = b"corral-io-runner"
_DOWN = b"corral-io-srun.."


class CipherError(stepio.ProtocolError):
    """A record that does not open: tampered, replayed, reordered, or not from a key holder."""


def session_keys(step_key: bytes, salt: bytes) -> tuple[bytes, bytes]:
    """(runner -> srun key, srun -> runner key) of the connection that opened with ``salt``."""
    if len(salt) != SALT_BYTES:
        raise CipherError("bad salt")
    up = blake2b(key=step_key, salt=salt, person=_UP, digest_size=32).digest()
    down = blake2b(key=step_key, salt=salt, person=_DOWN, digest_size=32).digest()
    return up, down


class Sealer:
    """One direction's sending side: bytes in, records out."""

    __slots__ = ("_aead", "_seq")

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self._seq = 0

    def seal(self, data: bytes) -> bytes:
        """``data`` (whole frames) as the next record."""
        prefix = LENGTH.pack(len(data) + TAG_BYTES)
        sealed = self._aead.encrypt(NONCE.pack(self._seq), data, prefix)
        self._seq += 1
        return prefix + sealed


class Opener:
    """One direction's receiving side: bytes as they arrive in, plaintext out."""

    __slots__ = ("_aead", "_buffer", "_seq")

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self._seq = 0
        self._buffer = bytearray()

    def feed(self, data: bytes) -> bytes:
        """The plaintext of the records ``data`` completes (b"" while one is partial)."""
        self._buffer += data
        out = bytearray()
        while len(self._buffer) >= LENGTH.size:
            (length,) = LENGTH.unpack_from(self._buffer)
            if not TAG_BYTES <= length <= MAX_RECORD:
                raise CipherError(f"bad record length {length}")
            end = LENGTH.size + length
            if len(self._buffer) < end:
                break
            prefix = bytes(self._buffer[: LENGTH.size])
            try:
                out += self._aead.decrypt(
                    NONCE.pack(self._seq), bytes(self._buffer[LENGTH.size : end]), prefix
                )
            except Exception:  # InvalidTag; importing its module would import ``typing``
                raise CipherError(
                    "a record does not verify (tampered, replayed or reordered)"
                ) from None
            self._seq += 1
            del self._buffer[:end]
        return bytes(out)


#: The clear opening of a connection: a HELLO frame whose payload is the salt.
OPENING = stepio.HEADER.size + SALT_BYTES


class Session:
    """One end of an opened connection: frames sealed out, records opened into frames.

    ``feed`` has ``stepio.Reader``'s signature, so ``stepio.recv_frames`` reads
    through it unchanged.
    """

    __slots__ = ("_opener", "_reader", "_sealer")

    def __init__(self, sealer: Sealer, opener: Opener) -> None:
        self._sealer = sealer
        self._opener = opener
        self._reader = stepio.Reader()

    def seal(self, frames: bytes) -> bytes:
        return self._sealer.seal(frames)

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        return self._reader.feed(self._opener.feed(data))


def runner_session(step_key: bytes, node_id: int, ntasks: int) -> tuple[Session, bytes]:
    """The runner's session, and the bytes that open it: the salt, then the sealed HELLO."""
    salt = os.urandom(SALT_BYTES)
    up, down = session_keys(step_key, salt)
    session = Session(Sealer(up), Opener(down))
    hello = stepio.frame(stepio.HELLO, 0, stepio.NODE.pack(node_id, ntasks))
    return session, stepio.frame(stepio.HELLO, 0, salt) + session.seal(hello)


class SrunEnd:
    """srun's end of a runner's connection: waits for the salt, then is that session."""

    __slots__ = ("_key", "_raw", "session")

    def __init__(self, step_key: bytes) -> None:
        self._key = step_key
        self._raw = bytearray()
        self.session: Session | None = None

    def seal(self, frames: bytes) -> bytes:
        if self.session is None:
            raise CipherError("nothing can be sent before the runner's opening")
        return self.session.seal(frames)

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        if self.session is None:
            self._raw += data
            if len(self._raw) < OPENING:
                return []
            kind, _, length = stepio.HEADER.unpack_from(self._raw)
            if kind != stepio.HELLO or length != SALT_BYTES:
                raise CipherError("the connection does not open with a salt")
            up, down = session_keys(self._key, bytes(self._raw[stepio.HEADER.size : OPENING]))
            self.session = Session(Sealer(down), Opener(up))
            data = bytes(self._raw[OPENING:])
            self._raw.clear()
        return self.session.feed(data)
