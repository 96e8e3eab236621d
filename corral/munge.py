"""MUNGE through libmunge (ctypes): ``AuthType=auth/munge``, where munged runs.

With MUNGE, a credential's signature is a MUNGE credential whose payload is
what an HMAC would have covered (``corral.auth.seal_payload``): munged vouches
for the uid and gid of the process that made it, keeps its own replay cache and
enforces its lifetime, and no cluster key is needed to call the controller or
dbd. libmunge is loaded when first used, so hosts without it lose nothing
unless they ask for MUNGE. Calls are short round trips to the local munged.
"""

from __future__ import annotations

import ctypes
import ctypes.util

from corral.errors import AuthError

MUNGE_OPT_TTL = 4
MUNGE_OPT_SOCKET = 8
EMUNGE_SUCCESS = 0

_lib: ctypes.CDLL | None = None
_libc: ctypes.CDLL | None = None


def _libraries() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    global _lib, _libc
    if _lib is None or _libc is None:
        name = ctypes.util.find_library("munge")
        if name is None:
            raise AuthError("AuthType=auth/munge: libmunge is not installed on this host")
        lib = ctypes.CDLL(name)
        lib.munge_ctx_create.restype = ctypes.c_void_p
        lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
        lib.munge_ctx_strerror.restype = ctypes.c_char_p
        lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
        lib.munge_strerror.restype = ctypes.c_char_p
        lib.munge_strerror.argtypes = [ctypes.c_int]
        lib.munge_encode.argtypes = [
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
        ]
        lib.munge_decode.argtypes = [
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_uint32),
            ctypes.POINTER(ctypes.c_uint32),
        ]
        libc = ctypes.CDLL(None)
        libc.free.argtypes = [ctypes.c_void_p]
        _lib, _libc = lib, libc
    return _lib, _libc


class Munge:
    """A client of munged at ``socket`` (its default when empty)."""

    def __init__(self, socket: str = "", ttl: int = 0) -> None:
        self.socket = socket
        self.ttl = ttl  # 0: munged's default
        _libraries()

    def _context(self, lib: ctypes.CDLL) -> int:
        ctx: int | None = lib.munge_ctx_create()
        if not ctx:
            raise AuthError("MUNGE: cannot create a context")
        if self.socket:
            lib.munge_ctx_set(
                ctypes.c_void_p(ctx), MUNGE_OPT_SOCKET, ctypes.c_char_p(self.socket.encode())
            )
        if self.ttl:
            lib.munge_ctx_set(ctypes.c_void_p(ctx), MUNGE_OPT_TTL, ctypes.c_int(self.ttl))
        return ctx

    def _failure(self, lib: ctypes.CDLL, ctx: int, code: int) -> AuthError:
        detail = lib.munge_ctx_strerror(ctypes.c_void_p(ctx)) or lib.munge_strerror(code)
        return AuthError(f"MUNGE: {detail.decode(errors='replace')}")

    def encode(self, payload: bytes) -> bytes:
        """A MUNGE credential carrying ``payload``, made for this process's uid and gid."""
        lib, libc = _libraries()
        ctx = self._context(lib)
        cred = ctypes.c_char_p()
        try:
            code = lib.munge_encode(ctypes.byref(cred), ctypes.c_void_p(ctx), payload, len(payload))
            if code != EMUNGE_SUCCESS:
                raise self._failure(lib, ctx, code)
            value: bytes = cred.value or b""
            return value
        finally:
            if cred:
                libc.free(ctypes.cast(cred, ctypes.c_void_p))
            lib.munge_ctx_destroy(ctypes.c_void_p(ctx))

    def decode(self, credential: bytes) -> tuple[bytes, int, int]:
        """(payload, uid, gid) of a valid credential; AuthError with MUNGE's reason
        (invalid, expired, rewound, replayed) otherwise."""
        lib, libc = _libraries()
        ctx = self._context(lib)
        buf = ctypes.c_void_p()
        size = ctypes.c_int()
        uid = ctypes.c_uint32()
        gid = ctypes.c_uint32()
        try:
            code = lib.munge_decode(
                credential,
                ctypes.c_void_p(ctx),
                ctypes.byref(buf),
                ctypes.byref(size),
                ctypes.byref(uid),
                ctypes.byref(gid),
            )
            if code != EMUNGE_SUCCESS:
                raise self._failure(lib, ctx, code)
            payload = ctypes.string_at(buf, size.value) if buf.value else b""
            return payload, uid.value, gid.value
        finally:
            if buf.value:
                libc.free(buf)
            lib.munge_ctx_destroy(ctypes.c_void_p(ctx))
