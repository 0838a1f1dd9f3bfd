"""Stream a growing log from a host as it is written: one long-running ``tail -F`` instead of a poll loop.

Over SSH every command costs a channel and a shell (~0.15 s on loopback), so polling cannot tell within
0.2 s that a ready line appeared. :class:`LogStream` runs ``tail -c +OFFSET -F --pid=PID LOG`` through the
same ``c.run`` (Invoke/Fabric, ``asynchronous=True``) and receives bytes as they arrive; GNU tail exits
by itself when the server process dies (``--pid``), which is how a crash is seen. The tail is a process we
started: :meth:`close` signals it by its PID (printed first by the command itself).
"""

from __future__ import annotations

import logging
import shlex
import threading
import time

log = logging.getLogger(__name__)


class _Sink:
    """File-like object Invoke writes the command's stdout into (from its reader thread)."""

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._lock = threading.Lock()
        self.event = threading.Event()

    def write(self, data: str) -> int:
        with self._lock:
            self._chunks.append(data)
        self.event.set()
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> str:
        with self._lock:
            data, self._chunks = "".join(self._chunks), []
        self.event.clear()
        return data


class LogStream:
    """Follow ``path`` from byte ``offset`` while process ``pid`` lives. Use as a context manager.

    ``read(timeout_s)`` returns the new text (waiting up to ``timeout_s`` seconds for some); ``ended`` is True
    once tail has exited (the process died, or tail could not run); ``supported`` is False when the host's
    tail lacks ``-F``/``--pid`` (busybox), and the caller should poll instead."""

    def __init__(self, c, path: str, pid: int, offset: int = 0):
        self.c = c
        self._sink = _Sink()
        self._tail_pid: int | None = None
        self._head = ""
        self.supported = True
        cmd = (f"echo $$; exec tail -s 0.1 -c +{int(offset) + 1} -F --pid={int(pid)} {shlex.quote(path)} "
               f"2>/dev/null")
        self._promise = c.run(cmd, asynchronous=True, hide=False, out_stream=self._sink, err_stream=_Sink(),
                              warn=True, in_stream=False, pty=False)

    def __enter__(self) -> "LogStream":
        return self

    def __exit__(self, *exc) -> None:
        # stopping the tail costs a round trip (~0.15 s over SSH): do it off the caller's path
        threading.Thread(target=self.close, name="logstream-close", daemon=True).start()

    @property
    def ended(self) -> bool:
        runner = getattr(self._promise, "runner", None)
        return bool(runner is not None and runner.process_is_finished)

    def read(self, timeout_s: float) -> str:
        """New text since the last call (possibly ''), waiting at most ``timeout_s`` seconds for some."""
        if not self._sink.event.is_set() and not self.ended:
            self._sink.event.wait(timeout_s)
        data = self._sink.take()
        if self._tail_pid is None:
            self._head += data
            if "\n" not in self._head:
                if self.ended:
                    self.supported = False
                return ""
            first, _, data = self._head.partition("\n")
            self._head = ""
            self._tail_pid = int(first) if first.strip().isdigit() else -1
        return data

    def close(self) -> None:
        """Stop the tail (by its PID) and wait for the command to end."""
        if not self.ended and self._tail_pid and self._tail_pid > 0:
            try:
                self.c.run(f"kill {self._tail_pid}", hide=True, warn=True, in_stream=False)
            except Exception as e:  # the connection dropped (TransportLost): the tail ended with its channel
                log.debug("could not stop the log stream's tail: %s", e)
        deadline = time.monotonic() + 5
        while not self.ended and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            self._promise.join()
        except Exception as e:  # a killed tail exits non-zero; warn=True keeps that quiet
            log.debug("log stream ended: %s", e)
