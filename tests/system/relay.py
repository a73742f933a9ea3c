"""A TCP relay on the loopback interface standing in for the network between two machines: the
test can cut it (every connection through it closed, new ones refused) and restore it."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.broker import HOST

__all__ = ["Relay"]


class Relay:
    """Forwards connections made to ``HOST:port`` to ``HOST:target_port``, byte for byte (TLS
    passes through untouched), one thread per direction of each connection."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._server = socket.create_server((HOST, 0))
        self.port: int = self._server.getsockname()[1]
        self._up = True
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="relay", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:  # closed
                return
            with self._lock:
                up = self._up
            try:
                if not up:
                    raise ConnectionRefusedError("the link is cut")
                upstream = socket.create_connection((HOST, self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def cut(self) -> None:
        """The network goes down: both ends see their connection closed."""
        with self._lock:
            self._up = False
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self.cut()
        self._server.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
