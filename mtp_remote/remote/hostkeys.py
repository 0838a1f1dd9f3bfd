"""known_hosts read as OpenSSH reads it, and trust on first use that only ever appends one line.

OpenSSH's ``known_hosts`` format (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT"): one key per line,
``[@marker] hostpatterns keytype base64key [comment]``. Host patterns are a comma list of names, ``*``/``?``
wildcards and ``!`` negations; a non-default port is written ``[host]:port``; hashed names are
``|1|base64(salt)|base64(HMAC-SHA1(salt, name))``. The markers are ``@cert-authority`` (a CA that signs host
certificates) and ``@revoked`` (a key that must never be accepted).

paramiko's own reader raises on marker lines and its ``save`` rewrites the whole file (dropping comments,
key types it does not know such as ``sk-ssh-ed25519@openssh.com``, splitting multi-host lines, replacing a
symlink's target). Here the file is only read, and a new key is appended with one ``O_APPEND`` write to the
symlink's target, so every other byte stays as it was. Pure functions apart from :func:`load_known_hosts` and
:func:`append_known_host`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HostKeyError
from ..files import InputTooLarge, read_bounded

MARKERS = ("@cert-authority", "@revoked")

#: How ``ssh-keygen -l`` names key types (the part in parentheses).
_KEY_KIND = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA", "ssh-dss": "DSA",
             "ecdsa-sha2-nistp256": "ECDSA", "ecdsa-sha2-nistp384": "ECDSA", "ecdsa-sha2-nistp521": "ECDSA",
             "sk-ssh-ed25519@openssh.com": "ED25519-SK", "sk-ecdsa-sha2-nistp256@openssh.com": "ECDSA-SK"}


@dataclass(frozen=True)
class KnownHostLine:
    """One key line of a known_hosts file: 1-based ``lineno``, ``marker`` (None, ``@cert-authority`` or
    ``@revoked``), ``patterns`` as written (comma list, maybe hashed), ``keytype`` and the key ``blob``."""

    lineno: int
    marker: str | None
    patterns: str
    keytype: str
    blob: bytes


@dataclass
class KnownHosts:
    """A parsed known_hosts file: ``path`` (as given), its key ``lines`` and ``problems`` (unreadable lines,
    each ``"line N: why"``)."""

    path: Path
    lines: list[KnownHostLine] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def for_host(self, name: str) -> list[KnownHostLine]:
        """Plain (unmarked) keys whose patterns match ``name`` (``host`` or ``[host]:port``)."""
        return [e for e in self.lines if e.marker is None and host_matches(e.patterns, name)]

    def cert_authorities(self, name: str) -> list[KnownHostLine]:
        return [e for e in self.lines if e.marker == "@cert-authority" and host_matches(e.patterns, name)]

    def revoked(self, name: str, keytype: str, blob: bytes) -> KnownHostLine | None:
        """The ``@revoked`` line that revokes this key for ``name``, if any."""
        for e in self.lines:
            if e.marker == "@revoked" and e.blob == blob and host_matches(e.patterns, name):
                return e
        return None


def host_key_name(address: str, port: int) -> str:
    """The name OpenSSH (and paramiko) look up: ``host`` on port 22, else ``[host]:port``."""
    return address if port == 22 else f"[{address}]:{port}"


def fingerprint(blob: bytes) -> str:
    """``SHA256:<base64 without padding>`` of the key blob, as ``ssh-keygen -l`` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def key_kind(keytype: str) -> str:
    """``ED25519``, ``RSA``, ``ECDSA``, ... (ssh-keygen's name for the type)."""
    return _KEY_KIND.get(keytype, keytype)


def _glob(pattern: str, name: str) -> bool:
    """OpenSSH's ``match_pattern``: ``*`` and ``?`` only (``[`` is literal: it starts ``[host]:port``)."""
    rx = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.fullmatch(rx, name, flags=re.IGNORECASE) is not None


def _hashed_matches(entry: str, name: str) -> bool:
    parts = entry.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt, want = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), want)


def host_matches(patterns: str, name: str) -> bool:
    """Whether the host field ``patterns`` matches ``name``: a hashed entry by its HMAC, else the comma list
    (a matching ``!pattern`` excludes the name whatever else matches)."""
    if patterns.startswith("|"):
        return _hashed_matches(patterns, name)
    matched = False
    for pat in patterns.split(","):
        if pat.startswith("!"):
            if _glob(pat[1:], name):
                return False
        elif _glob(pat, name):
            matched = True
    return matched


def parse_known_hosts(text: str, path: Path | str = "known_hosts") -> KnownHosts:
    """Parse the text of a known_hosts file; comments, blank lines and lines that cannot be read are kept
    out of ``lines`` (the unreadable ones are listed in ``problems``). Never raises."""
    kh = KnownHosts(path=Path(path))
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        marker = None
        if fields[0].startswith("@"):
            marker = fields.pop(0)
            if marker not in MARKERS:
                kh.problems.append(f"line {n}: unknown marker {marker!r}; skipped")
                continue
        if len(fields) < 3:
            kh.problems.append(f"line {n}: fewer than 3 fields (hosts, key type, key); skipped")
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except (binascii.Error, ValueError):
            kh.problems.append(f"line {n}: the key is not base64; skipped")
            continue
        kh.lines.append(KnownHostLine(lineno=n, marker=marker, patterns=fields[0], keytype=fields[1], blob=blob))
    return kh


#: The largest known_hosts file read (bytes): ~200,000 keys; ``known_hosts: /dev/zero`` is refused, not read whole.
MAX_KNOWN_HOSTS_BYTES = 64 << 20


def load_known_hosts(path: Path | str) -> KnownHosts:
    """Read and parse ``path`` (through a symlink; at most :data:`MAX_KNOWN_HOSTS_BYTES`); a missing file is an
    empty KnownHosts. Raises HostKeyError naming the file when it is larger."""
    p = Path(os.path.expanduser(str(path)))
    try:
        text = read_bounded(p, MAX_KNOWN_HOSTS_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    except InputTooLarge as e:
        raise HostKeyError(f"{p}: {e}; not a known_hosts file (set `known_hosts` for this host)") from None
    except OSError as e:
        raise HostKeyError(f"{p}: cannot read the known_hosts file ({e.strerror})") from None
    return parse_known_hosts(text, p)


def append_known_host(path: Path | str, name: str, keytype: str, blob: bytes) -> Path:
    """Append ``name keytype base64`` as one line to the known_hosts file and return the file written.

    A symlink is followed (its target is appended to, the link stays); a missing file is created with mode
    0600 and missing parent directories with mode 0700; an existing file keeps its mode and every byte (one
    ``O_APPEND`` write, with a newline first if the last line lacked one). Raises OSError."""
    target = Path(os.path.realpath(os.path.expanduser(str(path))))
    missing = []
    d = target.parent
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700)
        os.chmod(d, 0o700)
    created = not target.exists()
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if created:
            os.fchmod(fd, 0o600)
        lead = b""
        size = os.fstat(fd).st_size
        if size:
            with open(target, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    lead = b"\n"
        line = f"{name} {keytype} {base64.b64encode(blob).decode()}\n".encode()
        os.write(fd, lead + line)
    finally:
        os.close(fd)
    return target
