"""Which line decides a log's state: the scan behind :func:`mtp_remote.remote.logs.classify_log`.

:class:`StateScan` finds, once per text, the positions that decide the state -- the last ready line, where
serving began, where a shutdown began, the request-level error blocks to skip, the last sign of progress
-- and then applies the signature table of :mod:`mtp_remote.remote.signatures` (phase, transient and
wrapped-cause rules, the unknown-traceback fallback, the shutdown states). Pure: text in, fields out.
Long logs are scanned in a condensed form (:func:`condensed`): runs of routine lines cut to their ends.
"""

from __future__ import annotations

import re

from mtp_remote.remote.signatures import (
    DRAIN_REMAINING,
    MEMORY_CAUSE,
    MEMORY_CAUSE_HINT,
    PHASE_CLASSES,
    PHASES_IN_LOG,
    REQUEST_ERROR,
    SCHEDULER_CRASH_HINT,
    SCHEDULER_UNKNOWN_HINT,
    SHUTDOWN_DONE,
    SHUTDOWN_START,
    SIGNATURES,
    UNKNOWN_HINT,
    UNKNOWN_TRACEBACK,
    Signature,
)

#: The line SGLang's HTTP server prints once warmup succeeded (``http_server.py``).
READY_LINE = "The server is fired up and ready to roll!"

#: Lines that show the server still making progress: a traceback followed by one of these was not fatal.
_PROGRESS_MARKERS = ("Decode batch", "Prefill batch", READY_LINE, "Load weight begin", "Load weight end",
                     "Init torch distributed ends", "KV Cache is allocated",
                     "Memory pool end", "Capture cuda graph end", " graph end", " CUDA graph end", "Uvicorn running on")
#: A launch's first line on every rank: after an HTTP bind failure (uvicorn binds last), it means a relaunch.
_RELAUNCH_MARKER = "Init torch distributed begin"
#: A line of SGLang's own logger (timestamp prefix), which ends a traceback block.
_TIMESTAMP_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}", re.MULTILINE)

#: ANSI escape sequences (CSI: colours, cursor moves; OSC: titles) that a TTY capture leaves in a log.
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
#: Prefixes that log collectors put before every line, SGLang's own ``[date time rank]`` prefix kept after them:
#: ``docker logs -t`` (RFC 3339 time), ``docker compose logs`` (``sglang-1  | ``), ``kubectl logs --prefix``
#: (``[pod/name/container]``), journald's short formats (``Dec 01 10:00:00 host unit[pid]:``, ``-o short-iso``),
#: a collector's ISO time with a stream tag (``... stdout F`` of CRI logs), and torch.distributed's ``[rank1]:``
#: before a rank's uncaught-exception lines.
_OUTER_PREFIXES = (
    # journald first: its ISO form (``-o short-iso``) starts like a docker time
    re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T[\d:.,]+(?:Z|[+-]\d{2}:?\d{2})?) "
               r"\S+ [^\s:\[]+(?:\[\d+\])?: ", re.MULTILINE),
    re.compile(r"^[\w.-]+\s*\| ", re.MULTILINE),  # docker compose: "sglang-1  | "
    re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?(?: (?:stdout|stderr) [FP])? ",
               re.MULTILINE),
    re.compile(r"^\[pod/[^\]\n]*\] ", re.MULTILINE),
    re.compile(r"^\[rank\d+\]: ?", re.MULTILINE),
)
#: ``--log-requests`` lines carry a request's prompt and output (``Receive: obj=GenerateReqInput(text=...)``,
#: ``Finish: obj=..., out={...}``): user text that may quote any error or the ready line. Their payload is
#: blanked before any signature or milestone reads the log.
_REQUEST_PAYLOAD = re.compile(r"((?:Receive|Finish): (?:obj|rid)=)[^\n]*")
#: Where a launch starts: SGLang prints its ``server_args=ServerArgs(...)`` first; argparse opens its refusal
#: with ``usage: <prog> [-h] ...``. A log holding several launches (appended with ``>>``) is judged by its last.
_LAUNCH_START = re.compile(r"^(?:\[[^\]\n]*\] )?server_args=ServerArgs\(|^usage: \S+(?: \S+)? \[-h\]", re.MULTILINE)


def normalized(text: str) -> str:
    """``text`` as SGLang wrote it: NUL padding (copytruncate) and ANSI escapes removed, CRLF and bare CR
    (Windows copies, tqdm bars) as LF, the user text of ``--log-requests`` lines blanked, and the per-line
    prefixes of log collectors (docker, kubectl, journald, torch ranks) taken off, so every signature and the
    timestamp/rank prefix of SGLang's own lines read the same whatever carried the log. A prefix is taken off
    only when a line of the first 64 KiB starts with it; every step is a C-level replace/sub over the text (a
    few ms per MB). A bare CR counts as a line end, as a terminal shows it."""
    if "\x00" in text:  # logrotate copytruncate: the writer's old offset leaves NUL padding
        text = text.replace("\x00", "")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "Receive: " in text or "Finish: " in text:
        text = _REQUEST_PAYLOAD.sub(r"\1...", text)
    head = text[:65536]
    for prefix in _OUTER_PREFIXES:
        if prefix.search(head):
            text = prefix.sub("", text)
    return text


def launch_start(text: str) -> int:
    """Offset of the last launch's first line in ``text`` (0 when it holds one launch or none is marked).
    Searches backwards for the two literals (``server_args=ServerArgs(``, ``usage: ``) and checks their line."""
    best = 0
    for literal in ("server_args=ServerArgs(", "usage: "):
        end = len(text)
        while (pos := text.rfind(literal, 0, end)) >= 0:
            start = text.rfind("\n", 0, pos) + 1
            if start > best and _LAUNCH_START.match(text, start):
                best = start
                break
            if start <= best:
                break
            end = pos
    return best


class StateScan:
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
        return self.last_progress > line_bounds(self.text, pos)[1]

    def fatal(self) -> dict | None:
        """The deciding fatal match as LogClassification fields, or None. An ``anywhere`` signature decides
        wherever it stands in the text (before the ready line, before a shutdown) and before any other, unless
        a new launch's ``Init torch distributed begin`` follows it."""
        for sig in SIGNATURES:
            if sig.anywhere and sig.severity == "fatal":
                m = sig.regex.search(self.text) if any(lit in self.text for lit in sig.needs or ("",)) else None
                # decisive unless a relaunch (an excerpt without its ServerArgs line) began after it
                if m is not None and self.text.find(_RELAUNCH_MARKER, m.end()) < 0:
                    return self._describe(sig, m)
        for sig in SIGNATURES:
            if sig.severity != "fatal":
                continue
            m = self._first_valid(sig)
            if m is not None:
                if sig.generic:  # "a child died": the traceback before it, if any, says of what
                    named = self._unknown(died=True)
                    if named is not None and named["cls"] != "unknown":  # the scheduler's, or its launch phase's
                        return named
                return self._describe(sig, m)
        return self._unknown()

    def _first_valid(self, sig: Signature) -> re.Match | None:
        begin = 0 if sig.before_ready else self.after  # a failed warmup stands whatever ready line follows it
        if sig.needs and not any(self.text.find(lit, begin, self.end) >= 0 for lit in sig.needs):
            return None
        first = None
        for n, m in enumerate(sig.regex.finditer(self.text, begin, self.end)):
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
        for key in [k for k in groups if k[-1:] in ("2", "3")]:  # another spelling of a group in one pattern
            groups.setdefault(key[:-1], groups.pop(key))
        line = line_at(self.text, m.start())
        cls, hint = sig.cls, sig.hint
        phase = launch_phase(self.text, m.start()) if sig.by_phase and m.start() < self.serving_from else None
        if sig.phase == "launch" and m.start() >= self.serving_from:
            cls, hint = "scheduler_died", SCHEDULER_CRASH_HINT
            groups["exc"] = line.split("] ", 1)[-1].strip()[:200]
        elif phase is not None:
            cls, hint = PHASE_CLASSES[phase]
            groups["exc"] = line.strip()[:200]
        elif sig.wraps:
            cls, hint, groups = self._wrapped(sig, m, groups)
        if cls == "port_in_use" and "pid" not in groups and "name" in groups:
            holder = re.search(rf"{re.escape(groups['name'])} is used by a process already.*?\bpid=(\d+)", self.text)
            if holder:
                groups["pid"] = holder.group(1)
        port = groups.get("port")
        pid = groups.get("pid")
        return {"cls": cls, "hint": fill_hint(hint, groups), "fatal_line": line,
                "port": int(port) if port else None, "flag": groups.get("flag"), "pid": int(pid) if pid else None}

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

    def _unknown(self, *, died: bool = False) -> dict | None:
        """The fallback: the last complete traceback after the ready line that nothing followed. ``died``: a
        generic line already says a server process died (then the traceback is the scheduler's)."""
        last = None
        for m in UNKNOWN_TRACEBACK.finditer(self.text, self.after, self.end):
            if not self._skipped(m.start()):
                last = m
        if last is None or self._progress_after(last.start("exc")):
            return None
        exc = last.group("exc").strip()
        opening = line_at(self.text, last.start())
        phase = (launch_phase(self.text, last.start("exc"), by_lines=False) if last.start() < self.serving_from
                 else None)
        if last.start() >= self.serving_from:
            cls, hint = "scheduler_died", SCHEDULER_CRASH_HINT
        elif phase is not None:
            cls, hint = PHASE_CLASSES[phase]
        elif died or "Scheduler hit an exception" in opening:
            cls, hint = "scheduler_died", SCHEDULER_UNKNOWN_HINT
        else:
            cls, hint = "unknown", UNKNOWN_HINT
        return {"cls": cls, "hint": fill_hint(hint, {"exc": exc[:200]}), "fatal_line": exc, "port": None,
                "flag": None, "pid": None}

    def warning(self) -> tuple[Signature, re.Match] | None:
        for sig in SIGNATURES:
            if sig.severity == "warning":
                m = sig.regex.search(self.text)
                if m:
                    return sig, m
        return None

    def shutdown(self) -> tuple[str, int] | None:
        """``(state, remaining requests)`` once SIGTERM was received after the ready line, else None: ``stopped``
        when the drain reached 0 (or, without drain lines, uvicorn finished), ``drain_stuck`` when the last count
        N > 0 was said twice in a row, else ``stopping`` (a falling count is progress)."""
        if self.term_at < 0:
            return None
        counts = [int(m.group("n")) for m in DRAIN_REMAINING.finditer(self.text, self.term_at)]
        if not counts:  # no drain logged (0.4.x): uvicorn's own end of shutdown says it finished
            return ("stopped" if SHUTDOWN_DONE.search(self.text, self.term_at) else "stopping"), 0
        if counts[-1] == 0:
            return "stopped", 0
        # stuck: the same N > 0 said again (5 s apart); a count that keeps falling is a drain in progress
        return ("drain_stuck" if len(counts) >= 2 and counts[-2] == counts[-1] else "stopping"), counts[-1]


_CONDENSE_FROM = 256 * 1024


def condensed(text: str) -> str:
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
        line_end = line_bounds(text, m.start())[1]
        nxt = _TIMESTAMP_LINE.search(text, line_end)
        if nxt is not None:
            spans.append((m.start(), nxt.start()))
            continue
        exc = UNKNOWN_TRACEBACK.search(text, line_end)
        spans.append((m.start(), exc.end() if exc else len(text)))
    return spans


def traceback_block(text: str, pos: int, *, max_lines: int = 400) -> str:
    """The lines before ``pos`` up to the nearest line of SGLang's own logger (timestamp prefix): the traceback
    (chained ones included) whose exception line stands at ``pos``, at most ``max_lines`` lines."""
    start = line_bounds(text, pos)[0]
    for _ in range(max_lines):
        if start == 0:
            break
        prev = text.rfind("\n", 0, start - 1) + 1
        if _TIMESTAMP_LINE.match(text, prev):
            break
        start = prev
    return text[start:pos]


def launch_phase(text: str, pos: int, *, by_lines: bool = True) -> str | None:
    """The launch phase (``capture``, ``warmup``, ``weight_load``: :data:`~mtp_remote.remote.signatures.
    PHASES_IN_LOG`) an exception at ``pos`` was raised in, or None (argument checks, before any phase):
    first by the frames of its traceback, then by the last phase's opening line before it with no closing
    line between them (``by_lines=False``: by the frames alone)."""
    frames = traceback_block(text, pos)
    for name, frame_re, _, _ in PHASES_IN_LOG:
        if frame_re.search(frames):
            return name
    if not by_lines:
        return None
    best: tuple[int, str] | None = None
    for name, _, opening, closing in PHASES_IN_LOG:
        opened = None
        for m in opening.finditer(text, 0, pos):
            opened = m
        if opened is None or closing.search(text, opened.end(), pos):
            continue
        if best is None or opened.start() > best[0]:
            best = (opened.start(), name)
    return best[1] if best else None


class _Defaults(dict):
    """Hint fields for a signature whose optional group did not match."""

    def __missing__(self, key: str) -> str:
        return {"port": "(see log)", "flag": "the flag", "pid": "(not logged)", "proc": "name not logged",
                "name": "port", "value": "the value SGLang names", "cause": "cause not logged",
                "exc": "see the log"}.get(key, "?")


def fill_hint(hint: str, groups: dict) -> str:
    return hint.format_map(_Defaults({k: v for k, v in groups.items() if v is not None}))


def line_bounds(text: str, pos: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, (len(text) if end < 0 else end)


def line_at(text: str, pos: int) -> str:
    start, end = line_bounds(text, pos)
    return text[start:end].rstrip("\r")
