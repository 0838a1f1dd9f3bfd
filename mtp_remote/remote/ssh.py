"""The SSH connection to one host: a Fabric ``Connection`` that follows its host and says why it failed.

:class:`HostConnection` adds three things to Fabric's ``Connection``:

- **Host keys like OpenSSH**: known_hosts is read by :mod:`.hostkeys` (markers, hashed names, key types
  paramiko does not know), an unknown key is rejected or, with ``accept_new_host_key``, appended as one line;
  a changed or revoked key is refused with its SHA256 fingerprint, the file and line, and the fix.
- **Reconnects within a bound**: the first connect retries transient failures (refused, timed out, EOF) three
  times; after a drop, :meth:`~HostConnection.open` retries them until ``reconnect_s`` seconds have passed, then
  marks the connection *lost* (:class:`~mtp_remote.errors.TransportLost`) so later calls fail at once instead of
  each waiting again; :meth:`~HostConnection.revive` tries once more. ``generation`` counts successful opens.
- **Causes, not tracebacks**: every paramiko/socket failure becomes a ConnectError naming host, port and cause
  (refused, timed out, no route, DNS, no SSH banner, which key and user failed to authenticate), and a command
  cut by a dropped connection raises TransportLost instead of returning exit code -1 (paramiko's value for a
  channel closed without an exit status), which would read as "process gone".

Imported lazily by :mod:`.connect` (it imports fabric and paramiko).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
import time

import paramiko
from fabric import Connection
from invoke.exceptions import ThreadException, UnexpectedExit

from ..errors import ConnectError, HostKeyError, TransportLost
from .hostkeys import KnownHosts, append_known_host, fingerprint, host_key_name, key_kind, load_known_hosts

log = logging.getLogger(__name__)

#: SSH keepalives, as OpenSSH's ServerAliveInterval/ServerAliveCountMax: every KEEPALIVE_S seconds the server is
#: asked for an answer; none within KEEPALIVE_S × KEEPALIVE_COUNT seconds and the connection counts as dropped
#: (its transport is closed: the reconnect, or ``transport_lost``, follows). A connection dropped without a
#: reset (a NAT or firewall that forgot it) is otherwise silent until TCP gives up, after many minutes.
KEEPALIVE_S = 5.0
KEEPALIVE_COUNT = 3


def ping(t: paramiko.Transport, timeout_s: float) -> bool:
    """True when the SSH server behind ``t`` answers a ``keepalive@openssh.com`` request (any answer: OpenSSH
    refuses it, which is an answer) within ``timeout_s`` seconds."""
    answered = threading.Event()

    def ask() -> None:
        t.global_request("keepalive@openssh.com", wait=True)  # returns when answered or the transport ends
        if t.is_active():
            answered.set()

    threading.Thread(target=ask, name="ssh-keepalive-ask", daemon=True).start()
    answered.wait(timeout_s)
    return answered.is_set()

# paramiko logs a failed handshake at ERROR with a traceback, from its own thread: the ConnectError says the same
# in one line. Quiet it unless the entry point chose a level (mtp-remote -vv sets DEBUG).
if logging.getLogger("paramiko").level == logging.NOTSET:
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)

#: The default identities paramiko tries when no key file is given (besides the SSH agent).
_DEFAULT_KEYS = "~/.ssh/id_rsa, id_ecdsa, id_ed25519"


def _pkey(keytype: str, blob: bytes):
    """A paramiko key from known_hosts, or None for a type paramiko cannot use (e.g. ``sk-*`` keys)."""
    try:
        return paramiko.PKey.from_type_string(keytype, blob)
    except Exception:  # noqa: BLE001 - UnknownKeyType, or a blob paramiko cannot read: it never matches
        return None


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko when the host has no usable key in known_hosts: refuse a revoked key, refuse an
    unknown one, or (``accept_new``) append it to known_hosts and say so with its fingerprint."""

    def __init__(self, known: KnownHosts, *, accept_new: bool, host_label: str):
        self.known = known
        self.accept_new = accept_new
        self.host_label = host_label

    def missing_host_key(self, client, hostname, key) -> None:
        blob, keytype = key.asbytes(), key.get_name()
        fp = f"{key_kind(keytype)} key {fingerprint(blob)}"
        revoked = self.known.revoked(hostname, keytype, blob)
        if revoked is not None:
            raise HostKeyError(f"the SSH host key of {hostname} ({fp}) is marked @revoked in {self.known.path} "
                               f"line {revoked.lineno}: refusing to connect", host=self.host_label)
        if not self.accept_new:
            port_opt = f"-p {hostname.rsplit(':', 1)[1]} " if hostname.startswith("[") else ""
            address = hostname.strip("[").split("]")[0]
            raise HostKeyError(
                f"unknown SSH host key for {hostname} ({fp}); check the fingerprint, then add it to "
                f"{self.known.path} (ssh-keyscan {port_opt}{address} >> {self.known.path}) or set "
                f"accept_new_host_key: true for host {self.host_label!r}", host=self.host_label)
        try:
            written = append_known_host(self.known.path, hostname, keytype, blob)
        except OSError as e:
            raise HostKeyError(f"cannot remember the new host key of {hostname} in {self.known.path}: "
                               f"{e.strerror}", host=self.host_label) from None
        client.get_host_keys().add(hostname, keytype, key)
        log.warning("Permanently added %s (%s) to the list of known hosts (%s)", hostname, fp, written)


def changed_key_error(known: KnownHosts, name: str, server_key, host_label: str) -> HostKeyError:
    """The message for a key that differs from the known one: both fingerprints, file and line, the fix."""
    blob, keytype = server_key.asbytes(), server_key.get_name()
    revoked = known.revoked(name, keytype, blob)
    if revoked is not None:
        return HostKeyError(f"the SSH host key of {name} ({key_kind(keytype)} key {fingerprint(blob)}) is marked "
                            f"@revoked in {known.path} line {revoked.lineno}: refusing to connect", host=host_label)
    lines = known.for_host(name)
    same_type = [e for e in lines if e.keytype == keytype] or lines
    where = (f"{known.path} line {same_type[0].lineno} holds {key_kind(same_type[0].keytype)} key "
             f"{fingerprint(same_type[0].blob)}" if same_type else f"{known.path}")
    return HostKeyError(
        f"the SSH host key of {name} has CHANGED: it now shows {key_kind(keytype)} key {fingerprint(blob)}, "
        f"{where}. Someone may be intercepting the connection, or the host was reinstalled; if the change is "
        f"expected, remove the old key with: ssh-keygen -R '{name}' -f {known.path}", host=host_label)


def trust_known_hosts(client, *, path: str, address: str, port: int, accept_new: bool, host_label: str) -> KnownHosts:
    """Load ``path`` into paramiko for ``address:port`` (plain keys only; revoked keys left out) and set the
    policy for keys it does not hold. Lines paramiko cannot use are skipped: ``@cert-authority`` lines for this
    host with a warning (paramiko cannot check host certificates), unreadable lines with a debug note."""
    known = load_known_hosts(path)
    name = host_key_name(address, port)
    for problem in known.problems:
        log.debug("%s %s", known.path, problem)
    for ca in known.cert_authorities(name):
        log.warning("%s line %d: @cert-authority is not supported (paramiko cannot check host certificates); "
                    "skipped — list the host's own key to trust it", known.path, ca.lineno)
    keys = client.get_host_keys()
    for e in known.for_host(name):
        if known.revoked(name, e.keytype, e.blob) is not None:
            continue
        pkey = _pkey(e.keytype, e.blob)
        if pkey is not None:
            keys.add(name, e.keytype, pkey)
    client.set_missing_host_key_policy(HostKeyPolicy(known, accept_new=accept_new, host_label=host_label))
    return known


def _errno_cause(e: OSError, timeout_s: float) -> str | None:
    if isinstance(e, socket.gaierror):
        return f"the name does not resolve (DNS: {e.strerror})"
    if isinstance(e, (socket.timeout, TimeoutError)) or e.errno == errno.ETIMEDOUT:
        return f"timed out after {timeout_s:g} s (host down, or a firewall drops the packets)"
    if e.errno == errno.ECONNREFUSED:
        return "connection refused (no SSH server listens on that port)"
    if e.errno == errno.EHOSTUNREACH:
        return "no route to host"
    if e.errno == errno.ENETUNREACH:
        return "network unreachable"
    if e.errno == errno.ECONNRESET:
        return "connection reset by the server"
    return None


def describe(e: BaseException, *, where: str, timeout_s: float, banner_s: float, key_file: str | None,
             user: str | None) -> tuple[str, bool]:
    """(one-line cause, whether retrying may help) for an exception raised while connecting to ``where``."""
    if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
        causes = {_errno_cause(err, timeout_s) or str(err) for err in e.errors.values()}
        return f"cannot reach {where}: {'; '.join(sorted(causes))}", True
    if isinstance(e, paramiko.ssh_exception.AuthenticationException):
        if isinstance(key_file, (list, tuple)):
            key_file = ", ".join(key_file)
        keys = f"key {key_file}" if key_file else f"the SSH agent's keys and {_DEFAULT_KEYS}"
        return (f"SSH authentication failed on {where}: user {user or '(local user)'!r} with {keys} "
                f"({e or type(e).__name__}); check the key is in that user's authorized_keys"), False
    if isinstance(e, paramiko.ssh_exception.SSHException) and "banner" in str(e).lower():
        return f"no SSH server answered on {where} (banner timeout {banner_s:g} s)", False
    if isinstance(e, OSError):
        cause = _errno_cause(e, timeout_s)
        return f"cannot reach {where}: {cause or e.strerror or e}", (cause is not None
                                                                     and not isinstance(e, socket.gaierror))
    if isinstance(e, EOFError):
        return f"the SSH server on {where} closed the connection during the handshake", True
    return f"SSH to {where} failed: {e or type(e).__name__}", False


def _end_of_stream(e: BaseException) -> bool:
    """Whether ``e`` (or, for Invoke's ThreadException, an exception of its I/O threads) is the SSH stream
    ending: EOFError, or paramiko's closed-channel / inactive-session errors."""
    inner = [t.value for t in getattr(e, "exceptions", ())] if isinstance(e, ThreadException) else [e]
    return any(isinstance(x, EOFError) or (isinstance(x, paramiko.SSHException)
                                           and any(w in str(x) for w in ("not active", "Channel closed")))
               for x in inner)


class HostConnection(Connection):
    """A Fabric ``Connection`` with host-key checking, bounded reconnects and clear failures (see module).

    ``host_label`` names the inventory host in messages; ``reconnect_s`` bounds the time spent reconnecting
    after a drop (seconds), counted from the moment the drop was found, across every later step that needs the
    connection (the stop, the log copy, the lock's release each try again, but within the same bound: it is
    what the user waits); ``banner_s`` the wait for the server's SSH banner."""

    def __init__(self, *args, host_label: str, reconnect_s: float, banner_s: float,
                 known: KnownHosts | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        # Invoke's DataProxy would store unknown attributes in the config (deep-copied): ``_set`` keeps them real
        self._set(host_label=host_label, reconnect_s=reconnect_s, banner_s=banner_s, known=known,
                  generation=0,  # successful opens: 1 after connect, +1 per reconnect
                  lost=None,  # the TransportLost once a reconnect gave up
                  drops=0,  # times an open connection was found dead
                  reopened_at=None,  # time.monotonic() of the last successful reconnect
                  dropped_at=None,  # time.monotonic() when the current outage was found (None: connected)
                  _open_lock=threading.RLock())

    @property
    def where(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"

    def _attempt(self) -> None:
        try:
            super().open()
        except paramiko.BadHostKeyException as e:
            name = host_key_name(self.host, int(self.port))
            raise changed_key_error(self.known or KnownHosts(path=os.devnull), name, e.key,
                                    self.host_label) from None
        except paramiko.SSHException as e:
            t = self.client.get_transport()
            if t is not None and not t.remote_version and not isinstance(e, paramiko.AuthenticationException):
                # the handshake wait ended before any banner arrived; paramiko then says "No existing session"
                raise paramiko.SSHException("Error reading SSH protocol banner") from None
            raise

    def open(self):
        """Connect (first time) or reconnect after a drop; no-op while connected. Raises ConnectError (first
        connect) or TransportLost (reconnect gave up after ``reconnect_s``; later calls then fail at once)."""
        with self._open_lock:
            if self.is_connected:
                return
            if self.lost is not None:
                raise self.lost
            first = self.generation == 0
            if not first and self.dropped_at is None:
                self._set(drops=self.drops + 1, dropped_at=time.monotonic())
                log.info("SSH connection to %s dropped; reconnecting (up to %.0f s)", self.where, self.reconnect_s)
            t0 = time.monotonic() if first else self.dropped_at
            deadline = t0 + self.reconnect_s
            attempt, delay = 0, 0.25
            while True:
                attempt += 1
                try:
                    self._attempt()
                    break
                except ConnectError:
                    self.client.close()  # a refused host key leaves paramiko's transport thread running
                    raise
                except Exception as e:  # noqa: BLE001 - paramiko/socket/EOF errors: described, maybe retried
                    cause, transient = describe(e, where=self.where, timeout_s=float(self.connect_timeout or 0),
                                                banner_s=self.banner_s, key_file=self.connect_kwargs.get("key_filename"),
                                                user=self.user)
                    with_retry = transient and (attempt < 3 if first else time.monotonic() + delay < deadline)
                    if not with_retry:
                        with_retry_note = "" if first else (
                            f"; gave up reconnecting {time.monotonic() - t0:.0f} s after the drop (the bound: "
                            f"{self.reconnect_s:.0f} s, 3 × connect_timeout)")
                        if first:
                            raise ConnectError(cause, host=self.host_label) from None
                        self._set(lost=TransportLost(f"SSH connection to {self.where} lost: {cause}{with_retry_note}",
                                                     host=self.host_label, cause=cause))
                        raise self.lost from None
                    log.debug("SSH connect attempt %d to %s: %s; retrying in %.2f s", attempt, self.where, cause, delay)
                    time.sleep(delay)
                    delay = min(delay * 2, 4.0)
            self._set(generation=self.generation + 1, dropped_at=None)
            self._keep_alive()
            if not first:
                self._set(reopened_at=time.monotonic())
                log.info("SSH connection to %s re-opened in %.2f s", self.where, time.monotonic() - t0)
            return

    def _keep_alive(self) -> None:
        """Start this connection's keepalive watch (:data:`KEEPALIVE_S`): it ends with the transport it watches;
        when the server stops answering it closes that transport, so the drop is seen (:meth:`responsive`)."""
        t, generation = self.client.get_transport(), self.generation

        def watch() -> None:
            while t is not None and t.is_active() and self.generation == generation:
                time.sleep(KEEPALIVE_S)
                if t.is_active() and self.generation == generation and not ping(t, KEEPALIVE_S * KEEPALIVE_COUNT):
                    log.info("SSH connection to %s: no answer to keepalives for %.0f s; closing it as dropped",
                             self.where, KEEPALIVE_S * (KEEPALIVE_COUNT + 1))
                    t.close()

        threading.Thread(target=watch, name=f"ssh-keepalive-{self.host_label}", daemon=True).start()

    def responsive(self, timeout_s: float = KEEPALIVE_S * KEEPALIVE_COUNT) -> bool:
        """True when the connection is open and the server answers within ``timeout_s`` seconds (:func:`ping`);
        a connection that does not answer is closed as dropped (the next step reconnects, or says
        ``transport_lost``)."""
        t = self.client.get_transport()
        if t is None or not t.is_active():
            return False
        if ping(t, timeout_s):
            return True
        log.info("SSH connection to %s: no answer within %.0f s; closing it as dropped", self.where, timeout_s)
        t.close()
        return False

    def _settle_after_eof(self, wait_s: float = 1.0) -> None:
        """An end of stream under a command while the transport still looks active: the server's side went
        away and paramiko's reader has not noticed yet (seen when sshd stops mid-run). Wait ``wait_s`` seconds
        for it to notice; if it still has not, close the transport, so the drop is handled as one (reconnect
        within the bound, or TransportLost with the reason) instead of escaping as a bare EOFError."""
        deadline = time.monotonic() + wait_s
        while self.is_connected and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.is_connected:
            log.info("SSH connection to %s: end of stream under a command; closing the transport", self.where)
            t = self.client.get_transport()
            if t is not None:
                t.close()

    def revive(self) -> bool:
        """One more reconnect after the connection was marked lost, within what is left of the drop's bound
        (none left: False at once, so the steps after a lost connection add no wait); True when connected."""
        with self._open_lock:
            if self.dropped_at is not None and time.monotonic() >= self.dropped_at + self.reconnect_s:
                return False
            self._set(lost=None)
            try:
                self.open()
                return True
            except ConnectError:
                return False

    def run(self, command, **kwargs):
        """Fabric's run; a connection that drops under the command raises TransportLost (never exit -1)."""
        try:
            result = super().run(command, **kwargs)
        except UnexpectedExit as e:  # warn=False: paramiko's exit -1 for a channel cut by a drop raises here
            if e.result.exited == -1 and not self.is_connected:
                raise TransportLost(f"SSH connection to {self.where} dropped while running a command",
                                    host=self.host_label, cause="dropped") from None
            raise
        except (ConnectError, paramiko.ssh_exception.AuthenticationException):
            raise
        except (paramiko.SSHException, EOFError, OSError, ThreadException) as e:
            if self.is_connected and _end_of_stream(e):
                self._settle_after_eof()
            if self.is_connected:
                raise
            raise TransportLost(f"SSH connection to {self.where} dropped while running a command "
                                f"({type(e).__name__}: {e})", host=self.host_label, cause="dropped") from None
        if not kwargs.get("asynchronous") and getattr(result, "exited", 0) == -1 and not self.is_connected:
            raise TransportLost(f"SSH connection to {self.where} dropped while running a command",
                                host=self.host_label, cause="dropped")
        return result
