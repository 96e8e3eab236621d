"""A TCP relay a test can cut and restore: the network between dbd and its database.

``Relay(target)`` listens on an ephemeral 127.0.0.1 port and copies bytes both
ways to ``target``. ``cut()`` closes every relayed connection and refuses new
ones (as a dead link or a stopped server looks to the client); ``restore()``
accepts again. Threads, not asyncio: the daemons under test are separate
processes, and the test's own thread only waits.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._open.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every relayed connection and refuse new ones until ``restore``."""
        self._open.clear()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for end in pair:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.cut()
        self._listener.close()
