"""Read an SGLang server log: its final state with a hint, its startup milestones and its decode stats.

``classify_log`` is pure (text in, :class:`LogClassification` out) and is what the lifecycle's wait-ready
loop calls on the log text read so far each time new bytes arrive, what ``classify-log`` prints and what
the report records. The failure signatures are the data table of :mod:`mtp_remote.remote.signatures`; this
module only scans. Every pattern is precompiled and searched over the whole text once (no per-line Python
loop except over ``Decode batch`` lines), so a few-MB log classifies in milliseconds.

The log's *final state*: a fatal signature after the last ``The server is fired up and ready to roll!``
line wins over ``ready``; a fatal line before it is history (the server still came up). Launch-time errors
seen after serving began are ``scheduler_died``; request-level tracebacks (``Exception in ASGI
application``) and errors followed by progress are not fatal; a traceback no signature knows is at least a
fatal ``unknown`` (see :mod:`mtp_remote.remote.signatures`). After ``SIGTERM received`` the state is
``stopping``, then ``stopped`` (drain finished with 0 requests) or ``drain_stuck`` (N > 0 repeated); a fatal
line before the SIGTERM still wins. Without a ready line and without a fatal line the server is
``starting``. ``docs/CLASSIFIER.md`` lists every class with an example.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from mtp_remote.remote.signatures import (
    DRAIN_REMAINING,
    MEMORY_CAUSE,
    MEMORY_CAUSE_HINT,
    REQUEST_ERROR,
    SCHEDULER_CRASH_HINT,
    SCHEDULER_UNKNOWN_HINT,
    SHUTDOWN_START,
    SIGNATURES,
    STATE_HINTS,
    UNKNOWN_HINT,
    UNKNOWN_TRACEBACK,
    Signature,
)

#: The line SGLang's HTTP server prints once warmup succeeded (``http_server.py``).
READY_LINE = "The server is fired up and ready to roll!"

#: Startup milestones in SGLang's order, each the first line that matches its pattern.
MILESTONE_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("weights_loaded", re.compile(r"Load weight end\.")),
    ("kv_cache_allocated", re.compile(r"KV Cache is allocated\.|Memory pool end\.")),
    ("cuda_graph_captured", re.compile(r"Capture cuda graph end\.")),
    ("http_up", re.compile(r"Uvicorn running on ")),
    ("ready", re.compile(re.escape(READY_LINE))),
)
MILESTONE_NAMES = tuple(name for name, _ in MILESTONE_PATTERNS)
#: Lines that show the server still making progress: a traceback followed by one of these was not fatal.
_PROGRESS_MARKERS = ("Decode batch", "Prefill batch", READY_LINE, "Load weight begin", "Load weight end",
                     "Init torch distributed ends", "KV Cache is allocated",
                     "Memory pool end", "Capture cuda graph end", "Uvicorn running on")
#: A line of SGLang's own logger (timestamp prefix), which ends a traceback block.
_TIMESTAMP_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}", re.MULTILINE)

# SGLang's prefix: "[2026-11-02 09:14:47 TP0] ..." or "[2026-11-02 09:14:47] ..." (rank suffix optional).
_TIMESTAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(?: [^\]]*)?\]")
# "Decode batch, #running-req: 8, ..." (0.5.x) and "Decode batch. #running-req: 1, ..." (0.4.x).
_DECODE = re.compile(r"Decode batch[.,]([^\n]*)")
_RUNNING = re.compile(r"#running-req: (\d+)")
_GEN_THROUGHPUT = re.compile(r"gen throughput \(token/s\): ([0-9.]+)")
_ACCEPT_LEN = re.compile(r"accept len: ([0-9.]+)")
_ACCEPT_RATE = re.compile(r"accept rate: ([0-9.]+)")


@dataclass(frozen=True)
class Milestone:
    """One startup milestone: ``name`` (one of ``MILESTONE_NAMES``), its log timestamp and 1-based line."""

    name: str
    at: datetime | None
    line_no: int


@dataclass(frozen=True)
class DecodeStats:
    """Values of one ``Decode batch`` line: running requests, generation tokens/s, acceptance.

    ``accept_len`` is SGLang's mean tokens committed per verify step (bonus token included);
    ``accept_rate`` is absent before SGLang printed it (0.4.x) and on non-speculative servers.
    """

    at: datetime | None
    running: int | None
    gen_throughput: float | None
    accept_len: float | None
    accept_rate: float | None

    def to_dict(self) -> dict:
        """``{"at", "running", "gen_throughput", "accept_len", "accept_rate"}`` with ``at`` in ISO form."""
        return {"at": _iso(self.at), "running": self.running, "gen_throughput": self.gen_throughput,
                "accept_len": self.accept_len, "accept_rate": self.accept_rate}


@dataclass(frozen=True)
class LogClassification:
    """A log's final state.

    ``cls`` is ``ready``, ``starting``, ``stopping``, ``stopped``, ``drain_stuck``, ``unknown`` or a failure
    class of ``../shared/corpus/README.md``; ``severity`` is ``ok``, ``warning`` (ready/starting but a
    warning signature matched) or ``fatal`` (``drain_stuck`` included); ``hint`` is one line saying what to
    do; ``fatal_line`` the line that decided a fatal class; ``port``/``flag``/``pid`` are what the deciding
    line names (busy port, bad flag, the process holding an internal port). ``started_at`` is the first
    timestamp in the log.
    """

    cls: str
    severity: str
    hint: str
    fatal_line: str | None
    milestones: list[Milestone] = field(default_factory=list)
    decode: list[DecodeStats] = field(default_factory=list)
    port: int | None = None
    flag: str | None = None
    started_at: datetime | None = None
    pid: int | None = None

    @property
    def is_ready(self) -> bool:
        """True when the ready line was seen and no fatal signature came after it."""
        return self.cls == "ready"

    @property
    def is_fatal(self) -> bool:
        """True when a fatal signature decided the state (the server is down or going down)."""
        return self.severity == "fatal"

    @property
    def last_milestone(self) -> Milestone | None:
        """The latest milestone reached, or None before weights are loaded."""
        return self.milestones[-1] if self.milestones else None

    def to_dict(self, file: str | None = None) -> dict:
        """The JSON shape of ``classify-log --json`` (issue 5): ``{"file"?, "cls", "severity", "hint",
        "fatal_line", "port", "flag", "pid", "milestones": [{"name", "at", "line_no"}], "durations_s",
        "decode": [{"at", "running", "gen_throughput", "accept_len", "accept_rate"}]}``."""
        out: dict = {"file": file} if file is not None else {}
        out.update({
            "cls": self.cls, "severity": self.severity, "hint": self.hint, "fatal_line": self.fatal_line,
            "port": self.port, "flag": self.flag, "pid": self.pid,
            "milestones": [{"name": m.name, "at": _iso(m.at), "line_no": m.line_no} for m in self.milestones],
            "durations_s": milestone_durations(self.milestones, start=self.started_at),
            "decode": [d.to_dict() for d in self.decode],
        })
        return out


def classify_log(text: str, *, serving: bool = False) -> LogClassification:
    """Classify SGLang log text (the whole log, or what was read of it so far).

    ``serving=True`` says the text starts after the server was ready (a window of a live log, as the
    runner's watcher reads it): every error in it is then a crash of the running server, not a launch error.
    Returns the final state (module docstring), the milestones reached in log order, and one
    :class:`DecodeStats` per ``Decode batch`` line. Never raises on odd input: unknown text is ``starting``.
    Cost is linear in ``len(text)``: a few C-level searches per signature and milestone.
    """
    scan = _Scan(_condensed(text), serving=serving)
    milestones = _milestones(text)
    decode = _decode_stats(text)
    started_at = _first_timestamp(text)
    common = dict(milestones=milestones, decode=decode, started_at=started_at)

    found = scan.fatal()
    if found is not None:
        return LogClassification(severity="fatal", **found, **common)
    shutdown = scan.shutdown()
    if shutdown is not None:
        cls, n = shutdown
        return LogClassification(cls=cls, severity="fatal" if cls == "drain_stuck" else "ok",
                                 hint=STATE_HINTS[cls].format(n=n), fatal_line=None, **common)
    cls = "ready" if scan.ready_at >= 0 else "starting"
    warning = scan.warning()
    if warning is not None:
        sig, m = warning
        return LogClassification(cls=cls, severity="warning", hint=_fill_hint(sig.hint, m.groupdict()),
                                 fatal_line=None, **common)
    return LogClassification(cls=cls, severity="ok", hint=STATE_HINTS[cls], fatal_line=None, **common)


class _Scan:
    """The positions that decide a log's state, found once: the last ready line, where serving began, where
    a shutdown began, the request-level error blocks to ignore and the last sign of progress."""

    def __init__(self, text: str, *, serving: bool):
        self.text = text
        self.ready_at = text.rfind(READY_LINE)
        self.after = self.ready_at + len(READY_LINE) if self.ready_at >= 0 else 0
        if serving:
            self.serving_from = 0
        else:
            starts = [p for p in (self.ready_at, text.find("Decode batch")) if p >= 0]
            self.serving_from = min(starts) if starts else len(text) + 1
        self.skip = _request_error_spans(text)
        term = [m for m in SHUTDOWN_START.finditer(text, self.after) if not self._skipped(m.start())]
        self.term_at = term[-1].start() if term else -1
        self.end = self.term_at if self.term_at >= 0 else len(text)
        self.last_progress = max(text.rfind(marker) for marker in _PROGRESS_MARKERS)

    def _skipped(self, pos: int) -> bool:
        return any(a <= pos < b for a, b in self.skip)

    def _progress_after(self, pos: int) -> bool:
        return self.last_progress > _line_bounds(self.text, pos)[1]

    def fatal(self) -> dict | None:
        """The deciding fatal match as LogClassification fields, or None."""
        for sig in SIGNATURES:
            if sig.severity != "fatal":
                continue
            m = self._first_valid(sig)
            if m is not None:
                return self._describe(sig, m)
        return self._unknown()

    def _first_valid(self, sig: Signature) -> re.Match | None:
        if sig.needs and not any(self.text.find(lit, self.after, self.end) >= 0 for lit in sig.needs):
            return None
        first = None
        for n, m in enumerate(sig.regex.finditer(self.text, self.after, self.end)):
            if n >= 64:
                break
            if self._skipped(m.start()):
                continue
            crash = sig.phase == "launch" and m.start() >= self.serving_from
            if (sig.transient or crash) and self._progress_after(m.start()):
                continue  # the server kept going after it: a failed request, not the server's death
            start = self.text.rfind("\n", 0, m.start()) + 1
            if self.text[start:start + 1] not in (" ", "\t"):
                return m
            first = first or m  # on an indented traceback source line: use only when nothing better
        return first

    def _describe(self, sig: Signature, m: re.Match) -> dict:
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        line = _line_at(self.text, m.start())
        cls, hint = sig.cls, sig.hint
        if sig.phase == "launch" and m.start() >= self.serving_from:
            cls, hint = "scheduler_died", SCHEDULER_CRASH_HINT
            groups["exc"] = line.split("] ", 1)[-1].strip()[:200]
        elif sig.wraps:
            cls, hint, groups = self._wrapped(sig, m, groups)
        if cls == "port_in_use" and "pid" not in groups and "name" in groups:
            holder = re.search(rf"{re.escape(groups['name'])} is used by a process already.*?\bpid=(\d+)", self.text)
            if holder:
                groups["pid"] = holder.group(1)
        port = groups.get("port")
        pid = groups.get("pid")
        return dict(cls=cls, hint=_fill_hint(hint, groups), fatal_line=line,
                    port=int(port) if port else None, flag=groups.get("flag"), pid=int(pid) if pid else None)

    def _wrapped(self, sig: Signature, m: re.Match, groups: dict) -> tuple[str, str, dict]:
        """A wrapper's class from its cause: memory keeps the wrapper with the memory hint, a cause another
        signature knows takes that class, anything else keeps the wrapper with its generic hint."""
        cause = groups.get("cause", "").strip()
        if not cause:
            rest = self.text[m.end():m.end() + 2000].lstrip("\n").split("\n", 1)
            cause = rest[0].strip()
        groups["cause"] = cause[:200] or "cause not logged"
        if MEMORY_CAUSE.search(cause):
            return sig.cls, MEMORY_CAUSE_HINT, groups
        for other in SIGNATURES:
            if other.severity == "fatal" and not other.wraps and other.regex.search(cause):
                return other.cls, other.hint, groups
        return sig.cls, sig.hint, groups

    def _unknown(self) -> dict | None:
        """The fallback: the last complete traceback after the ready line that nothing followed."""
        last = None
        for m in UNKNOWN_TRACEBACK.finditer(self.text, self.after, self.end):
            if not self._skipped(m.start()):
                last = m
        if last is None or self._progress_after(last.start("exc")):
            return None
        exc = last.group("exc").strip()
        opening = _line_at(self.text, last.start())
        if last.start() >= self.serving_from:
            cls, hint = "scheduler_died", SCHEDULER_CRASH_HINT
        elif "Scheduler hit an exception" in opening:
            cls, hint = "scheduler_died", SCHEDULER_UNKNOWN_HINT
        else:
            cls, hint = "unknown", UNKNOWN_HINT
        return dict(cls=cls, hint=_fill_hint(hint, {"exc": exc[:200]}), fatal_line=exc, port=None, flag=None,
                    pid=None)

    def warning(self) -> tuple[Signature, re.Match] | None:
        for sig in SIGNATURES:
            if sig.severity == "warning":
                m = sig.regex.search(self.text)
                if m:
                    return sig, m
        return None

    def shutdown(self) -> tuple[str, int] | None:
        """``(state, remaining requests)`` once SIGTERM was received after the ready line, else None."""
        if self.term_at < 0:
            return None
        counts = [int(m.group("n")) for m in DRAIN_REMAINING.finditer(self.text, self.term_at)]
        if not counts:
            return "stopping", 0
        if counts[-1] == 0:
            return "stopped", 0
        stuck = 0
        for n in reversed(counts):
            if n == 0:
                break
            stuck += 1
        return ("drain_stuck" if stuck >= 2 else "stopping"), counts[-1]


_CONDENSE_FROM = 256 * 1024


def _condensed(text: str) -> str:
    """``text`` with every run of routine lines (``Decode batch``, ``Prefill batch``, requests answered
    ``200 OK``: they carry no failure) cut to its first and last line, for logs
    past 256 KiB: the state only depends on the order of lines, and a long log is mostly routine, so the
    signature scan then reads a few KiB instead of megabytes. Milestones and decode stats read the full text."""
    if len(text) < _CONDENSE_FROM:
        return text
    out: list[str] = []
    run_last: str | None = None
    for line in text.split("\n"):
        if "Decode batch" in line or "Prefill batch" in line or '" 200 OK' in line:
            if run_last is None:
                out.append(line)
                run_last = ""
            else:
                run_last = line
            continue
        if run_last:
            out.append(run_last)
        run_last = None
        out.append(line)
    if run_last:
        out.append(run_last)
    return "\n".join(out)


def _request_error_spans(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of every request-level error block: from the line that says a request failed
    (``Exception in ASGI application``) to the next timestamped log line, or to the end of its traceback's
    exception line when no timestamped line follows (to the end of the text while it is still being written)."""
    spans = []
    for m in REQUEST_ERROR.finditer(text):
        line_end = _line_bounds(text, m.start())[1]
        nxt = _TIMESTAMP_LINE.search(text, line_end)
        if nxt is not None:
            spans.append((m.start(), nxt.start()))
            continue
        exc = UNKNOWN_TRACEBACK.search(text, line_end)
        spans.append((m.start(), exc.end() if exc else len(text)))
    return spans


def milestone_durations(milestones: Iterable[Milestone], *, start: datetime | None = None) -> dict[str, float]:
    """Seconds from each milestone's predecessor to it: ``{name: seconds}``, in milestone order.

    The first milestone is measured from ``start`` (e.g. the log's first timestamp) when given, and left
    out otherwise; milestones without a timestamp are skipped. Resolution is SGLang's: whole seconds.
    """
    out: dict[str, float] = {}
    prev = start
    for m in milestones:
        if m.at is None:
            continue
        if prev is not None:
            out[m.name] = (m.at - prev).total_seconds()
        prev = m.at
    return out


# --- helpers -------------------------------------------------------------------------------------------


class _Defaults(dict):
    """Hint fields for a signature whose optional group did not match."""

    def __missing__(self, key: str) -> str:
        return {"port": "(see log)", "flag": "the flag", "pid": "(not logged)", "proc": "name not logged",
                "name": "port", "value": "the value SGLang names", "cause": "cause not logged",
                "exc": "see the log"}.get(key, "?")


def _fill_hint(hint: str, groups: dict) -> str:
    return hint.format_map(_Defaults({k: v for k, v in groups.items() if v is not None}))


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, (len(text) if end < 0 else end)


def _line_at(text: str, pos: int) -> str:
    start, end = _line_bounds(text, pos)
    return text[start:end].rstrip("\r")


def _timestamp_of_line(text: str, pos: int) -> datetime | None:
    start, end = _line_bounds(text, pos)
    m = _TIMESTAMP.match(text, start, end)
    return _parse_ts(m.group(1)) if m else None


def _parse_ts(raw: str) -> datetime | None:
    try:
        return datetime.fromisoformat(raw.replace("T", " "))
    except ValueError:
        return None


def _first_timestamp(text: str) -> datetime | None:
    m = _TIMESTAMP.search(text)
    return _parse_ts(m.group(1)) if m else None


def _milestones(text: str) -> list[Milestone]:
    found = []
    for name, pattern in MILESTONE_PATTERNS:
        m = pattern.search(text)
        if m:
            found.append((m.start(), name))
    found.sort()
    out: list[Milestone] = []
    line_no, last = 1, 0
    for pos, name in found:
        line_no += text.count("\n", last, pos)
        last = pos
        out.append(Milestone(name=name, at=_timestamp_of_line(text, pos), line_no=line_no))
    return out


def _decode_stats(text: str) -> list[DecodeStats]:
    out: list[DecodeStats] = []
    for m in _DECODE.finditer(text):
        rest = m.group(1)
        out.append(DecodeStats(
            at=_timestamp_of_line(text, m.start()),
            running=_num(_RUNNING, rest, int),
            gen_throughput=_num(_GEN_THROUGHPUT, rest, float),
            accept_len=_num(_ACCEPT_LEN, rest, float),
            accept_rate=_num(_ACCEPT_RATE, rest, float),
        ))
    return out


def _num(pattern: re.Pattern, s: str, kind):
    m = pattern.search(s)
    if not m:
        return None
    try:
        return kind(m.group(1).rstrip("."))
    except ValueError:
        return None


def _iso(at: datetime | None) -> str | None:
    return at.isoformat(sep=" ") if at is not None else None
