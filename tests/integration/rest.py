"""A plain HTTP client for corral-restd in tests: TCP (HTTP or HTTPS) or a Unix
socket, JSON in and out, with the JWT headers slurmrestd takes."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from typing import Any
from urllib.parse import urlsplit


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Rest:
    """``base``: ``http://host:port``, ``https://host:port`` or ``unix:/path``."""

    def __init__(
        self, base: str, token: str = "", *, context: ssl.SSLContext | None = None
    ) -> None:
        self.base = base
        self.token = token
        self.context = context

    def _connection(self) -> http.client.HTTPConnection:
        if self.base.startswith("unix:"):
            return _UnixConnection(self.base[len("unix:") :], timeout=30)
        parts = urlsplit(self.base)
        if parts.scheme == "https":
            return http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=30, context=self.context
            )
        return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """One request as given; (status, body bytes)."""
        if headers is None:
            headers = {"X-SLURM-USER-TOKEN": self.token} if self.token else {}
        connection = self._connection()
        try:
            connection.request(
                method, path, body=body, headers={"Content-Type": "application/json", **headers}
            )
            reply = connection.getresponse()
            return reply.status, reply.read()
        finally:
            connection.close()

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """A JSON request; (status, the decoded reply)."""
        data = None if body is None else json.dumps(body).encode()
        status, text = self.raw(method, path, data, headers)
        return status, json.loads(text)
