"""``watch``: probe live endpoints every ``interval_s`` seconds (:mod:`mtp_remote.watch.probe`), keep each one's
state, export it as Prometheus metrics (a textfile written atomically after each round, and/or ``/metrics`` served
on 127.0.0.1), record each probe in the history (table ``probes``), and alert when a probe loops or a greedy output
changes from the endpoint's first probe.

An alert runs the ``on_alert`` hook when one is given (and the watch goes on), else it ends the watch with exit
code 1 after that round's metrics and history are written. ``count`` ends the watch after that many rounds (exit 1
if any probe alerted, else 0). The endpoints are only sent requests: never launched, signalled or stopped, and no
host lock is taken. Load is one request at a time per endpoint by default (the probe playbook's ``concurrency``)
and one round per interval.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..config.endpoints import Endpoint
from ..config.playbook import Playbook
from ..errors import ConfigError
from ..report.history import record_probe
from ..records.summary import CellRecord
from ..report.watch_prom import render_watch_prometheus
from .probe import ProbeResult, greedy_changes, probe_endpoint

log = logging.getLogger(__name__)

#: Seconds an ``on_alert`` hook may run before it is killed.
HOOK_TIMEOUT_S = 60.0
#: Placeholders an ``on_alert`` command may hold; each is replaced by its value, shell-quoted.
HOOK_FIELDS = ("endpoint", "url", "reasons", "probe", "detail")


@dataclass
class EndpointState:
    """What ``watch`` keeps for one endpoint: the first probe's greedy outputs (the reference), running totals,
    the last probe and its alerts."""

    endpoint: Endpoint
    reference: dict[str, list | str] | None = None
    probes: int = 0
    samples_total: int = 0
    loops_total: int = 0
    alerts_total: int = 0
    last: ProbeResult | None = None
    changed: dict[str, int | None] = field(default_factory=dict)
    alerts: list[str] = field(default_factory=list)

    def take(self, res: ProbeResult) -> list[str]:
        """Fold in one probe; returns its alert reasons (``loop``, ``greedy-changed``), [] when none."""
        self.probes += 1
        self.last = res
        s = CellRecord.of(res.summary)
        self.samples_total += s.n
        self.loops_total += s.loops
        if self.reference is None and res.error is None:
            self.reference = dict(res.greedy)
            self.changed = {}
        elif self.reference is not None:
            self.changed = greedy_changes(self.reference, res.greedy)
            for pid, out in res.greedy.items():  # a prompt the first probe could not answer: its first answer
                self.reference.setdefault(pid, out)
        self.alerts = (["loop"] if s.loops else []) + (["greedy-changed"] if self.changed else [])
        self.alerts_total += bool(self.alerts)
        return self.alerts

    def detail(self) -> str:
        """One line saying why the last probe alerted."""
        parts = []
        if "loop" in self.alerts and self.last is not None:
            s = CellRecord.of(self.last.summary)
            parts.append(f"loops {s.loops}/{s.n} ({', '.join(self.last.looping)})")
        if self.changed:
            parts.append("greedy output changed since the first probe: " + ", ".join(
                f"{pid} at {'token' if isinstance((self.reference or {}).get(pid), list) else 'char'} {at}"
                for pid, at in sorted(self.changed.items())))
        return "; ".join(parts)

    def describe(self, alerts: list[str]) -> str:
        """One line for the last probe: endpoint, probe number, loops, acceptance (all / non-looping), greedy
        stability, latency, and the alert with :meth:`detail`."""
        res, name = self.last, self.endpoint.name
        if res is None or res.error is not None:
            return f"{name} probe {self.probes}: no answer ({res.error if res else '-'})"
        s = CellRecord.of(res.summary)
        clean = s.accept_length_nonloop
        acc = ("–" if s.accept_length is None else
               f"{s.accept_length:.2f} (non-looping {'–' if clean is None else f'{clean:.2f}'})")
        checked = self.greedy_checked()
        greedy = "reference" if not checked else "changed" if self.changed else f"same ({checked})"
        line = (f"{name} probe {self.probes}: loops {s.loops}/{s.n}, acceptance {acc}, greedy "
                f"{greedy}, latency {res.latency_s:.2f} s")
        return line + (f"  ALERT {','.join(alerts)}: {self.detail()}" if alerts else "")

    def greedy_checked(self) -> int:
        """How many prompts of the last probe had a greedy output to compare with the reference."""
        return len([p for p in self.last.greedy if p in (self.reference or {})]) if self.last else 0

    def to_dict(self) -> dict:
        """The state as :func:`~mtp_remote.report.watch_prom.render_watch_prometheus` reads it."""
        out: dict = {"endpoint": self.endpoint.name, "url": self.endpoint.url, "probes": self.probes,
                     "samples_total": self.samples_total, "loops_total": self.loops_total,
                     "alerts_total": self.alerts_total}
        res = self.last
        if res is None:
            return out
        s = CellRecord.of(res.summary)
        checked = self.greedy_checked()
        out.update(up=int(res.error is None), alerting=int(bool(self.alerts)), loops=s.loops, n=s.n,
                   errors=s.n_errors, duration_s=res.duration_s, latency_s=res.latency_s,
                   last_probe_at=round(datetime.fromisoformat(res.started_at).timestamp(), 3),
                   server_accept_length=res.server_accept_length, greedy_checked=checked,
                   greedy_changed=int(bool(self.changed)) if checked else None,
                   greedy_match_ratio=round((checked - len(self.changed)) / checked, 4) if checked else None)
        if res.error is None:
            out.update(loop_rate=s.loop_rate, accept_length=s.accept_length,
                       accept_length_nonloop=s.accept_length_nonloop, tokens_per_s=s.tokens_per_s,
                       tokens_per_s_nonloop=s.tokens_per_s_nonloop)
        return out


@dataclass
class WatchResult:
    """The end of a watch: its exit code (0 no alert, 1 an alert), the rounds done and every endpoint's state."""

    exit_code: int
    rounds: int
    states: list[EndpointState]


def hook_command(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{field}`` of :data:`HOOK_FIELDS` replaced by its value, shell-quoted (any other
    brace is left as written: ``awk '{print}'`` keeps working)."""
    out = template
    for k in HOOK_FIELDS:
        out = out.replace("{" + k + "}", shlex.quote(str(values.get(k, ""))))
    return out


def run_hook(template: str, state: EndpointState) -> int | None:
    """Run the ``on_alert`` command for ``state``'s last probe (values quoted: :func:`hook_command`; also in the
    environment as ``MTP_REMOTE_ALERT_<FIELD>``); its exit code, or None when it timed out."""
    values = {"endpoint": state.endpoint.name, "url": state.endpoint.url, "reasons": ",".join(state.alerts),
              "probe": str(state.probes), "detail": state.detail()}
    env = dict(os.environ, **{f"MTP_REMOTE_ALERT_{k.upper()}": v for k, v in values.items()})
    try:
        return subprocess.run(hook_command(template, values), shell=True, env=env, timeout=HOOK_TIMEOUT_S,
                              check=False).returncode
    except subprocess.TimeoutExpired:
        log.warning("the on-alert hook ran past %.0f s and was killed", HOOK_TIMEOUT_S)
        return None


def write_textfile(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file beside it, then a rename), as node-exporter's
    textfile collector needs (it must never read half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class MetricsListener:
    """``/metrics`` served on 127.0.0.1:``port`` from a thread (the text set by :meth:`publish`); ``port`` 0
    takes a free one (:attr:`port` then says which)."""

    def __init__(self, port: int):
        listener = self
        self.text = "# no probe yet\n"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404, "only /metrics here")
                    return
                body = listener.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet: the watch prints its own progress
                pass

        try:
            self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        except OSError as e:
            raise ConfigError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}", field="--listen") from None
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)
        self.thread.start()

    def publish(self, text: str) -> None:
        self.text = text

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class WatchOptions:
    """How to watch: seconds between rounds, rounds (None: until interrupted), where metrics go, the history
    file, the alert hook and the API key sent as a Bearer token."""

    interval_s: float = 300.0
    count: int | None = None
    metrics_file: Path | None = None
    listen: int | None = None
    history_db: Path | None = None
    on_alert: str | None = None
    api_key: str | None = None


def watch(endpoints: list[Endpoint], pb: Playbook, opts: WatchOptions, *,
          on_probe: Callable[[EndpointState, list[str]], None] = lambda state, alerts: None,
          sleep: Callable[[float], None] = time.sleep, on_listen: Callable[[int], None] = lambda port: None
          ) -> WatchResult:
    """Watch ``endpoints`` with probe playbook ``pb`` (see the module docstring); ``on_probe(state, alerts)``
    after each endpoint's probe, ``on_listen(port)`` once the listener is up. Raises ConfigError for a metrics
    file or listener that cannot be used."""
    from ..interrupts import run_async  # deferred: the entry points' loop runner

    states = [EndpointState(e) for e in endpoints]
    watch_id = datetime.now().strftime("%Y%m%d-%H%M%S-") + os.urandom(2).hex()
    listener = MetricsListener(opts.listen) if opts.listen is not None else None
    if listener is not None:
        on_listen(listener.port)
    rounds, alerted = 0, False
    try:
        while opts.count is None or rounds < opts.count:
            t0 = time.monotonic()
            results = run_async(_round(states, pb, opts.api_key))
            rounds += 1
            stop = False
            for state, res in zip(states, results):
                alerts = state.take(res)
                if opts.history_db is not None:
                    record_probe(opts.history_db, _probe_row(watch_id, state, res))
                on_probe(state, alerts)
                if alerts:
                    alerted = True
                    if opts.on_alert:
                        run_hook(opts.on_alert, state)
                    else:
                        stop = True
            text = render_watch_prometheus([s.to_dict() for s in states])
            if opts.metrics_file is not None:
                _write_metrics(opts.metrics_file, text)
            if listener is not None:
                listener.publish(text)
            if stop or (opts.count is not None and rounds >= opts.count):
                break
            sleep(max(0.0, opts.interval_s - (time.monotonic() - t0)))
    finally:
        if listener is not None:
            listener.close()
    return WatchResult(exit_code=1 if alerted else 0, rounds=rounds, states=states)


async def _round(states: list[EndpointState], pb: Playbook, api_key: str | None) -> list[ProbeResult]:
    """One probe of every endpoint, the endpoints side by side (each one's requests one at a time)."""
    return list(await asyncio.gather(*(probe_endpoint(s.endpoint, pb, s.probes, api_key=api_key) for s in states)))


def _write_metrics(path: Path, text: str) -> None:
    try:
        write_textfile(path, text)
    except OSError as e:
        raise ConfigError(f"cannot write the metrics file: {e.strerror}", file=str(path),
                          field="--metrics-file") from None


def _probe_row(watch_id: str, state: EndpointState, res: ProbeResult) -> dict:
    s, up = CellRecord.of(res.summary), res.error is None
    checked = state.greedy_checked() if state.last is not None else None
    return {"watch_id": watch_id, "endpoint": state.endpoint.name, "probe": res.probe, "url": state.endpoint.url,
            "started_at": res.started_at, "duration_s": res.duration_s, "n": s.n, "errors": s.n_errors,
            "loops": s.loops, "loop_rate": s.loop_rate if up else None,
            "accept_length": s.accept_length if up else None,
            "accept_length_nonloop": s.accept_length_nonloop if up else None,
            "tokens_per_s": s.tokens_per_s if up else None,
            "tokens_per_s_nonloop": s.tokens_per_s_nonloop if up else None, "greedy_checked": checked,
            "greedy_changed": int(bool(state.changed)) if checked else None,
            "alerts": state.alerts}
