"""A server's log file on the host, read by command: a poll (is the process alive, and the log's new bytes from a
byte offset) in one round trip, and the whole log.

The poll is how a server is followed when no log stream runs (:mod:`.follow`): a host whose ``tail`` cannot
follow a file, a stream cut by a dropped SSH connection, the crash watch's fallback. Its log bytes travel as
base64 (POSIX ``od`` hex where the host has no ``base64``), so the byte offset counts the log's own bytes
whatever they hold.
"""

from __future__ import annotations

import base64
import codecs
import shlex
from typing import NamedTuple

#: The most log bytes one poll reads (1 MiB).
CHUNK = 1 << 20


class Polled(NamedTuple):
    """One poll: whether the process lives, the log text from the offset asked for, and how many of the log's
    bytes that text holds (the next poll's offset is ``offset + nbytes``)."""

    alive: bool
    text: str
    nbytes: int


#: The poll's log bytes as text (``ENCODE``, public for other kinds' polls): base64 where the host has it (coreutils, busybox), else POSIX od's hex; the
#: first line names which.
ENCODE = _ENCODE = "{ if command -v base64 >/dev/null 2>&1; then echo b64; base64; else echo hex; od -An -v -tx1; fi; }"


def _decode_chunk(encoded: str) -> bytes:
    """The log bytes of one poll from ``_ENCODE``'s output (b'' when unreadable)."""
    kind, _, body = encoded.partition("\n")
    try:
        if kind.strip() == "hex":
            return bytes.fromhex("".join(body.split()))
        return base64.b64decode("".join(body.split()))
    except ValueError:
        return b""


def chunk_command(log_path: str, offset: int) -> str:
    """``log_path``'s bytes from byte ``offset`` (at most :data:`CHUNK`), encoded for :func:`decode_polled`."""
    return f"tail -c +{int(offset) + 1} {shlex.quote(log_path)} 2>/dev/null | head -c {CHUNK} | {ENCODE}"


def parse_poll(output: str) -> Polled:
    """Split one poll's output (the process's stat line, ``--log--``, the log bytes encoded) into a Polled.

    The log travels as base64, so the offset counts the log's own bytes whatever they hold: invalid UTF-8 is
    shown as U+FFFD but counted as the bytes it was, and a character cut at the chunk's end is left for the
    next poll rather than counted as a replacement character."""
    head, _, encoded = output.partition("--log--\n")
    head = head.strip()
    alive = False
    if ")" in head:
        state = head[head.rindex(")") + 2:].split()[0]
        alive = state not in ("Z", "X")
    return decode_polled(alive, encoded)


def decode_polled(alive: bool, encoded: str) -> Polled:
    """A Polled from the liveness a kind found and the log bytes ``_ENCODE`` sent (a character cut at the end
    of a live writer's chunk is left for the next poll)."""
    raw = _decode_chunk(encoded)
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    text = dec.decode(raw, final=False)
    pending = dec.getstate()[0]
    if not pending or alive:  # a cut character (a live writer may finish it): its bytes are read again next time
        return Polled(alive, text, len(raw) - len(pending))
    return Polled(alive, text + dec.decode(b"", final=True), len(raw))  # the log's last bytes: nothing follows


def poll_command(pid: int, log_path: str, offset: int) -> str:
    """The poll of process ``pid`` and of ``log_path`` from byte ``offset``: at most :data:`CHUNK` bytes."""
    return (f"cat /proc/{int(pid)}/stat 2>/dev/null; echo; echo --log--; "
            + chunk_command(log_path, offset))


def _run(c, cmd: str):
    return c.run(cmd, hide=True, warn=True, in_stream=False)


def poll(c, pid: int, log_path: str, offset: int) -> Polled:
    """(process ``pid`` alive, log text from byte ``offset``, bytes it holds) in one round trip."""
    return parse_poll(_run(c, poll_command(pid, log_path, offset)).stdout)


def read_log(c, log_path: str, max_bytes: int = 50 << 20) -> str:
    """The log's text (its last ``max_bytes`` bytes), or '' if missing."""
    return _run(c, f"tail -c {int(max_bytes)} {shlex.quote(log_path)} 2>/dev/null").stdout
