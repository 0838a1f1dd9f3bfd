"""How commands reach a host: a Fabric ``Connection`` (ssh) or an Invoke ``Context`` (local), and tunnels.

Both expose ``.run()``, so every remote function takes one of them as ``c`` and runs unchanged over SSH or
locally. SSH host keys are checked against known_hosts and unknown keys are *rejected* (paramiko
``RejectPolicy``) unless the host says ``accept_new_host_key: true``; Fabric's own default would accept
any key. Transient network failures on connect are retried with tenacity; authentication and host-key
failures are not.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
from pathlib import Path
from typing import Iterator

from ..config import HostConfig
from ..errors import ConnectError

log = logging.getLogger(__name__)


def _parse_gateway(spec: str) -> tuple[str | None, str, int]:
    user = None
    if "@" in spec:
        user, spec = spec.split("@", 1)
    port = 22
    if spec.count(":") == 1:
        spec, p = spec.split(":")
        port = int(p)
    return user, spec, port


def _ssh_client_setup(conn, host: HostConfig) -> None:
    import paramiko

    known = Path(os.path.expanduser(host.known_hosts or "~/.ssh/known_hosts"))
    if known.exists():
        conn.client.load_host_keys(str(known))
    if host.accept_new_host_key:
        conn.client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    else:
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())


def _connection(host: HostConfig, *, address: str, user: str | None, port: int, gateway=None):
    from fabric import Config, Connection

    connect_kwargs: dict = {}
    if host.key_file:
        connect_kwargs.update(key_filename=os.path.expanduser(host.key_file), look_for_keys=False,
                              allow_agent=False)
    config = Config(overrides={"load_ssh_configs": host.key_file is None, "run": {"in_stream": False}})
    conn = Connection(address, user=user, port=port, gateway=gateway, config=config,
                      connect_timeout=int(host.connect_timeout), connect_kwargs=connect_kwargs,
                      inline_ssh_env=True)
    _ssh_client_setup(conn, host)
    return conn


def connect(host: HostConfig):
    """Open the transport for ``host``: an Invoke ``Context`` (local) or an opened Fabric ``Connection``.

    Raises ConnectError (unknown host key, authentication failed, unreachable after retries)."""
    if host.transport == "local":
        from invoke import Config, Context

        return Context(config=Config(overrides={"run": {"in_stream": False}}))

    import paramiko
    from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

    gateway = None
    if host.gateway:
        guser, gaddr, gport = _parse_gateway(host.gateway)
        gateway = _connection(host, address=gaddr, user=guser or host.user, port=gport)
    conn = _connection(host, address=host.address, user=host.user, port=host.ssh_port, gateway=gateway)

    @retry(retry=retry_if_exception_type((socket.timeout, ConnectionRefusedError, EOFError,
                                          paramiko.ssh_exception.NoValidConnectionsError)),
           stop=stop_after_attempt(3), wait=wait_exponential(multiplier=0.5, max=4), reraise=True)
    def _open():
        conn.open()

    where = f"{host.user + '@' if host.user else ''}{host.address}:{host.ssh_port}"
    try:
        _open()
    except paramiko.ssh_exception.SSHException as e:
        msg = str(e)
        if "not found in known_hosts" in msg or "Server" in msg and "not found" in msg:
            raise ConnectError(
                f"unknown SSH host key for {where}; add it to known_hosts (ssh-keyscan) or set "
                f"accept_new_host_key: true for host {host.name!r}", host=host.name) from None
        if isinstance(e, paramiko.ssh_exception.AuthenticationException):
            raise ConnectError(f"SSH authentication failed for {where}: {msg}", host=host.name) from None
        raise ConnectError(f"SSH to {where} failed: {msg}", host=host.name) from None
    except (OSError, EOFError) as e:
        raise ConnectError(f"cannot reach {where}: {e}", host=host.name) from None
    return conn


def close(c) -> None:
    """Close a Connection (and its gateway); a local Context needs nothing."""
    for conn in (c, getattr(c, "gateway", None)):
        closer = getattr(conn, "close", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                closer()


class _Forwarder:
    """Local TCP listener on 127.0.0.1 whose connections are carried to ``remote`` over SSH channels.

    Fabric's ``forward_local`` listens with a backlog of 1 and its thread dies on the first channel that
    cannot be opened (e.g. while the server restarts), which drops the concurrent connections a benchmark
    opens. This forwarder uses the same paramiko ``direct-tcpip`` channels, with a real backlog, one pump
    thread per connection, and a failed channel closing only its own connection."""

    def __init__(self, transport, remote: tuple[str, int]):
        self.transport = transport
        self.remote = remote
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"tunnel:{self.port}", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, addr), daemon=True).start()

    def _serve(self, conn: socket.socket, addr) -> None:
        try:
            chan = self.transport.open_channel("direct-tcpip", self.remote, addr, timeout=30)
        except Exception as e:  # the remote port refused, or SSH went away: close this connection only
            log.debug("tunnel channel to %s failed: %s", self.remote, e)
            conn.close()
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not self._closed.is_set():
                r, _, _ = select.select([conn, chan], [], [], 0.5)
                if conn in r:
                    data = conn.recv(65536)
                    if not data:
                        break
                    chan.sendall(data)
                if chan in r:
                    data = chan.recv(65536)
                    if not data:
                        break
                    conn.sendall(data)
        except OSError:
            pass
        finally:
            chan.close()
            conn.close()

    def close(self) -> None:
        self._closed.set()
        self.sock.close()
        self._thread.join(timeout=2)


@contextlib.contextmanager
def tunnel(c, host: HostConfig) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT``) at which the driver reaches the server.

    Over SSH this is a local forward (paramiko ``direct-tcpip`` channels of the open connection) to the host's
    127.0.0.1:``host.port``; locally it is the port itself. One tunnel can serve every launch of a run: each
    connection opens its own channel."""
    if host.transport == "local":
        yield f"http://127.0.0.1:{host.port}"
        return
    fwd = _Forwarder(c.transport, ("127.0.0.1", host.port))
    try:
        log.debug("tunnel 127.0.0.1:%d -> %s:127.0.0.1:%d", fwd.port, host.name, host.port)
        yield f"http://127.0.0.1:{fwd.port}"
    finally:
        fwd.close()
