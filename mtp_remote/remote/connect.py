"""How commands reach a host: a Fabric ``Connection`` (ssh) or an Invoke ``Context`` (local), and tunnels.

Both expose ``.run()``, so every remote function takes one of them as ``c`` and runs unchanged over SSH or
locally. Over SSH the connection is a :class:`~mtp_remote.remote.ssh.HostConnection`: host keys are checked
against known_hosts as OpenSSH does (unknown keys *rejected* unless the host says ``accept_new_host_key:
true``, which appends the key as one line; Fabric's own default would accept any key), transient failures are
retried, a dropped connection is re-opened within ``3 × connect_timeout`` seconds, and every failure is a
:class:`~mtp_remote.errors.ConnectError` (or :class:`~mtp_remote.errors.TransportLost`) naming its cause.

The tunnel (:func:`open_tunnel`) follows the connection: each local TCP connection is carried on a
``direct-tcpip`` channel of the connection's *current* transport, so after a reconnect new requests go through
the new one on the same local port.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import selectors
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..config.inventory import HostConfig
from ..errors import ConnectError, TransportLost

log = logging.getLogger(__name__)

#: Longest wait for the server's SSH banner (seconds); a port that accepts TCP but speaks no SSH fails then.
BANNER_TIMEOUT_S = 10.0


def _parse_gateway(spec: str) -> tuple[str | None, str, int]:
    user = None
    if "@" in spec:
        user, spec = spec.split("@", 1)
    port = 22
    if spec.count(":") == 1:
        spec, p = spec.split(":")
        port = int(p)
    return user, spec, port


def reconnect_bound_s(host: HostConfig) -> float:
    """Seconds spent re-opening a dropped connection before giving up: three connect timeouts."""
    return 3 * host.connect_timeout


#: The largest private key file handed to paramiko (which reads it whole): ``key_file: /dev/zero`` is refused.
MAX_KEY_FILE_BYTES = 1 << 20


def _key_file(host: HostConfig) -> str:
    """The host's ``key_file`` (``~`` expanded) when it is a regular file of at most MAX_KEY_FILE_BYTES. Raises
    ConnectError naming it otherwise; a missing file is left for paramiko to report as it does."""
    path = os.path.expanduser(host.key_file)
    try:
        st = os.stat(path)
    except OSError:
        return path
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_KEY_FILE_BYTES:
        raise ConnectError(f"key file {path} for {host.name} is not a private key file (not a regular file of at "
                           f"most {MAX_KEY_FILE_BYTES >> 20} MiB)", host=host.name)
    return path


def _connection(host: HostConfig, *, address: str, user: str | None, port: int, gateway=None):
    from fabric import Config

    from .ssh import HostConnection, trust_known_hosts  # deferred with fabric: paramiko only for ssh hosts

    banner_s = min(host.connect_timeout, BANNER_TIMEOUT_S)
    connect_kwargs: dict = {"banner_timeout": banner_s}
    if host.key_file:
        connect_kwargs.update(key_filename=_key_file(host), look_for_keys=False, allow_agent=False)
    config = Config(overrides={"load_ssh_configs": host.key_file is None, "run": {"in_stream": False}})
    conn = HostConnection(address, user=user, port=port, gateway=gateway, config=config,
                          connect_timeout=max(1, round(host.connect_timeout)), connect_kwargs=connect_kwargs,
                          inline_ssh_env=True, host_label=host.name, reconnect_s=reconnect_bound_s(host),
                          banner_s=banner_s)
    conn.known = trust_known_hosts(conn.client, path=host.known_hosts or "~/.ssh/known_hosts", address=address,
                                   port=port, accept_new=host.accept_new_host_key, host_label=host.name)
    return conn


def connect(host: HostConfig):
    """Open the transport for ``host``: an Invoke ``Context`` (local) or an opened HostConnection; for a host whose
    server kind is ``exec``, that transport wrapped to run every command inside its container
    (:class:`~mtp_remote.remote.containers.ExecInto`).

    Raises ConnectError with the cause: HostKeyError (unknown, changed or revoked key), authentication (which
    key and user), unreachable (refused, timed out, no route, DNS) or no SSH banner."""
    c = _connect(host)
    if host.server.kind == "exec":  # every command runs inside the host's long-lived container
        from .containers import ExecInto

        return ExecInto(c, host.server.runtime, host.server.container)
    return c


def _connect(host: HostConfig):
    if host.transport == "local":
        from invoke import Config, Context

        return Context(config=Config(overrides={"run": {"in_stream": False},
                                                "runners": {"local": _local_runner()}}))
    gateway = None
    if host.gateway:
        guser, gaddr, gport = _parse_gateway(host.gateway)
        gateway = _connection(host, address=gaddr, user=guser or host.user, port=gport)
    conn = _connection(host, address=host.address, user=host.user, port=host.ssh_port, gateway=gateway)
    try:
        conn.open()
    except ConnectError:
        close(conn)
        raise
    return conn


def _local_runner():
    """Invoke's local runner, with a Ctrl-C handled as Fabric's runner handles it over SSH (no pty): re-raised
    at once. Invoke's own forwards it as ``\\x03`` on the command's stdin and keeps waiting; a host script
    given its whole stdin has that pipe closed already, so the forward failed with ``ValueError: I/O operation
    on closed file`` and a Ctrl-C during ``mitigate``/``bisect`` on a local host ended in a traceback instead of
    the resume line."""
    from invoke import Local

    class InterruptibleLocal(Local):
        def send_interrupt(self, interrupt):
            raise interrupt

    return InterruptibleLocal


def close(c) -> None:
    """Close a Connection (and its gateway); a local Context needs nothing."""
    for conn in (c, getattr(c, "gateway", None)):
        closer = getattr(conn, "close", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                closer()


def is_lost(c) -> bool:
    """Whether ``c`` is an SSH connection that dropped and could not be re-opened within its bound."""
    return getattr(c, "lost", None) is not None


def responsive(c, timeout_s: float | None = None) -> bool:
    """Whether ``c`` still reaches its host: an SSH connection's server answers a keepalive within ``timeout_s``
    (default: the keepalive bound) — one that does not is closed as dropped; a local Context always does."""
    check = getattr(c, "responsive", None)
    if check is None:
        return True
    return check() if timeout_s is None else check(timeout_s)


def revive(c) -> bool:
    """Try once more (within the reconnect bound) to re-open a lost connection; True when it is open.
    A local Context is always there."""
    reviver = getattr(c, "revive", None)
    return True if reviver is None else reviver()


def as_connect_error(e: BaseException, host: str | None = None) -> ConnectError | None:
    """A ConnectError for a raw SSH/socket failure that escaped the connection's own translation (paramiko
    exceptions, EOF on the transport, socket errors), else None. For the entry points' last line of defence."""
    import sys

    if isinstance(e, ConnectError):
        return e
    import errno

    paramiko = sys.modules.get("paramiko")
    ssh_types: tuple = (EOFError, ConnectionError, socket.timeout, socket.gaierror)
    if paramiko is not None:
        ssh_types += (paramiko.SSHException,)
    network = isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH)
    if isinstance(e, ssh_types) or network:
        return ConnectError(f"SSH failed: {type(e).__name__}: {e}", host=host)
    return None


class _Forwarder:
    """Local TCP listener on 127.0.0.1 whose connections are carried to ``remote`` over SSH channels.

    Fabric's ``forward_local`` listens with a backlog of 1 and its thread dies on the first channel that
    cannot be opened (e.g. while the server restarts), which drops the concurrent connections a benchmark
    opens. This forwarder uses the same paramiko ``direct-tcpip`` channels, with a real backlog, one pump
    thread per connection, and a failed channel closing only its own connection. Channels are opened on the
    connection's current transport: a dropped one is re-opened first (``conn.open()``, bounded), so the local
    port stays the same across reconnects. The accept loop waits on a selector with a wake-up socket, so
    :meth:`close` returns at once (a blocked ``accept()`` is not woken by closing its socket)."""

    def __init__(self, conn, remote: tuple[str, int] | Callable[[], tuple[str, int]]):
        self.conn = conn
        self.remote = remote
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.channels_opened = 0  # direct-tcpip channels opened (one per local TCP connection)
        self._wake_r, self._wake_w = socket.socketpair()
        self._closed = threading.Event()
        self._count_lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name=f"tunnel:{self.port}", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._closed.is_set():
                for key, _ in sel.select():
                    if key.fileobj is self._wake_r:
                        return
                    try:
                        conn, addr = self.sock.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        return
                    conn.setblocking(True)
                    threading.Thread(target=self._serve, args=(conn, addr), daemon=True).start()

    def _channel(self, addr):
        """A channel on the current transport; re-opens a dropped connection first (raises TransportLost when
        that fails within its bound, ChannelException when the remote port refuses)."""
        import paramiko

        for attempt in (0, 1):
            transport = self.conn.transport
            if transport is None or not transport.active:
                self.conn.open()
                transport = self.conn.transport
            try:
                remote = self.remote() if callable(self.remote) else self.remote
                chan = transport.open_channel("direct-tcpip", remote, addr, timeout=30)
            except paramiko.ChannelException:
                raise
            except (paramiko.SSHException, EOFError, OSError):
                if attempt:  # the transport died between the check and the open, twice
                    raise
                continue
            with self._count_lock:
                self.channels_opened += 1
            return chan
        raise AssertionError("unreachable")

    def _serve(self, conn: socket.socket, addr) -> None:
        try:
            chan = self._channel(addr)
        except Exception as e:  # noqa: BLE001 - port refused or SSH gone: close this connection only
            log.debug("tunnel channel to %s failed: %s", self.remote, e)
            conn.close()
            return
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
        except (OSError, EOFError) as e:  # either end went away (a dropped SSH connection included)
            log.debug("tunnel connection to %s ended: %s", self.remote, e)
        finally:
            for end in (chan, conn):
                with contextlib.suppress(Exception):  # closing a channel of a dead transport can raise
                    end.close()

    def close(self) -> None:
        """Stop accepting (at once: the selector is woken) and close the listener; live connections end
        within 0.5 s."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(timeout=2)
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()


@dataclass
class Tunnel:
    """Where the driver reaches the server (``url``) and what the tunnel saw.

    ``channels_opened`` counts SSH channels (one per TCP connection; 0 for a local host); ``lost`` is the
    TransportLost once the connection dropped and could not be re-opened; :meth:`mark` / :meth:`dropped_since`
    tell whether a request that failed was cut by a dropped connection (and is worth sending again)."""

    url: str
    conn: object | None = None
    forwarder: _Forwarder | None = None

    @property
    def channels_opened(self) -> int:
        return self.forwarder.channels_opened if self.forwarder else 0

    @property
    def lost(self) -> TransportLost | None:
        return getattr(self.conn, "lost", None)

    @property
    def drops(self) -> int:
        """Times the SSH connection was found dropped and re-opened (or tried to be)."""
        return getattr(self.conn, "drops", 0)

    def mark(self):
        """A token for the transport in use now and the time (None for a local host)."""
        if self.conn is None or not hasattr(self.conn, "transport"):
            return None
        return self.conn.transport, time.monotonic()

    def dropped_since(self, mark, *, grace_s: float = 2.0) -> bool:
        """Whether the transport marked by ``mark`` has died or been replaced since, or was re-opened less than
        ``grace_s`` seconds before the mark (a pooled HTTP connection may still have ridden the old one)."""
        if mark is None:
            return False
        transport, at = mark
        if self.conn.transport is not transport or transport is None or not transport.active:
            return True
        reopened = getattr(self.conn, "reopened_at", None)
        return reopened is not None and reopened > at - grace_s


@contextlib.contextmanager
def open_tunnel(c, host: HostConfig, target: Callable[[], str] | None = None) -> Iterator[Tunnel]:
    """Yield a :class:`Tunnel` whose ``url`` (``http://127.0.0.1:PORT``) reaches the server.

    Over SSH this is a local forward (paramiko ``direct-tcpip`` channels of the connection) to the host's
    127.0.0.1:``host.port``; locally it is the port itself. One tunnel can serve every launch of a run: each
    connection opens its own channel, on the transport current at that moment. ``target``: where the host
    forwards to instead of its 127.0.0.1, asked when each connection opens (a SLURM job's node, resolved by the
    login node); a local host then reaches that address directly."""
    if host.transport == "local":
        yield Tunnel(url=f"http://{target() if target else '127.0.0.1'}:{host.port}")
        return
    fwd = _Forwarder(c, (lambda: (target(), host.port)) if target else ("127.0.0.1", host.port))
    try:
        log.debug("tunnel 127.0.0.1:%d -> %s:127.0.0.1:%d", fwd.port, host.name, host.port)
        yield Tunnel(url=f"http://127.0.0.1:{fwd.port}", conn=c, forwarder=fwd)
    finally:
        fwd.close()


@contextlib.contextmanager
def tunnel(c, host: HostConfig) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT``) at which the driver reaches the server (see
    :func:`open_tunnel`)."""
    with open_tunnel(c, host) as t:
        yield t.url
