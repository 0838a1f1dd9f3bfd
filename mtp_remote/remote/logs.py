"""Read an SGLang server log: its final state with a hint, its startup milestones and its decode stats.

``classify_log`` is pure (text in, :class:`LogClassification` out) and is what the lifecycle's wait-ready
loop calls on the log text read so far each time new bytes arrive, what ``classify-log`` prints and what
the report records. The failure signatures are the data table of :mod:`mtp_remote.remote.signatures`; which
line decides is :mod:`mtp_remote.remote.log_state`; this module assembles the result. Every pattern is precompiled and searched over the whole text once (no per-line Python
loop except over ``Decode batch`` lines), so a few-MB log classifies in milliseconds.

The text is first normalised (:func:`mtp_remote.remote.log_state.normalized`: ANSI codes, CRLF/CR, NUL padding
and log collectors' line prefixes removed) and cut to its last launch (:func:`~mtp_remote.remote.log_state.
launch_start`: a ``server_args=ServerArgs(`` or argparse ``usage:`` line), so a log appended over several
launches is judged, and its milestones and decode stats read, by the last one.

The log's *final state*: a fatal signature after the last ``The server is fired up and ready to roll!``
line wins over ``ready``; a fatal line before it is history (the server still came up), except a failed
bind of the HTTP port (``signatures.HTTP_BIND_FAILED``), fatal wherever it stands, and a failed warmup
(``before_ready`` signatures), which the ready line after it does not undo. Launch-time errors
seen after serving began are ``scheduler_died``; request-level tracebacks (``Exception in ASGI
application``) and errors followed by progress are not fatal; a traceback no signature knows is at least a
fatal ``unknown`` (see :mod:`mtp_remote.remote.signatures`). After ``SIGTERM received`` the state is
``stopping``, then ``stopped`` (drain finished with 0 requests) or ``drain_stuck`` (N > 0 repeated); a fatal
line before the SIGTERM still wins. Without a ready line and without a fatal line the server is
``starting`` -- or ``ready`` when it is an excerpt from the middle of serving (no startup line, batches run
and requests answered: :func:`_serving_excerpt`) -- unless the text holds no SGLang line at all (:data:`SGLANG_LINE`: not an SGLang log, or not
yet one): ``no_sglang_lines``, which is not fatal (a server may print other lines before its first). ``docs/CLASSIFIER.md`` lists every class with an example.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from mtp_remote.remote.log_state import (READY_LINE, StateScan, condensed, fill_hint, launch_start, line_bounds,
                                         normalized)
from mtp_remote.remote.signatures import STATE_HINTS

#: Startup milestones in SGLang's order, each the first line that matches its pattern.
MILESTONE_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("weights_loaded", re.compile(r"Load weight end\.")),
    ("kv_cache_allocated", re.compile(r"KV Cache is allocated\.|Memory pool end\.")),
    # "Capture cuda graph end." (NVIDIA), "Capture npu graph end." / "Capture cpu graph end." (other devices),
    # "Capture piecewise cuda graph end." (0.5.x); the draft model's "Capture draft ..." comes after the target's.
    # "Capture target verify CUDA graph end" (speculative verify graphs) has more words before "graph"
    ("cuda_graph_captured", re.compile(r"(?i:Capture (?:[\w-]+ ){0,4}graph end)\b")),
    ("http_up", re.compile(r"Uvicorn running on ")),
    ("ready", re.compile(re.escape(READY_LINE))),
)
MILESTONE_NAMES = tuple(name for name, _ in MILESTONE_PATTERNS)
#: A line only an SGLang server (or its launcher) writes: SGLang's logger prefix ``[2026-11-02 09:14:47 TP0]``,
#: its ``server_args=ServerArgs(`` line, argparse's ``usage: launch_server.py``/``python -m sglang...``, a traceback through ``sglang/`` sources, a ``sglang::`` process name.
SGLANG_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?: [^\]\n]*)?\] "
                         r"|server_args=ServerArgs\(|^usage: \S*(?:launch_server|sglang)"
                         r"|[/\\]sglang[/\\]\S*\.py\b|sglang::|Traceback \(most recent call last\)", re.MULTILINE)
# SGLang's prefix: "[2026-11-02 09:14:47 TP0] ..." or "[2026-11-02 09:14:47] ..." (rank suffix optional).
_TIMESTAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(?: [^\]]*)?\]")
# "Decode batch, #running-req: 8, ..." (0.5.x) and "Decode batch. #running-req: 1, ..." (0.4.x).
# One pass per Decode batch line, fields in SGLang's order (each optional): "Decode batch, #running-req: 8, ...,
# accept len: 3.12, accept rate: 0.78, ..., gen throughput (token/s): 152.40, ..." (0.5.x), "Decode batch. ..."
# without accept rate (0.4.x), and with SGLANG_LOG_FORWARD_ITERS=1 the forward count: "Decode batch [1200], ...".
_DECODE = re.compile(r"Decode batch(?: ?\[\d+\])?[.,:](?:[^\n]*?#running-reqs?: (\d+))?"
                     r"(?:[^\n]*?accept(?:ance)? len(?:gth)?: ([0-9.]+))?(?:[^\n]*?accept(?:ance)? rate: ([0-9.]+))?"
                     r"(?:[^\n]*?gen throughput \((?:token|tok)s?/s\): ([0-9.]+))?")


@dataclass(frozen=True)
class Milestone:
    """One startup milestone: ``name`` (one of ``MILESTONE_NAMES``), its log timestamp and 1-based line."""

    name: str
    at: datetime | None
    line_no: int


@dataclass(frozen=True, slots=True)
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
    text = normalized(text)
    start = launch_start(text)
    lines_before = text.count("\n", 0, start)
    text = text[start:]
    scan = StateScan(condensed(text), serving=serving)
    milestones = _milestones(text, first_line=lines_before + 1)
    decode = _decode_stats(text)
    started_at = _first_timestamp(text)
    common = {"milestones": milestones, "decode": decode, "started_at": started_at}

    found = scan.fatal()
    if found is not None:
        return LogClassification(severity="fatal", **found, **common)
    shutdown = scan.shutdown()
    if shutdown is not None:
        cls, n = shutdown
        return LogClassification(cls=cls, severity="fatal" if cls == "drain_stuck" else "ok",
                                 hint=STATE_HINTS[cls].format(n=n), fatal_line=None, **common)
    cls = "ready" if scan.ready_at >= 0 or _serving_excerpt(text, milestones) else "starting"
    if cls == "starting" and not milestones and text.strip() and not SGLANG_LINE.search(text):
        return LogClassification(cls="no_sglang_lines", severity="ok", hint=STATE_HINTS["no_sglang_lines"],
                                 fatal_line=None, **common)
    warning = scan.warning()
    if warning is not None:
        sig, m = warning
        return LogClassification(cls=cls, severity="warning", hint=fill_hint(sig.hint, m.groupdict()),
                                 fatal_line=None, **common)
    return LogClassification(cls=cls, severity="ok", hint=STATE_HINTS[cls], fatal_line=None, **common)


#: Lines only a server that is serving writes: a batch it ran, a request it answered.
_SERVING_EVIDENCE = re.compile(r"Decode batch|Prefill batch|\"(?:POST|GET) /(?:generate|v1/\S+) HTTP/[\d.]+\" 200\b")


def _serving_excerpt(text: str, milestones: list[Milestone]) -> bool:
    """An excerpt from the middle of serving: no startup line at all (no milestone, no ``server_args=``) and
    evidence of serving (batches run, requests answered 200) in SGLang's own lines (another server's access log
    is not SGLang's). Serving is evidence of readiness; a log of a
    launch always holds its milestones before its first batch (the warmup's included), so a growing log is
    never read as ready by this."""
    return (not milestones and "server_args=" not in text and _SERVING_EVIDENCE.search(text) is not None
            and SGLANG_LINE.search(text) is not None)


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


def _timestamp_of_line(text: str, pos: int) -> datetime | None:
    start, end = line_bounds(text, pos)
    m = _TIMESTAMP.match(text, start, end)
    return _parse_ts(m.group(1)) if m else None


@functools.lru_cache(maxsize=4096)  # thousands of Decode batch lines share a few distinct seconds
def _parse_ts(raw: str) -> datetime | None:
    try:
        return datetime.fromisoformat(raw.replace("T", " "))
    except ValueError:
        return None


def _first_timestamp(text: str) -> datetime | None:
    m = _TIMESTAMP.search(text)
    return _parse_ts(m.group(1)) if m else None


def _milestones(text: str, *, first_line: int = 1) -> list[Milestone]:
    found = []
    for name, pattern in MILESTONE_PATTERNS:
        m = pattern.search(text)
        if m:
            found.append((m.start(), name))
    found.sort()
    out: list[Milestone] = []
    line_no, last = first_line, 0
    for pos, name in found:
        line_no += text.count("\n", last, pos)
        last = pos
        out.append(Milestone(name=name, at=_timestamp_of_line(text, pos), line_no=line_no))
    return out


#: SGLang's warning when a speculative server verifies by argmax at T > 0 (``speculative/eagle_info.py:304`` and
#: ``ngram_info.py:427`` in 0.5.9): no tree speculative *sampling* kernel on this build (``spec_utils.py:50``:
#: CUDA only; a CPU, an AMD/HIP build), so its T > 0 output is the target's greedy one, not a sample.
GREEDY_FALLBACK = "Falling back to greedy verification"


def greedy_verification_fallback(text: str) -> str | None:
    """The first log line of ``text`` saying SGLang fell back to greedy verification (:data:`GREEDY_FALLBACK`),
    stripped; None when there is none. A speculative arm whose log says it draws its T > 0 output greedily: its
    T > 0 cells are not samples of the baseline's distribution (``analysis.diagnosis``)."""
    at = text.find(GREEDY_FALLBACK)
    if at < 0:
        return None
    start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
    line = text[start:end if end >= 0 else len(text)].strip()
    return line[:300]


def _decode_stats(text: str) -> list[DecodeStats]:
    out: list[DecodeStats] = []
    for m in _DECODE.finditer(text):
        running, accept_len, accept_rate, throughput = m.groups()
        out.append(DecodeStats(
            at=_timestamp_of_line(text, m.start()),
            running=_value(running, int),
            gen_throughput=_value(throughput, float),
            accept_len=_value(accept_len, float),
            accept_rate=_value(accept_rate, float),
        ))
    return out


def _value(raw: str | None, kind):
    if raw is None:
        return None
    try:
        return kind(raw.rstrip("."))
    except ValueError:
        return None


def _iso(at: datetime | None) -> str | None:
    return at.isoformat(sep=" ") if at is not None else None
