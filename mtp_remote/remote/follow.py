"""Follow a server's log from a host as it is written: one long-running host-side step for the server's whole life.

Over SSH every command costs a channel and a shell (~0.1-0.15 s on loopback), so polling cannot tell within
50 ms that a ready line appeared, and a poll per second while sampling is one exec session per second.
:class:`LogStream` runs ``follow.sh`` (``tail -c +OFFSET -f LOG`` behind a small reader) through the
same ``c.run`` (Invoke/Fabric, ``asynchronous=True``) and receives bytes as they arrive. The same stream serves
the readiness wait, the crash watch while sampling and the log text kept with the run: GNU tail exits by itself
within 0.1 s of the server's exit (``--pid``), which is how a crash is seen and how the stream ends after a
stop. On the ready line the host side records the server's children (``server.children``) before passing the
line on, so that bookkeeping costs no round trip of its own. The tail is a process we started: :meth:`close`
signals it by its PID (printed first by the command itself) when a caller ends the stream early.
"""

from __future__ import annotations

import codecs
import logging
import threading
import time

from . import hostscripts
from .logs import READY_LINE

log = logging.getLogger(__name__)

#: The most log text a stream keeps (its last bytes): the size ``ProcessServer.read_log`` reads by default.
MAX_TEXT = 50 << 20


class _Sink:
    """File-like object Invoke writes the command's stdout into (from its reader thread). The command runs with
    ``encoding="latin-1"``, so each character written stands for one byte of the log, whatever the bytes are:
    :meth:`LogStream.read` counts and decodes them (UTF-8 across reads: a character cut between two reads is
    kept whole, a byte that is not UTF-8 becomes U+FFFD and still counts as one byte)."""

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


#: Bytes a stream's runner reads at a time (Invoke reads 1000).
READ_CHUNK = 1 << 20


def _streaming(runner) -> None:
    """Make Invoke's ``runner`` (local or Fabric's remote) fit for a long stream: it reads 1000 bytes at a time
    and after each read joins all it captured so far for the watchers (``Runner.respond``) — quadratic in the log
    (a 20 MB line took 40 s locally, over 90 s through SSH). A stream has no watchers: reads of :data:`READ_CHUNK`,
    no join. Its own capture is dropped as the stream reads (:meth:`LogStream.read`), so it holds no second copy
    of the log."""
    if runner is None:
        return
    runner.read_chunk_size = READ_CHUNK
    if not getattr(runner, "watchers", None):
        runner.respond = lambda buffer_: None


#: Seconds ``close`` waits for the tail's PID (the stream's first line) when the stream has only just opened.
PID_WAIT_S = 5.0


class LogStream:
    """Follow the log at ``path`` from byte ``offset`` while process ``pid`` (started ``start_ticks`` clock ticks
    after boot) lives; ``workdir`` is where its record is (``server.children`` is written there at the ready
    line ``ready``). Use as a context manager: leaving it stops the tail unless the stream already ended.

    ``read(timeout_s)`` returns the new text (waiting up to ``timeout_s`` seconds for some) and adds it to
    ``text`` (the last :data:`MAX_TEXT` characters); ``ended`` is True once the command has exited (the process
    died, or tail could not run: tell them apart with one poll); ``complete`` is False once ``text`` lost its
    head to the cap or tail could not run; ``nbytes`` counts the log bytes received (the
    offset a poll would continue from); ``children`` is ``[[pid, start_ticks], ...]`` once the host side has
    recorded them (None before, or when it could not). ``python``: the host's python, which reads the log before
    the ready line a pipe's worth at a time (without it the host's shell reads it line by line, a byte at a time:
    minutes for a 20 MB line). ``command``: another host command with the same contract (its PID as the first
    line, then the log's bytes until the server is gone), e.g. ``podman logs -f`` for a container per server
    (:mod:`mtp_remote.serving.container`)."""

    def __init__(self, c, path: str, pid: int, *, workdir: str, start_ticks: int, offset: int = 0,
                 ready: str | None = None, python: str | None = None, command: str | None = None):
        self.c = c
        self._sink = _Sink()
        self._err = _Sink()
        self._err_text = ""
        self._tail_pid: int | None = None
        self._head = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._joined = False
        self._chunks: list[str] = []  # the text, joined when asked for (appending to one str is quadratic)
        self._nchars = 0
        self.nbytes = 0
        self.offset = int(offset)
        self.supported = True
        self.complete = True  # False once text had to drop its head (over MAX_TEXT)
        self.children: list[list[int]] | None = None
        cmd = command or hostscripts.script_command("follow.sh", [workdir, path, int(pid), int(start_ticks),
                                                                  self.offset, ready or READY_LINE, python or ""])
        self._promise = c.run(cmd, asynchronous=True, hide=False, out_stream=self._sink, err_stream=self._err,
                              warn=True, in_stream=False, pty=False, encoding="latin-1")
        _streaming(getattr(self._promise, "runner", None))

    def __enter__(self) -> LogStream:
        return self

    def __exit__(self, *exc) -> None:
        if self.ended:
            self._join()
            return
        # stopping the tail costs a round trip (~0.1 s over SSH): do it off the caller's path
        threading.Thread(target=self.close, name="logstream-close", daemon=True).start()

    @property
    def ended(self) -> bool:
        runner = getattr(self._promise, "runner", None)
        return bool(runner is not None and runner.process_is_finished)

    def read(self, timeout_s: float) -> str:
        """New text since the last call (possibly ''), waiting at most ``timeout_s`` seconds for some."""
        if timeout_s > 0 and not self._sink.event.is_set() and not self.ended:
            self._sink.event.wait(timeout_s)
        data = self._sink.take()
        captured = getattr(getattr(self._promise, "runner", None), "stdout", None)
        if isinstance(captured, list):  # Invoke's capture of what the sink already has: not kept twice
            del captured[:]
        self._take_children()
        if self._tail_pid is None:
            self._head += data
            if "\n" not in self._head:
                if self.ended:
                    self.supported = self.complete = False
                return ""
            first, _, data = self._head.partition("\n")
            self._head = ""
            self._tail_pid = int(first) if first.strip().isdigit() else -1
        raw = data.encode("latin-1")
        self.nbytes += len(raw)
        data = self._utf8.decode(raw, final=self._joined)
        if data:
            self._chunks.append(data)
            self._nchars += len(data)
            if self._nchars > MAX_TEXT + (MAX_TEXT >> 2):  # amortised: cut back to the cap now and then
                text = "".join(self._chunks)[-MAX_TEXT:]
                self._chunks, self._nchars, self.complete = [text], len(text), False
        return data

    @property
    def text(self) -> str:
        """The log text received so far (its last :data:`MAX_TEXT` characters)."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        text = self._chunks[0] if self._chunks else ""
        if len(text) > MAX_TEXT:
            text = text[-MAX_TEXT:]
            self._chunks, self._nchars, self.complete = [text], len(text), False
        return text

    def _take_children(self) -> None:
        err = self._err.take()
        if not err:
            return
        self._err_text += err
        lines = [x[len("children "):] for x in self._err_text.splitlines() if x.startswith("children ")]
        if any(x.startswith("result ") for x in lines):
            ok, kids = hostscripts.parse_children("\n".join(lines))
            self.children = kids if ok else None
            if not ok:
                log.warning("could not record the server's children: %s", lines[-1])

    def wait_end(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for the stream to end (the server exited: GNU tail notices within
        0.1 s), reading what is left. True when it ended; then ``text`` holds the whole log from ``offset``
        (up to :data:`MAX_TEXT`)."""
        deadline = time.monotonic() + timeout_s
        while not self.ended and time.monotonic() < deadline:
            self.read(min(0.05, max(0.0, deadline - time.monotonic())))
        if not self.ended:
            return False
        self._join()
        self.read(0)
        return True

    def drain(self) -> str:
        """After the stream ended: wait for its last bytes to be handed over and return them (as ``read``)."""
        self._join()
        return self.read(0)

    def _join(self) -> None:
        try:
            self._promise.join()
        except Exception as e:  # noqa: BLE001 - a killed tail exits non-zero, a dropped channel raises paramiko's own
            log.debug("log stream ended: %s", e)
        self._joined = True  # every byte is in: the next read ends the UTF-8 decoding (a cut last character: U+FFFD)

    def close(self) -> None:
        """Stop the tail (by its PID) and wait for the command to end.

        The PID is the stream's first line, written once the host side has started its tail: a close right
        after the stream opened (Ctrl-C/SIGTERM as ``launch`` begins its wait) waits up to :data:`PID_WAIT_S`
        for it. Before, it found no PID, killed nothing and joined a follow that ends only when the server
        does -- while the stop of that server waited for this close: a hang (1 in 12 `fab launch` + SIGTERM
        under load). Should the PID still not come, or the tail outlive its kill, the wait for the command is
        bounded: the stream ends by itself once the server is stopped."""
        self.read(0)  # the tail's PID is the first line
        deadline = time.monotonic() + PID_WAIT_S
        while self._tail_pid is None and not self.ended and time.monotonic() < deadline:
            self.read(0.05)
        if not self.ended and self._tail_pid and self._tail_pid > 0:
            try:
                self.c.run(f"kill {self._tail_pid}", hide=True, warn=True, in_stream=False)
            except Exception as e:  # noqa: BLE001 - the connection dropped (TransportLost, paramiko): the tail ended with it
                log.debug("could not stop the log stream's tail: %s", e)
        deadline = time.monotonic() + 5
        while not self.ended and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.ended:
            self._join()
            return
        log.warning("the log stream's tail did not stop (its PID %s); left to end with the server",
                    self._tail_pid if self._tail_pid else "never came")
        joiner = threading.Thread(target=self._join, name="logstream-join", daemon=True)
        joiner.start()
        joiner.join(1.0)
