"""Drive a plan on one host: for each profile, launch → wait ready → sample through the tunnel → stop.

Every sample is appended to ``runs/<run-id>/samples.jsonl`` the moment it arrives, so an interrupted run
keeps what it has and ``--resume RUN_ID`` requests only what is missing. Per-request failures are data
(``error`` field); a baseline that cannot launch makes the run fail (exit 2); a speculative profile that
cannot launch gets the verdict ``launch-failed:<cause>``. ``finally`` always stops the server we launched
and releases the host lock.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import re
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..client import Completion, ServerClient
from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..errors import LaunchError, RunsDirError, TransportLost
from ..interrupts import run_async
from ..remote import connect as transport
from ..remote import facts, process
from ..remote.commands import mask_argv, mask_log_secrets, mask_text, playbook_secrets
from ..remote.follow import LogStream
from ..remote.logs import classify_log
from .calibration import calibration_plan, calibration_profile
from .early_stop import cell_decision
from .plan import LaunchPlan, RequestSpec, order_for_reuse, plan_run, server_key
from .rideout import poll_riding_out, riding_out, send_riding_out
from .sampling import Cells, load_samples, sample_key
from .server import TAIL_LINES, Crashed, ServerLifecycle, TimedOut, WaitOutcome
from .workers import sample

log = logging.getLogger(__name__)


def new_run_id(now: datetime | None = None) -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` in UTC."""
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


@dataclass
class ProfileRun:
    """What happened to one profile: its launch outcome, stop, server facts and timing (seconds)."""

    profile: str
    speculative: bool
    argv_masked: list[str]
    outcome: dict | None = None
    launch_error: str | None = None
    cause: str | None = None
    hint: str | None = None
    stop: str | None = None
    gpu_release_s: float | None = None
    ready_s: float | None = None
    sampling_s: float | None = None
    stop_s: float | None = None  # the stop: signal, drain, exit and GPU memory seen free (gpu_release_s of it)
    wall_s: float | None = None  # the profile from its launch to the end of its stop and log copy
    server_info: dict = field(default_factory=dict)
    decode: list[dict] = field(default_factory=list)
    n_requests: int = 0
    n_resumed: int = 0
    stopping: dict = field(default_factory=dict)  # temperature -> early-stopping decision
    n_failed: int = 0  # requests of this profile that returned an error
    occupancy: dict = field(default_factory=dict)  # requests in flight vs the limit (Occupancy.to_dict)

    crashed: dict | None = None  # {"cause", "hint", "fatal_line"} when the server died while sampling
    tunnel_channels: int | None = None  # SSH channels the tunnel opened while sampling (None: local host)
    ssh_drops: int = 0  # times the SSH connection dropped (and was re-opened) during this profile
    n_resent: int = 0  # requests cut by a dropped connection and sent again
    reused_server: str | None = None  # the profile whose server this one used (same argv), not relaunched
    loop_stops: int = 0  # requests stopped once their loop was settled (finish_reason "loop-stop")
    idle_after_stops_s: float | None = None  # from the last response until the server had no request left

    @property
    def launched(self) -> bool:
        """Ready, and did not die while sampling."""
        return self.outcome is not None and self.outcome.get("kind") == "ready" and self.crashed is None

    def failure(self) -> tuple[str, str, bool] | None:
        """``(cause, hint, after_ready)`` when the profile failed -- never ready (``launch-failed:<cause>``),
        or ready and then crashed or hung while sampling (``after_ready``: ``crashed:<cause>``/``hung:<cause>``;
        every request failing is not a crash) -- None when it ran or was skipped. The one reading of a
        profile's failure that diagnose, mitigate and bisect hand to the verdict."""
        if self.launched or (self.outcome or {}).get("kind") == "skipped":
            return None
        after_ready = self.crashed is not None and self.crashed.get("cause") != "requests_failed"
        return self.cause or "unknown", self.hint or "", after_ready


@dataclass
class KeptServer:
    """A server left running after ``profile`` because the next launch has the same argv and environment: its
    record, its log stream (still following it), its ready outcome and :func:`~mtp_remote.experiment.plan.server_key`."""

    rec: object
    stream: LogStream | None
    outcome: WaitOutcome
    profile: str
    key: tuple
    adopted: bool = False  # left running by an earlier attempt of this run (a resume), already announced
    log_offset: int = 0  # characters of its log stream's text when it was kept: the next profile's part starts here


@dataclass
class Hooks:
    """Progress callbacks: ``on_progress(message)``, ``on_profile(profile, n_requests)``,
    ``on_sample(profile, done, total)``; ``interrupted()`` says whether the user asked to stop (an error that
    follows is then reported as the interrupt)."""

    on_progress: Callable[[str], None] = lambda msg: None
    on_profile: Callable[[str, int], None] = lambda profile, n: None
    on_sample: Callable[[str, int, int], None] = lambda profile, done, total: None
    on_loop: Callable[[str], None] = lambda profile: None  # a sample of this profile came back degenerate
    interrupted: Callable[[], bool] = lambda: False
    checkpoint: Callable[[], None] = lambda: None  # raises KeyboardInterrupt if the user asked to stop


#: Seconds the SIGTERM of a stop after an interrupt (Ctrl-C, SIGTERM to us) gets to drain before SIGKILL. Our
#: requests were cut by the interrupt, and SGLang's drain with requests in flight never ends (its scheduler died
#: with the SIGTERM): the whole ``timeouts.drain_s`` (30 s) was dead time between Ctrl-C and the resume line.
INTERRUPTED_DRAIN_S = 3.0

_ASGI_ERROR = "ERROR:    Exception in ASGI application"
_LOG_LINE_START = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)


def without_request_tracebacks(text: str) -> str:
    """Log text without the tracebacks of failed requests (``ERROR:    Exception in ASGI application`` up to
    the next timestamped line). SGLang answers such a request 500 and keeps serving, so what the traceback
    ends with (``TypeError: SamplingParams.__init__() got an unexpected keyword argument 'seed'``) is that
    request's error — recorded with the sample — not the server's."""
    out, pos = [], 0
    while (start := text.find(_ASGI_ERROR, pos)) >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        out.append(text[pos:line_start])
        nxt = _LOG_LINE_START.search(text, start + len(_ASGI_ERROR))
        if nxt is None:  # the traceback is still being written: judge it when it is complete
            return "".join(out)
        pos = nxt.start()
    out.append(text[pos:])
    return "".join(out)


def _failure(alive: bool, cls) -> dict | None:
    """{"cause", "hint", "fatal_line"} when the server died or logged a fatal line, else None."""
    if cls.is_fatal:
        return {"cause": cls.cls, "hint": cls.hint, "fatal_line": cls.fatal_line}
    if not alive:
        return {"cause": "process_exited", "fatal_line": None,
                "hint": "the server process exited while requests were running"}
    return None


class Runner:
    """Runs a playbook on one host and writes ``run_dir`` (samples.jsonl, logs/, run.json).

    ``python`` is the remote python; ``workdir`` the remote work directory. Call :meth:`run`; it returns the
    list of :class:`ProfileRun`. Raises MtpRemoteError when the run cannot be done (SSH, lock, baseline
    launch)."""

    def __init__(self, host: HostConfig, playbook: Playbook, run_dir: Path, *, run_id: str, python: str,
                 profiles: list[str] | None = None, hooks: Hooks | None = None, c=None, design: dict | None = None):
        self.host = host
        self.design = design  # the design the run's first launch recorded (diagnosis.record_design)
        self.playbook = playbook
        self.run_dir = run_dir
        self.run_id = run_id
        self.python = python
        self.profiles = profiles
        self.hooks = hooks or Hooks()
        self.c = c
        self.samples_path = run_dir / "samples.jsonl"
        self.profile_runs: list[ProfileRun] = []
        self._secrets = playbook_secrets(playbook, host)
        self._tunnel: transport.Tunnel | None = None  # the tunnel of the profile being sampled
        self._profile_run: ProfileRun | None = None
        self.left_on_host: list[str] = []  # what could not be stopped/released because the host was unreachable
        self._concurrency: dict[str, int] = {}  # profile -> requests in flight, when not the playbook's
        self._kept: KeptServer | None = None  # the server left running for the next launch of the same argv

    # -- run ------------------------------------------------------------------------------------------------

    def run(self) -> list[ProfileRun]:
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        own_c = self.c is None
        c = self.c or transport.connect(self.host)
        lc = ServerLifecycle(c, self.host, python=self.python, workdir=self.host.workdir, run_id=self.run_id,
                             on_progress=self.hooks.on_progress)
        try:
            lc.prepare(lock_owner=f"{getpass.getuser()}@{socket.gethostname()}")  # and the lock: one round trip
            try:
                launches = []
                for lp in plan_run(self.host, self.playbook, lc.workdir, self.profiles):
                    launches.append(lp)
                    if lp.profile == self.playbook.baseline and self.playbook.compare.calibration:
                        launches.append(self._calibration_plan(lp))
                launches = order_for_reuse(launches)  # each distinct server launched once
                if not self._adopt_leftover(lc, launches):
                    self._stop_leftover(lc)
                aa = calibration_profile(self.playbook)
                for lp, nxt in zip(launches, [*launches[1:], None]):
                    # the A/A arm is a relaunch by design: it measures launch-to-launch noise
                    self._run_profile(c, lc, lp, keep=nxt is not None and nxt.profile != aa
                                      and server_key(nxt) == server_key(lp))
            finally:
                if self._kept is not None and self._kept.stream is not None:
                    self._kept.stream.__exit__(None, None, None)
                self._kept = None
                self._release(lc)
        finally:
            if own_c:
                transport.close(c)
        return self.profile_runs

    def _calibration_plan(self, lp: LaunchPlan) -> LaunchPlan:
        """The A/A arm (:func:`~mtp_remote.experiment.calibration.calibration_plan`), sampled like the baseline
        unless ``compare.calibration_concurrency`` says otherwise."""
        plan, concurrency = calibration_plan(self.playbook, lp)
        if concurrency is not None:
            self._concurrency[plan.profile] = concurrency
        return plan

    def _adopt_leftover(self, lc: ServerLifecycle, launches: list[LaunchPlan]) -> bool:
        """On a resume: the server this run left running (its connection dropped) is used, not stopped and
        relaunched, when it runs exactly the argv of the first launch that still has samples to take — same run id,
        same port, the same masked command line (the playbook's fingerprint was checked for the resume), and still
        the process we started (PID, start time, command line) and ready. Two round trips, on resumes only."""
        if not self.samples_path.exists():
            return False  # a new run: nothing of its own can be running
        rec = riding_out(lc, lambda: process.read_record(lc.c, lc.workdir), None)
        if rec is None or rec.run_id != self.run_id or rec.port != self.host.port:
            return False
        done = {sample_key(s) for s in load_samples(self.samples_path) if s.get("error") is None}
        lp = next((x for x in launches if any(r.key not in done for r in x.requests)), None)
        if lp is None or rec.argv_masked != mask_argv(lp.argv):
            return False
        info = riding_out(lc, lambda: facts.get_process_info(lc.c, rec.pid), None)
        if info is None or not info.alive or not process.is_ours(info, rec):
            return False
        stream = lc.follow(rec)
        outcome = lc.wait_ready(rec, timeout_s=min(self.playbook.timeouts.ready_s, 60.0), stream=stream)
        if not outcome.ok:
            stream.__exit__(None, None, None)
            return False
        self._kept = KeptServer(rec=rec, stream=stream, outcome=outcome, profile=f"{rec.profile} (left running)",
                                key=server_key(lp), adopted=True)
        self.hooks.on_progress(f"{lp.profile}: the server this run left running (PID {rec.pid}) has its argv: "
                               f"used, not relaunched")
        return True

    def _stop_leftover(self, lc: ServerLifecycle) -> None:
        res = lc.stop(term_s=self.playbook.timeouts.term_s, drain_s=self.playbook.timeouts.drain_s,
                      gpu_release_s=self.playbook.timeouts.gpu_release_s)
        if res.found in ("running", "group-only", "gone") and res.log_path:
            text = lc.read_log(res.log_path)
            if text:
                dest = self.run_dir / "logs" / f"previous-{res.pid}.log"
                dest.write_text(mask_log_secrets(mask_text(text, self._secrets)))
                self.hooks.on_progress(f"stopped a server left by an earlier run (PID {res.pid}); "
                                       f"its log {res.log_path} is kept and copied to {dest}")

    @staticmethod
    def _keep(path: Path, text: str) -> RunsDirError | None:
        """Write a copy into the run directory; the error (not raised: a copy never hides the run's own error)
        when the file system will not take it."""
        try:
            path.write_text(text)
        except OSError as e:
            log.warning("could not write %s: %s", path, e.strerror)
            return RunsDirError.of(e, path)
        return None

    # -- a host that may drop: read, stop, release without losing the cause ---------------------------------

    def _stop(self, lc: ServerLifecycle, *, unlock: bool = False):
        """``lc.stop`` riding out a drop (it reads the record again); None when the host cannot be reached. After
        an interrupt the drain gets at most :data:`INTERRUPTED_DRAIN_S`."""
        timeouts = self.playbook.timeouts
        drain_s, drain_name = timeouts.drain_s, "timeouts.drain_s"
        if self.hooks.interrupted() and INTERRUPTED_DRAIN_S < timeouts.drain_s:
            drain_s, drain_name = INTERRUPTED_DRAIN_S, "the drain bound after an interrupt, our requests cut"
        return riding_out(lc, lambda: lc.stop(term_s=timeouts.term_s, drain_s=drain_s, drain_name=drain_name,
                                                     gpu_release_s=timeouts.gpu_release_s, unlock=unlock),
                                None)

    def _read_log(self, lc: ServerLifecycle, path: str) -> str:
        """The server's log, or '' when the host cannot be reached."""
        return riding_out(lc, lambda: lc.read_log(path), "")

    def _release(self, lc: ServerLifecycle) -> None:
        """At the end of the run: stop what is left and release the host lock; when the host cannot be reached,
        note what stays there (``left_on_host``) instead of raising over the run's own error."""
        res = self._stop(lc, unlock=True)  # the stop and the lock's release in one round trip
        try:
            if res is not None:
                if not res.unlocked:
                    lc.release_lock()
                return
        except TransportLost:
            pass
        self.left_on_host.append(f"the host lock {lc.workdir}/lock")

    async def _send(self, request) -> Completion:
        """``request()`` through the profile's tunnel, riding out a dropped connection
        (:func:`~mtp_remote.experiment.rideout.send_riding_out`)."""
        return await send_riding_out(self._tunnel, request, self._profile_run)

    def _run_profile(self, c, lc: ServerLifecycle, lp: LaunchPlan, keep: bool = False) -> None:
        """Launch (or reuse), sample and stop one profile; ``keep``: the next launch is the same server, so it is
        left running for it (:class:`KeptServer`) instead of stopped."""
        t_start = time.monotonic()
        try:
            self._run_profile_timed(c, lc, lp, keep)
        finally:
            if self.profile_runs and self.profile_runs[-1].profile == lp.profile:
                self.profile_runs[-1].wall_s = round(time.monotonic() - t_start, 3)

    def _run_profile_timed(self, c, lc: ServerLifecycle, lp: LaunchPlan, keep: bool) -> None:
        self.hooks.checkpoint()
        pr = ProfileRun(profile=lp.profile, speculative=lp.speculative, argv_masked=mask_argv(lp.argv))
        self.profile_runs.append(pr)
        self._profile_run = pr
        done = {sample_key(s) for s in load_samples(self.samples_path) if s.get("error") is None}
        todo = [r for r in lp.requests if r.key not in done]
        pr.n_requests, pr.n_resumed = len(lp.requests), len(lp.requests) - len(todo)
        kept = self._kept if self._kept is not None and self._kept.key == server_key(lp) else None
        if not todo:
            self.hooks.on_progress(f"{lp.profile}: all {len(lp.requests)} samples already stored; not launched")
            pr.outcome = {"kind": "skipped", "profile": lp.profile}
            if kept is not None and not keep:  # nothing left for the server kept for it
                self._stop_kept(lc)
            return
        is_baseline = lp.profile == self.playbook.baseline
        t0 = time.monotonic()
        if kept is not None:
            self._kept = None
            pr.reused_server = kept.profile
            if not kept.adopted:
                self.hooks.on_progress(f"{lp.profile}: the server of {kept.profile} runs with the same argv and "
                                       f"environment: reused, not relaunched")
            rec = kept.rec
        else:
            self._stop_kept(lc)
            self.hooks.on_progress(f"{lp.profile}: launching ({'speculative' if lp.speculative else 'baseline'})")
            try:
                rec = lc.launch(lp.profile, lp.argv, lp.env)
            except LaunchError as e:
                pr.launch_error, pr.cause, pr.hint = e.message, e.cause or "launch_refused", e.message
                if is_baseline:
                    raise
                return
        lost: TransportLost | None = None
        drops0 = getattr(c, "drops", 0)
        stream: LogStream | None = None
        outcome = None
        completed = False  # the profile ran to its end (no exception on the way): its server may be kept
        try:
            # one exec session per server life: readiness, the crash watch and the log text
            stream = kept.stream if kept is not None else lc.follow(rec)
            with transport.open_tunnel(c, self.host) as self._tunnel:  # opened while the server starts
                outcome = kept.outcome if kept is not None else lc.wait_ready(
                    rec, timeout_s=self.playbook.timeouts.ready_s, stream=stream)
                self.hooks.checkpoint()
                if outcome.ok:
                    url = self._tunnel.url
                    outcome = self._confirm_health(lc, rec, url, outcome, t0, stream)
                    pr.ready_s = time.monotonic() - t0
                    if outcome.ok:
                        self.hooks.on_progress(f"{lp.profile}: ready in {pr.ready_s:.1f} s")
                        ts = time.monotonic()
                        channels0 = self._tunnel.channels_opened
                        try:
                            run_async(self._sample_watched(lc, rec, url, lp, todo, pr, stream))
                        finally:
                            pr.sampling_s = time.monotonic() - ts
                            if self._tunnel.forwarder is not None:
                                pr.tunnel_channels = self._tunnel.channels_opened - channels0
                        self._check_errors(lp, pr)
            pr.outcome = outcome.to_dict()
            if pr.crashed is not None:
                pr.cause, pr.hint = pr.crashed["cause"], pr.crashed["hint"]
                self.hooks.on_progress(f"{lp.profile}: server failed during sampling: {pr.cause} — {pr.hint}")
            if not outcome.ok:
                pr.cause, pr.hint = outcome.cause, outcome.hint
                self.hooks.on_progress(outcome.describe())
            completed = True
        except TransportLost as e:
            lost = e
            pr.cause, pr.hint = "transport_lost", e.message
        finally:
            self._tunnel = None
            if keep and completed and pr.launched and not self.hooks.interrupted():
                log_error = self._keep_running(lc, lp, pr, rec, stream, outcome, getattr(c, "drops", 0) - drops0,
                                               since=kept.log_offset if kept else 0)
            else:
                t_stop = time.monotonic()
                try:
                    res = self._stop(lc)
                finally:  # the log copy is kept even when the stop fails (StopError)
                    pr.stop_s = round(time.monotonic() - t_stop, 3)
                    pr.ssh_drops = getattr(c, "drops", 0) - drops0
                    text = self._log_text(lc, rec, stream, dropped=pr.ssh_drops > 0)
                    # a reused server's log holds the profile before too: its decode lines are that one's
                    pr.decode = [d.to_dict() for d in classify_log(text[kept.log_offset if kept else 0:]).decode]
                    log_error = self._keep(self.run_dir / "logs" / f"{lp.profile}.log",
                                           mask_log_secrets(mask_text(text, self._secrets)))
                if res is None:
                    pr.stop = (f"not stopped: the SSH connection is lost; the server of profile {lp.profile!r} "
                               f"(PID {rec.pid}, port {self.host.port}) may still be running")
                    self.left_on_host.append(f"server PID {rec.pid} (profile {lp.profile}, port {self.host.port})")
                else:
                    pr.stop, pr.gpu_release_s = res.describe(), res.gpu_release_s
        if log_error is not None:  # the server is stopped; a run dir that takes no log takes no sample either
            raise log_error
        if self._kept is not None and self._kept.profile == lp.profile:
            return  # left running for the next profile: no stop to report on
        if pr.ssh_drops:
            self.hooks.on_progress(f"{lp.profile}: the SSH connection dropped {pr.ssh_drops} time(s); "
                                   f"{'re-opened, ' if lost is None else ''}{pr.n_resent} cut request(s) sent again")
        if lost is None and res is None:  # sampling ended, but the connection dropped while stopping
            lost = getattr(c, "lost", None) or TransportLost("the SSH connection was lost while stopping the server",
                                                            host=self.host.name)
        if lost is not None:  # a lost connection ends the run (exit 2): never a verdict on a cut profile
            what = lost.message.removeprefix(f"[{self.host.name}] ")
            raise TransportLost(f"profile {lp.profile!r} ended as transport_lost: {what}", host=self.host.name,
                                cause=lost.cause)
        if is_baseline and not pr.launched:
            raise LaunchError(f"baseline profile {lp.profile!r} failed ({pr.cause}): {pr.hint}; without a baseline "
                              f"there is nothing to compare against", cause=pr.cause,
                              evidence="\n".join((pr.outcome or {}).get("log_tail", [])))

    def _keep_running(self, lc: ServerLifecycle, lp: LaunchPlan, pr: ProfileRun, rec, stream: LogStream | None,
                      outcome: WaitOutcome, drops: int, since: int = 0) -> RunsDirError | None:
        """Leave ``lp``'s server running for the next profile (same argv): its log so far is copied now (its
        decode lines from ``since``, where the log of the profile before on this server ended); the copy's error
        as :meth:`_keep` gives it."""
        self._kept = KeptServer(rec=rec, stream=stream, outcome=outcome, profile=lp.profile, key=server_key(lp),
                                log_offset=len(stream.text) if stream is not None else 0)
        pr.ssh_drops = drops
        text = stream.text if stream is not None else self._read_log(lc, rec.log_path)
        pr.decode = [d.to_dict() for d in classify_log(text[since:]).decode]
        pr.stop = "kept running: the next profile has the same argv and environment"
        return self._keep(self.run_dir / "logs" / f"{lp.profile}.log", mask_log_secrets(mask_text(text, self._secrets)))

    def _stop_kept(self, lc: ServerLifecycle) -> None:
        """Stop a server kept for a launch that did not come (its log stream closed first)."""
        kept, self._kept = self._kept, None
        if kept is None:
            return
        if kept.stream is not None:
            kept.stream.__exit__(None, None, None)
        self._stop(lc)

    def _check_errors(self, lp: LaunchPlan, pr: ProfileRun) -> None:
        """Failed requests are data, but a profile whose every request failed did not run at all."""
        mine = [x for x in load_samples(self.samples_path) if x["profile"] == lp.profile]
        failed = [x for x in mine if x.get("error")]
        pr.n_failed = len(failed)
        if failed:
            self.hooks.on_progress(f"{lp.profile}: {len(failed)} of {len(mine)} requests failed "
                                   f"(first: {failed[0]['error'][:160]})")
        if mine and len(failed) == len(mine) and pr.crashed is None:
            pr.crashed = {"cause": "requests_failed", "fatal_line": None,
                          "hint": f"all {len(mine)} requests failed, e.g. {failed[0]['error'][:200]}"}

    def _confirm_health(self, lc: ServerLifecycle, rec, url: str, outcome: WaitOutcome, t0: float,
                        stream: LogStream | None = None) -> WaitOutcome:
        """After the ready line: /health must answer 200 (it is 503 until warmup ends). A server that dies
        meanwhile is Crashed at once (its log stream ends; one poll confirms it is gone), classified from its
        log — not a wait on /health until ``timeouts.ready_s``."""
        deadline = t0 + self.playbook.timeouts.ready_s
        watched = [stream] if stream is not None else []

        async def poll() -> bool | None:  # True: 200; False: the deadline; None: the log stream ended
            async with ServerClient(url, timeout_s=10) as sc:  # /health needs no API key
                while time.monotonic() < deadline:
                    if await sc.health() == 200:
                        return True
                    if watched and watched[0].ended:
                        return None
                    await asyncio.sleep(0.1)
            return False

        while True:
            answer = run_async(poll())
            if answer:
                return outcome
            if answer is None and stream is not None:
                watched.clear()  # a stream that ended while the server lives (dropped connection): /health alone
                text = stream.text + stream.drain()
                alive, more, _ = poll_riding_out(lc, rec, stream.offset + stream.nbytes)
                if alive:
                    continue
                text += more
                cls = classify_log(text)
                return Crashed(profile=rec.profile, elapsed_s=time.monotonic() - t0, milestones=outcome.milestones,
                               log_tail=text.splitlines()[-TAIL_LINES:],
                               cause=cls.cls if cls.is_fatal else "process_exited", fatal_line=cls.fatal_line,
                               hint=cls.hint if cls.is_fatal else "the server exited after its ready line, before "
                                                                  "/health answered 200; read the log tail")
            return TimedOut(profile=rec.profile, elapsed_s=time.monotonic() - t0, milestones=outcome.milestones,
                            log_tail=outcome.log_tail, cause="health_check_failed",
                            hint="the ready line was printed but /health never answered 200")

    def _log_text(self, lc: ServerLifecycle, rec, stream: LogStream | None, *, dropped: bool) -> str:
        """The server's whole log after its stop: the log stream's text when the stream saw all of it (it ended by
        itself once the server was gone, no connection drop, nothing cut off), else read from the host in one
        round trip (the stream's text when the host cannot be reached either)."""
        if stream is not None:
            ended = stream.wait_end(3.0)
            if ended and stream.complete and not dropped:
                return stream.text
            if not ended:
                stream.__exit__(None, None, None)  # stop its tail, off this path
        text = self._read_log(lc, rec.log_path)
        return text or (stream.text if stream is not None else "")

    async def _sample_watched(self, lc: ServerLifecycle, rec, url: str, lp: LaunchPlan, todo: list[RequestSpec],
                              pr: ProfileRun, stream: LogStream | None = None) -> None:
        """Sample while watching the server: if its process dies or its log shows a fatal line, pending
        requests are cancelled (samples already stored are kept) and ``pr.crashed`` says why."""
        sampling = asyncio.ensure_future(self._sample(url, lp, todo, pr))
        watching = asyncio.ensure_future(self._watch(lc, rec, stream))
        done, _ = await asyncio.wait({sampling, watching}, return_when=asyncio.FIRST_COMPLETED)
        if sampling in done:
            watching.cancel()
            sampling.result()
            # requests can all return (failed) before the watcher's next look: look once more
            failed = any(x.get("error") for x in load_samples(self.samples_path) if x["profile"] == lp.profile)
            pr.crashed = await asyncio.to_thread(self._server_failure, lc, rec, stream, failed)
            return
        pr.crashed = watching.result()
        sampling.cancel()
        try:
            await sampling
        except asyncio.CancelledError:
            pass

    def _server_failure(self, lc: ServerLifecycle, rec, stream: LogStream | None = None,
                        failed: bool = True) -> dict | None:
        """None if the server is alive and its log shows no fatal line; else cause, hint, fatal line. From the
        log stream when it is live and no request failed; otherwise one poll (a server that just died may not
        have ended the stream yet: its watcher looks every 0.1 s)."""
        if stream is not None and not failed and not stream.ended and stream.complete:
            stream.read(0)
            return _failure(True, classify_log(without_request_tracebacks(
                stream.text[: stream.text.rfind("\n") + 1])))
        alive, text, _ = poll_riding_out(lc, rec, 0)
        return _failure(alive, classify_log(without_request_tracebacks(text)))

    async def _watch(self, lc: ServerLifecycle, rec, stream: LogStream | None = None,
                     interval_s: float = 1.0) -> dict:
        """Watch the server's process and log until it dies, logs a fatal line, or writes nothing for
        ``timeouts.stall_s`` seconds while requests are in flight (a hung scheduler: SGLang logs a ``Decode
        batch`` line every few dozen steps while it decodes). From the log stream (looked at every 0.25 s, no
        round trip); when there is none, or it ends while the server lives (a dropped connection), by polling
        the process and the log from a byte offset every ``interval_s`` seconds (one round trip each)."""
        polled = stream is None or stream.ended
        if polled:
            alive, _, offset = await asyncio.to_thread(poll_riding_out, lc, rec, 0)
        else:
            stream.read(0)
            offset = stream.offset + stream.nbytes
        text = ""  # what the server wrote since sampling began
        last_growth = time.monotonic()
        stall_s = self.playbook.timeouts.stall_s
        while True:
            await asyncio.sleep(interval_s if polled else min(interval_s, 0.25))
            if polled:
                alive, new, n = await asyncio.to_thread(poll_riding_out, lc, rec, offset)
                offset += n
            else:
                alive, new = True, stream.read(0)
                if stream.ended:  # the server is gone, or the connection dropped under the stream: one poll says
                    new += stream.drain()
                    offset = stream.offset + stream.nbytes
                    alive, more, n = await asyncio.to_thread(poll_riding_out, lc, rec, offset)
                    offset += n
                    new += more
                    polled = True
            if new:
                text = text[-(256 << 10):] + new  # fatal lines come last: a bounded window is enough
                last_growth = time.monotonic()
            if not alive or "\n" in new:  # judged again only on new complete lines (a look costs ~10 ms)
                window = without_request_tracebacks(text if not alive else text[: text.rfind("\n") + 1])
                failure = _failure(alive, classify_log(window, serving=True))  # sampling runs after ready
                if failure is not None:  # (complete lines only while it lives)
                    return failure
            if time.monotonic() - last_growth > stall_s:
                if not await asyncio.to_thread(transport.responsive, lc.c):  # the connection is dead, not the server:
                    offset = offset if polled else stream.offset + stream.nbytes  # poll: it reconnects, or raises
                    polled, last_growth = True, time.monotonic()  # TransportLost (transport_lost, never `stalled`)
                    continue
                return {"cause": "stalled", "fatal_line": None,
                        "hint": f"the server wrote nothing for {stall_s:.0f} s while requests were in flight: its "
                                f"scheduler looks hung (SGLang's --watchdog-timeout would end it); raise "
                                f"timeouts.stall_s if generations are legitimately that slow"}

    async def _sample(self, url: str, lp: LaunchPlan, todo: list[RequestSpec], pr: ProfileRun) -> None:
        """``todo`` through the sampling workers (:func:`~mtp_remote.experiment.workers.sample`), at the
        profile's concurrency; with ``early_stop`` a cell stops being fed once it is settled."""
        pb = self.playbook
        await sample(url, lp, todo, pr, playbook=pb, host=self.host, hooks=self.hooks, samples_path=self.samples_path,
                     limit=self._concurrency.get(lp.profile) or pb.concurrency or pb.max_running_requests(),
                     cells=self._cells(lp, todo) if pb.early_stop else None, send_riding_out=self._send)

    def _cells(self, lp: LaunchPlan, todo: list[RequestSpec]) -> Cells:
        """The early-stopping bookkeeping of ``lp``'s cells, deciding with :func:`~mtp_remote.experiment.early_stop.cell_decision`."""
        return Cells(lp, todo, samples_path=self.samples_path, baseline=self.playbook.baseline,
                     decide=lambda t, records: cell_decision(self.playbook, self.profiles, lp, t, records,
                                                             recorded=self.design))

