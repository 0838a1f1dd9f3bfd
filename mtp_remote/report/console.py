"""Rich renderings for the terminal: the verdict table, the cell table, and progress hooks for a run."""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..outside_text import for_terminal
from ..records.summary import LoopStopTotals, Summary
from .markdown import arm_counts, num, pct
from .next_step import next_step

if TYPE_CHECKING:
    from ..host.ops import StopCommandResult

_STYLE = {"healthy": "green", "spec-corrupts-output": "bold red", "base-model-degenerates": "yellow",
          "spec-ineffective": "yellow", "spec-slower": "yellow", "inconclusive": "magenta"}


def verdict_style(kind: str) -> str:
    return "bold red" if kind.startswith(("launch-failed", "crashed", "hung")) else _STYLE.get(kind, "")


def cells_table(doc: Summary | dict) -> Table:
    """Per (profile, temperature): loops, loop rate with CI, acceptance and tokens/s (all / non-loop)."""
    t = Table(title="Cells — loop rate with 95 % Wilson CI; accept len = completion_tokens / spec_verify_ct; "
                    "'all / ok' = all samples / non-looping ones", title_justify="left")
    for col in ("profile", "T", "loops", "loop rate [95 % CI]", "think closed", "accept len all / ok",
                "tok/s all / ok"):
        t.add_column(col, justify="right" if col not in ("profile",) else "left")
    for c in Summary.of(doc).cells:
        rate = f"{pct(c.loop_rate)} [{pct(c.loop_ci[0])}, {pct(c.loop_ci[1])}]" if c.n else "– (no samples)"
        t.add_row(c.profile, f"{c.temperature:g}", f"{c.loops}/{c.n}", rate, pct(c.think_closed_rate),
                  f"{num(c.accept_length)} / {num(c.accept_length_nonloop)}",
                  f"{num(c.tokens_per_s, 1)} / {num(c.tokens_per_s_nonloop, 1)}")
    return t


def verdict_table(doc: Summary | dict) -> Table:
    """One row per speculative profile: verdict and its one-sentence evidence."""
    doc = Summary.of(doc)
    sim = " \\[simulated host]" if doc.simulated else ""  # escaped: rich reads [..] as markup
    engine = f" ({doc.engine.label})" if doc.engine and not doc.simulated else ""
    t = Table(title=f"Verdicts — {doc.playbook.name} on {doc.host.name}{engine}{sim}")
    t.add_column("profile")
    t.add_column("verdict")
    t.add_column("loops (this arm vs baseline)")
    t.add_column("evidence")
    for v in doc.verdicts:
        warnings = "".join(f"\n[yellow]⚠ {escape(w)}[/]" for w in v.warnings)
        t.add_row(v.profile, f"[{verdict_style(v.kind)}]{v.kind}[/]", escape(arm_counts(doc, v.profile)),
                  escape(v.evidence) + warnings)
    return t


#: Width of the console when the output is not a terminal (logs, CI, pipes, a file): wider than any table, so a
#: table keeps every cell on one line at its natural width instead of squeezing a column until a flag or a
#: path breaks mid-word (a file has no right margin; a reader's pager or editor scrolls).
PIPE_WIDTH = 100_000


class SafeConsole(Console):
    """A rich console that shows the control characters in the strings it prints as escapes
    (:func:`~mtp_remote.outside_text.for_terminal`): a model's output or a host's log line reaches the terminal
    as text, never as a command to it (a window title, a screen clear, a link). Its own styles are rich's."""

    def print(self, *objects, **kw) -> None:
        super().print(*(for_terminal(o) if isinstance(o, str) else o for o in objects), **kw)

    def log(self, *objects, **kw) -> None:
        super().log(*(for_terminal(o) if isinstance(o, str) else o for o in objects), **kw)


def make_console(stderr: bool = False) -> Console:
    """A rich console. Outside a terminal (logs, CI, pipes, files): tables at their natural width (each cell on
    one line, :data:`PIPE_WIDTH`), and lines are never wrapped (``soft_wrap``), so a flag, a path or a command
    to copy is never split across lines; no colour codes. Control characters in what it prints are shown as
    escapes (:class:`SafeConsole`)."""
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return SafeConsole(stderr=stderr, width=None if tty else PIPE_WIDTH, soft_wrap=not tty, log_path=False)


def print_run_end(console: Console, doc: Summary | dict, run_dir, exit_code: int, *, afterwards: bool = False,
                  inventory=None) -> None:
    """The closing lines of a run: where the report is (or, for a run that could not be done, its
    artefacts), the exit code, and the next step. ``afterwards``: shown again later (``report``), so the code
    is named as the run's, not this command's."""
    code = f"the run's exit code was {exit_code}" if afterwards else f"exit code {exit_code}"
    doc = Summary.of(doc)
    if doc.time_split:
        from .accounting import time_split_line

        stops = doc.loop_stop or LoopStopTotals()
        saved = (f", {stops.tokens_saved} not generated ({stops.loop_stops} samples stopped at "
                 f"their settled loop)" if stops.enabled else " (loop stop off)")
        probe = (f" (of them {doc.kl_probe_tokens} by the KL probe's own requests)" if doc.kl_probe_tokens else "")
        console.print(f"time: {time_split_line(doc.time_split)}; tokens: {doc.generated_tokens or 0} "
                      f"generated{probe}{saved}", highlight=False, markup=False)
    if doc.completed:
        console.print(f"report: {run_dir}/report.html (also report.md, summary.json); {code}", highlight=False)
    else:
        console.print(f"run {doc.status}: {run_dir}/summary.json (cause), junit.xml, metrics.prom; "
                      f"{code}", highlight=False)
    console.print(f"next: {next_step(doc, run_dir, inventory=inventory)}", highlight=False, markup=False)


#: Seconds between progress lines while sampling when the output is not a terminal.
HEARTBEAT_S = 20.0


class RichHooks:
    """Runner hooks that show progress on a rich console: one line per lifecycle event with the elapsed
    time, a progress bar per profile while sampling."""

    def __init__(self, console: Console, heartbeat_s: float = HEARTBEAT_S):
        self.console = console
        self.t0 = time.monotonic()
        self._progress: Progress | None = None
        self._task = None
        self.heartbeat_s = heartbeat_s
        self._sampling: dict | None = None  # {"profile", "done", "total", "loops", "t0"} while a profile samples
        self._beat: threading.Event | None = None
        self._lock = threading.Lock()

    def on_progress(self, msg: str) -> None:
        elapsed = f"[dim]{time.monotonic() - self.t0:6.1f} s[/] "
        if self.console.is_terminal:
            self.console.log(elapsed + escape(msg))
        else:  # one unwrapped line per event in logs and CI
            self.console.print(elapsed + escape(msg), soft_wrap=True, highlight=False)

    def on_profile(self, profile: str, total: int) -> None:
        self._close()
        with self._lock:
            self._sampling = {"profile": profile, "done": 0, "total": total, "loops": 0, "t0": time.monotonic()}
        if not self.console.is_terminal:  # CI, journald: a progress line every heartbeat_s, not minutes of silence
            self._beat = threading.Event()
            threading.Thread(target=self._heartbeat, args=(self._beat,), daemon=True).start()
            return
        self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=self.console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(f"{profile}: sampling", total=total)

    def on_sample(self, profile: str, done: int, total: int) -> None:
        with self._lock:
            if self._sampling is not None:
                self._sampling.update(done=done, total=total)
        if self._progress is not None:
            self._progress.update(self._task, completed=done)
        if done >= total and (self._progress is not None or self._beat is not None):
            self._close()
            self.on_progress(f"{profile}: {total} samples done")

    def on_loop(self, profile: str) -> None:
        with self._lock:
            if self._sampling is not None:
                self._sampling["loops"] += 1

    def progress_line(self) -> str:
        """``mtp: mtp 14/20 samples, 3 loops, 41 s`` (the profile sampling now, seconds since it began)."""
        with self._lock:
            s = dict(self._sampling or {})
        if not s:
            return "mtp: not sampling"
        return (f"mtp: {s['profile']} {s['done']}/{s['total']} samples, {s['loops']} loops, "
                f"{time.monotonic() - s['t0']:.0f} s")

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_s):
            self.console.print(self.progress_line(), soft_wrap=True, highlight=False, markup=False)

    def _close(self) -> None:
        if self._beat is not None:
            self._beat.set()
            self._beat = None
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


_CHECK_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def checks_table(host: str, checks) -> Table:
    """Preflight checks: name, status, detail."""
    t = Table(title=f"Preflight — {host}")
    t.add_column("check")
    t.add_column("status")
    t.add_column("detail", overflow="fold")
    for ch in checks:
        t.add_row(escape(ch.name), f"[{_CHECK_STYLE.get(ch.status, '')}]{escape(ch.status)}[/]", escape(ch.detail))
    return t


def status_table(st) -> Table:
    """Our server, the port, GPUs and foreign SGLang processes."""
    t = Table(title=f"Status — {st.host}")
    t.add_column("what")
    t.add_column("state", overflow="fold")
    job = bool(st.server and "job_id" in st.server)  # a SLURM job: its port is on its node, not here
    if st.server:
        s = st.server
        who = (f"job {s.get('spec') or s['job_id']}" + (f" on {s['node']}" if s.get("node") else "")) if job \
            else f"PID {s['pid']}"
        t.add_row("our server", escape(f"{st.server_state}: {who} profile {s['profile']} port {s['port']} "
                                       f"run {s['run_id']}\nlog {s['log_path']}"))
    else:
        t.add_row("our server", "none recorded")
    if not job:
        t.add_row("port", "in use" if st.port_in_use else "free")
    for g in st.gpus:
        t.add_row(f"GPU{g['index']}", f"{g['name']}: {g['memory_used_mib']}/{g['memory_total_mib']} MiB used")
    for u in st.gpu_unseen:
        t.add_row(f"[yellow]GPU{u['index']}[/]", f"{u['mib']} MiB held by processes this host cannot see")
    for f in st.foreign:
        t.add_row("[yellow]foreign[/]", escape(f.describe()))
    return t


def progress_printer(console: Console):
    """``on_progress`` for the small tasks: one line per event with the seconds since the task began."""
    return RichHooks(console).on_progress


def print_stop(console: Console, res: StopCommandResult) -> None:
    """Render :func:`mtp_remote.host.ops.stop`'s result: our server (unless already shown as progress), every
    foreign process with what was done to it, and the forced stop."""
    if res.ours.found in ("none", "not-ours", "gone"):
        console.print(escape(res.ours_text))  # a real stop was already reported as progress
    for f in res.foreign:
        if f.pid in res.forced:
            what = "signalled (--force)"
        elif f.pid in res.targets:
            what = "holds this host's GPU memory or port: left alone (--force stops it)"
        else:
            what = "not on this host's GPUs or port: left alone"
        console.print(escape(f"  foreign PID {f.pid} ({f.kind}, user {f.user}, {f.gpu_mib} MiB GPU): {what}"),
                      highlight=False)
    if res.forced:
        console.print(f"--force: signalled PIDs {res.forced}; GPU memory released after {res.gpu_release_s:.1f} s")


def print_smoke(console: Console, res: dict) -> None:
    """Render :func:`mtp_remote.host.ops.smoke`'s result: verdict line, then the end of the output."""
    m = res["metrics"]
    style = "red" if res["verdict"] == "loops" else "green"
    accept = "–" if res["accept_length"] is None else f"{res['accept_length']:.2f}"
    loop = f"; loop of {m['loop_unit_tokens']} tokens x {m['loop_repeats']}" if m["loop"] else ""
    console.print(f"[{style}]{res['verdict']}[/]: {res['completion_tokens']} tokens, finish {res['finish_reason']}, "
                  f"{res['latency_s']} s, accept length {accept}; seq-rep-4 {m['seq_rep_4']:.3f}{loop}")
    text = res.get("text", res["text_tail"])
    if len(text) > SMOKE_HEAD + SMOKE_TAIL + 40:
        skipped = len(text) - SMOKE_HEAD - SMOKE_TAIL
        text = f"{text[:SMOKE_HEAD]}\n[… {skipped} characters …]\n{text[-SMOKE_TAIL:]}"
    console.print(text, markup=False, highlight=False)


#: Characters of a smoke output shown from its start, and from its end, when it is long.
SMOKE_HEAD, SMOKE_TAIL = 1200, 400


def probes_table(rows: list[dict], source: str):
    """The ``watch`` probes of the history (newest first) as a rich Table: endpoint, probe, start, loops,
    acceptance over all / non-looping samples, greedy stability, latency, alerts."""
    from rich.table import Table  # deferred: keeps --version/--help fast

    t = Table(title=f"Watch probes — {source}")
    for col in ("endpoint", "probe", "started (UTC)", "loops", "accept len all / ok", "greedy", "s", "alerts"):
        t.add_column(col)
    for r in rows:
        acc = "–" if r["accept_length"] is None else (
            f"{r['accept_length']:.2f} / " + ("–" if r["accept_length_nonloop"] is None
                                              else f"{r['accept_length_nonloop']:.2f}"))
        greedy = "–" if r["greedy_changed"] is None else ("changed" if r["greedy_changed"] else "same")
        alerts = ", ".join(r["alerts"])
        t.add_row(escape(r["endpoint"]), str(r["probe"] + 1), r["started_at"][:19].replace("T", " "),
                  f"{r['loops']}/{r['n']}" + (f" ({r['errors']} failed)" if r["errors"] else ""), acc, greedy,
                  "–" if r["duration_s"] is None else f"{r['duration_s']:.1f}",
                  f"[red]{escape(alerts)}[/]" if alerts else "")
    return t
