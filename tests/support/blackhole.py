"""A TCP proxy on 127.0.0.1 that can go silent: after :meth:`BlackholeProxy.blackhole` it forwards nothing more in
either direction and answers new connections with silence, yet closes no socket — a connection dropped without a
reset, as a NAT or firewall that forgot it leaves it (the far end never learns, TCP retries for many minutes).
Threads only; every socket is closed by :meth:`close`."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class BlackholeProxy:
    def __init__(self, target_port: int):
        self.target_port = target_port
        self.silent = threading.Event()
        self._closed = threading.Event()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, name="blackhole-accept", daemon=True).start()

    def _keep(self, s: socket.socket) -> socket.socket:
        with self._lock:
            self._socks.append(s)
        return s

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self._keep(client)
            if self.silent.is_set():
                continue  # accepted, never answered, never closed
            upstream = self._keep(socket.create_connection(("127.0.0.1", self.target_port)))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), name="blackhole-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            if self.silent.is_set():
                self._closed.wait()  # swallow this and everything after: no byte forwarded, no socket closed
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    def blackhole(self) -> None:
        self.silent.set()

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        with self._lock:
            for s in self._socks:
                with contextlib.suppress(OSError):
                    s.close()


@contextlib.contextmanager
def blackhole_proxy(target_port: int) -> Iterator[BlackholeProxy]:
    p = BlackholeProxy(target_port)
    try:
        yield p
    finally:
        p.close()
