"""Drive a plan on one host: for each profile, launch → wait ready → sample through the tunnel → stop.

The servers are reached only through the seam for where a server runs (:class:`~mtp_remote.serving.base.ServerKind`,
the kind the host's ``server`` names): the runner builds no shell command and knows no PID.

Every sample is appended to ``runs/<run-id>/samples.jsonl`` the moment it arrives, so an interrupted run
keeps what it has and ``--resume RUN_ID`` requests only what is missing. Per-request failures are data
(``error`` field); a baseline that cannot launch makes the run fail (exit 2); a speculative profile that
cannot launch gets the verdict ``launch-failed:<cause>``. ``finally`` always stops the server we launched
and releases the host lock.
"""

from __future__ import annotations

import getpass
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..responses import Completion
from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..errors import ConfigError, LaunchError, RunsDirError, TransportLost
from ..interrupts import run_async
from ..remote import connect as transport
from ..remote.commands import mask_argv, mask_log_secrets, mask_text, playbook_secrets
from ..remote.envfacts import server_environment
from ..remote.logs import classify_log, greedy_verification_fallback
from ..serving.base import LogFollower, ServerKind, WaitOutcome
from ..serving.kinds import open_server
from .calibration import calibration_profile, with_calibration
from .early_stop import cell_decision
from .reuse import KeptServer, adopt_leftover, stop_leftover
from .plan import LaunchPlan, RequestSpec, order_for_reuse, plan_run, server_key
from .rideout import riding_out, send_riding_out
from .sampling import Cells, load_samples
from .progress import ServingProgress
from .watch import confirm_health, log_text, sample_watched
from .workers import sample

log = logging.getLogger(__name__)


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
    attached: dict | None = None  # an attached endpoint: where, speculative, model, flags read back, their lint
    context: dict = field(default_factory=dict)  # long prompts' tokens vs the context length (experiment.fit)
    #: SGLang's log line saying it verified drafts greedily at T > 0 (remote.logs.greedy_verification_fallback):
    #: this profile's T > 0 cells are then not compared (analysis.diagnosis)
    greedy_fallback: str | None = None

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


@dataclass
class _Serving:
    """One profile's use of a server, for the steps of :meth:`Runner._run_profile_timed`: its record, the server
    kept for it (or None), its log follower, its outcome, the connection loss that ended it, whether it ran to
    its end, and the SSH connection's drop count when it began."""

    rec: object
    kept: KeptServer | None
    drops0: int
    stream: LogFollower | None = None
    outcome: WaitOutcome | None = None
    lost: TransportLost | None = None
    completed: bool = False
    stop_lost: bool = False  # the stop could not reach the host (the connection dropped while stopping)

    @property
    def log_offset(self) -> int:
        """Where this profile's part of a reused server's log starts (the profile before ends there)."""
        return self.kept.log_offset if self.kept is not None else 0


class Runner:
    """Runs a playbook on one host and writes ``run_dir`` (samples.jsonl, logs/, run.json).

    ``python`` is the remote python. The host's servers are reached through the seam
    (:func:`~mtp_remote.serving.kinds.open_server`: the kind the host's ``server`` names; ``kind`` overrides it,
    e.g. a test double). Call :meth:`run`; it returns the list of :class:`ProfileRun`. Raises MtpRemoteError
    when the run cannot be done (SSH, lock, baseline launch). ``said_stored``: profiles whose "all samples
    already stored; not launched" line was said already (a set shared by the runners of one search, so a
    baseline every candidate's runner visits is announced once); the runner adds to it."""

    def __init__(self, host: HostConfig, playbook: Playbook, run_dir: Path, *, run_id: str, python: str,
                 profiles: list[str] | None = None, hooks: Hooks | None = None, c=None, design: dict | None = None,
                 kind: ServerKind | None = None, said_stored: set[str] | None = None):
        self.host, self.playbook, self.run_dir, self.run_id, self.python = host, playbook, run_dir, run_id, python
        self.said_stored = said_stored if said_stored is not None else set()
        self.design = design  # the design the run's first launch recorded (diagnosis.record_design)
        self.profiles, self.hooks, self.c, self.kind = profiles, hooks or Hooks(), c, kind
        self.samples_path = run_dir / "samples.jsonl"
        self.profile_runs: list[ProfileRun] = []
        self._secrets = playbook_secrets(playbook, host)
        self._tunnel: transport.Tunnel | None = None  # the tunnel of the profile being sampled
        self._profile_run: ProfileRun | None = None
        self.left_on_host: list[str] = []  # what could not be stopped/released because the host was unreachable
        self._concurrency: dict[str, int] = {}  # profile -> requests in flight, when not the playbook's
        self._kept: KeptServer | None = None  # the server left running for the next launch of the same argv
        self.environment: dict | None = None  # the host's SGLang, torch, GPUs, driver, architectures (envfacts)

    # -- run ------------------------------------------------------------------------------------------------

    def run(self) -> list[ProfileRun]:
        if self.kind is None and self.playbook.attached:  # only the attach kind knows them: never launch one
            raise ConfigError(f"profiles {sorted(self.playbook.attached)} are attached endpoints: this command "
                              f"launches servers (diagnose takes attached profiles; mitigate and bisect do not)",
                              field="profiles")
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        own_c = self.c is None and self.kind is None
        c = self.kind.c if self.kind is not None else (self.c or transport.connect(self.host))
        server = self.kind or open_server(c, self.host, python=self.python, run_id=self.run_id,
                                          on_progress=self.hooks.on_progress,
                                          images={n: p.image for n, p in self.playbook.profiles.items() if p.image})
        try:
            lock_owner = f"{getpass.getuser()}@{socket.gethostname()}" if server.capabilities.lock else None
            server.prepare(lock_owner=lock_owner)  # and the lock: one round trip
            if self.environment is None and not set(self.playbook.attached) >= set(self.playbook.profiles):
                self.environment = server_environment(server, self.host, self.python)  # facts: never the run's error
            try:
                launches = self._launches(server)
                self._kept = adopt_leftover(server, launches, self.samples_path,
                                            ready_s=self.playbook.timeouts.ready_s, on_progress=self.hooks.on_progress)
                if self._kept is None:
                    stop_leftover(server, self.playbook.timeouts, self.run_dir / "logs", self._secrets,
                                  on_progress=self.hooks.on_progress)
                aa = calibration_profile(self.playbook)
                for lp, nxt in zip(launches, [*launches[1:], None]):
                    # the A/A arm is a relaunch by design: it measures launch-to-launch noise
                    self._run_profile(server, lp, keep=nxt is not None and nxt.profile != aa
                                      and server_key(nxt) == server_key(lp))
            finally:
                if self._kept is not None and self._kept.stream is not None:
                    self._kept.stream.__exit__(None, None, None)
                self._kept = None
                self._release(server)
        finally:
            if own_c:
                transport.close(c)
        return self.profile_runs

    def _launches(self, server: ServerKind) -> list[LaunchPlan]:
        """The run's launches in order: the plan's, the A/A arm after the baseline (when the playbook asks for it
        and the kind can relaunch), each distinct server once (:func:`~mtp_remote.experiment.plan.order_for_reuse`)."""
        launches, concurrency = with_calibration(self.playbook, plan_run(self.host, self.playbook, server.workdir,
                                                                         self.profiles),
                                                 relaunch=server.capabilities.relaunch)
        self._concurrency.update(concurrency)
        return order_for_reuse(launches)

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

    def _stop(self, server: ServerKind, *, unlock: bool = False):
        """``server.stop`` riding out a drop (it reads the record again); None when the host cannot be reached.
        After an interrupt the drain gets at most :data:`INTERRUPTED_DRAIN_S`."""
        timeouts = self.playbook.timeouts
        drain_s, drain_name = timeouts.drain_s, "timeouts.drain_s"
        if self.hooks.interrupted() and INTERRUPTED_DRAIN_S < timeouts.drain_s:
            drain_s, drain_name = INTERRUPTED_DRAIN_S, "the drain bound after an interrupt, our requests cut"
        return riding_out(server, lambda: server.stop(term_s=timeouts.term_s, drain_s=drain_s, drain_name=drain_name,
                                                      gpu_release_s=timeouts.gpu_release_s, unlock=unlock),
                          None)

    def _release(self, server: ServerKind) -> None:
        """At the end of the run: stop what is left and release the host lock; when the host cannot be reached,
        note what stays there (``left_on_host``) instead of raising over the run's own error."""
        res = self._stop(server, unlock=True)  # the stop and the lock's release in one round trip
        try:
            if res is not None:
                if not res.unlocked:
                    server.release_lock()
                return
        except TransportLost:
            pass
        if server.capabilities.lock:
            self.left_on_host.append(f"the host lock {server.workdir}/lock")

    async def _send(self, request) -> Completion:
        """``request()`` through the profile's tunnel, riding out a dropped connection
        (:func:`~mtp_remote.experiment.rideout.send_riding_out`)."""
        return await send_riding_out(self._tunnel, request, self._profile_run)

    # -- one profile: launch (or reuse) → ready → sample → stop (or keep) -------------------------------------

    def _run_profile(self, server: ServerKind, lp: LaunchPlan, keep: bool = False) -> None:
        """Launch (or reuse), sample and stop one profile; ``keep``: the next launch is the same server, so it is
        left running for it (:class:`KeptServer`) instead of stopped."""
        t_start = time.monotonic()
        try:
            self._run_profile_timed(server, lp, keep)
        finally:
            if self.profile_runs and self.profile_runs[-1].profile == lp.profile:
                self.profile_runs[-1].wall_s = round(time.monotonic() - t_start, 3)

    def _run_profile_timed(self, server: ServerKind, lp: LaunchPlan, keep: bool) -> None:
        self.hooks.checkpoint()
        pr = ProfileRun(profile=lp.profile, speculative=lp.speculative, argv_masked=mask_argv(lp.argv))
        self.profile_runs.append(pr)
        self._profile_run = pr
        done = {s.key for s in load_samples(self.samples_path) if s.error is None}
        todo = [r for r in lp.requests if r.key not in done]
        pr.n_requests, pr.n_resumed = len(lp.requests), len(lp.requests) - len(todo)
        kept = self._kept if self._kept is not None and self._kept.key == server_key(lp) else None
        if not todo:
            if lp.profile not in self.said_stored:
                self.said_stored.add(lp.profile)
                self.hooks.on_progress(f"{lp.profile}: all {len(lp.requests)} samples already stored; not launched")
            pr.outcome = {"kind": "skipped", "profile": lp.profile}
            if kept is not None and not keep:  # nothing left for the server kept for it
                self._stop_kept(server)
            return
        is_baseline = lp.profile == self.playbook.baseline
        t0 = time.monotonic()
        rec = self._launch_or_reuse(server, lp, pr, kept, is_baseline)
        if rec is None:
            return
        use = _Serving(rec=rec, kept=kept, drops0=getattr(server.c, "drops", 0))
        try:
            # one follower per server life: readiness, the crash watch and the log text
            use.stream = kept.stream if kept is not None else server.follow(rec)
            self._serve(server, lp, pr, use, todo, t0)
            use.completed = True
        except TransportLost as e:
            use.lost = e
            pr.cause, pr.hint = "transport_lost", e.message
        finally:
            self._tunnel = None
            log_error = self._end_use(server, lp, pr, use, keep)
        if log_error is not None:  # the server is stopped; a run dir that takes no log takes no sample either
            raise log_error
        if self._kept is not None and self._kept.profile == lp.profile:
            return  # left running for the next profile: no stop to report on
        self._raise_for_profile(server, lp, pr, use, is_baseline)

    def _launch_or_reuse(self, server: ServerKind, lp: LaunchPlan, pr: ProfileRun, kept: KeptServer | None,
                         is_baseline: bool):
        """The record of the server ``lp`` samples: the one kept for it, or a new launch; None when a
        speculative profile could not launch (``pr`` says why). A baseline that cannot launch raises LaunchError."""
        if kept is not None:
            self._kept = None
            pr.reused_server = kept.profile
            if not kept.adopted:
                self.hooks.on_progress(f"{lp.profile}: the server of {kept.profile} runs with the same argv and "
                                       f"environment: reused, not relaunched")
            return kept.rec
        self._stop_kept(server)
        if lp.profile not in self.playbook.attached:
            self.hooks.on_progress(f"{lp.profile}: launching ({'speculative' if lp.speculative else 'baseline'})")
        try:
            rec = server.launch(lp.profile, lp.argv, lp.env)
        except LaunchError as e:
            pr.launch_error, pr.cause, pr.hint = e.message, e.cause or "launch_refused", e.message
            if is_baseline:
                raise
            return None
        if getattr(rec, "attached", False):  # what an attached endpoint serves is known only now
            pr.argv_masked, pr.speculative, pr.attached = rec.argv_masked, rec.speculative, rec.to_dict()
            if is_baseline and rec.speculative:
                algo = rec.server_info.get("speculative_algorithm")
                raise LaunchError(f"the attached baseline {rec.where} speculates ({algo}): attach a baseline "
                                  f"served without speculation", cause="attach_baseline_speculative")
        return rec

    def _serve(self, server: ServerKind, lp: LaunchPlan, pr: ProfileRun, use: _Serving, todo: list[RequestSpec],
               t0: float) -> None:
        """Ready (the kept server's outcome, or followed to ready), ``/health``, then the samples while the server
        is watched; ``pr`` gets the outcome and, when the server failed, its cause."""
        rec, stream = use.rec, use.stream
        with server.reach() as self._tunnel:  # opened while the server starts
            outcome = use.kept.outcome if use.kept is not None else server.wait_ready(
                rec, timeout_s=self.playbook.timeouts.ready_s, stream=stream)
            use.outcome = outcome
            self.hooks.checkpoint()
            if outcome.ok:
                url = self._tunnel.url
                outcome = use.outcome = confirm_health(server, rec, url, outcome, t0, self.playbook.timeouts.ready_s,
                                                       stream)
                pr.ready_s = time.monotonic() - t0
                if outcome.ok:
                    self.hooks.on_progress(f"{lp.profile}: ready in {pr.ready_s:.1f} s")
                    self._sample_timed(server, lp, pr, use, todo, url)
        pr.outcome = outcome.to_dict()
        if pr.crashed is not None:
            pr.cause, pr.hint = pr.crashed["cause"], pr.crashed["hint"]
            self.hooks.on_progress(f"{lp.profile}: server failed during sampling: {pr.cause} — {pr.hint}")
        if not outcome.ok:
            pr.cause, pr.hint = outcome.cause, outcome.hint
            self.hooks.on_progress(outcome.describe())

    def _sample_timed(self, server: ServerKind, lp: LaunchPlan, pr: ProfileRun, use: _Serving,
                      todo: list[RequestSpec], url: str) -> None:
        """``todo`` sampled while the server is watched (:func:`~mtp_remote.experiment.watch.sample_watched`);
        ``pr`` gets the sampling time, the tunnel's channels and the requests' failures."""
        ts = time.monotonic()
        channels0 = self._tunnel.channels_opened

        def failed() -> bool:
            return any(x.error for x in load_samples(self.samples_path) if x.profile == lp.profile)

        try:
            # a server with no log (an attached endpoint) cannot be judged stalled by its log: its requests' own
            # timeouts (timeouts.request_s) bound it
            stall_s = self.playbook.timeouts.stall_s if use.rec.log_path else None
            progress = ServingProgress()  # what our requests see of the server's progress: a hang needs it idle
            pr.crashed = run_async(sample_watched(server, use.rec, self._sample(url, lp, todo, pr, use.rec, progress),
                                                  stall_s=stall_s, failed=failed, stream=use.stream,
                                                  progress=progress))
        finally:
            pr.sampling_s = time.monotonic() - ts
            if self._tunnel.forwarder is not None:
                pr.tunnel_channels = self._tunnel.channels_opened - channels0
        self._check_errors(lp, pr)

    def _end_use(self, server: ServerKind, lp: LaunchPlan, pr: ProfileRun, use: _Serving,
                 keep: bool) -> RunsDirError | None:
        """The server after its profile: kept running for the next one (same argv), or stopped and its log copied
        into the run directory (even when the stop fails); the copy's error as :meth:`_keep` gives it."""
        drops = getattr(server.c, "drops", 0) - use.drops0
        if keep and use.completed and pr.launched and not self.hooks.interrupted():
            return self._keep_running(server, lp, pr, use, drops)
        t_stop = time.monotonic()
        try:
            res = self._stop(server)
        finally:  # the log copy is kept even when the stop fails (StopError)
            pr.stop_s = round(time.monotonic() - t_stop, 3)
            pr.ssh_drops = getattr(server.c, "drops", 0) - use.drops0
            text = log_text(server, use.rec, use.stream, dropped=pr.ssh_drops > 0)
            # a reused server's log holds the profile before too: its decode lines are that one's
            pr.decode = [d.to_dict() for d in classify_log(text[use.log_offset:]).decode]
            pr.greedy_fallback = greedy_verification_fallback(text[use.log_offset:])
            log_error = self._keep(self.run_dir / "logs" / f"{lp.profile}.log",
                                   mask_log_secrets(mask_text(text, self._secrets)))
        if res is None:
            pr.stop = (f"not stopped: the SSH connection is lost; the server of profile {lp.profile!r} "
                       f"({use.rec.label}, port {self.host.port}) may still be running")
            self.left_on_host.append(f"server {use.rec.label} (profile {lp.profile}, port {self.host.port})")
            use.stop_lost = True
        else:
            pr.stop, pr.gpu_release_s = res.describe(), res.gpu_release_s
        return log_error

    def _raise_for_profile(self, server: ServerKind, lp: LaunchPlan, pr: ProfileRun, use: _Serving,
                           is_baseline: bool) -> None:
        """After a stopped profile: say how the connection fared; a lost connection ends the run (exit 2: never
        a verdict on a cut profile), and so does a baseline that did not run."""
        lost = use.lost
        if lost is None and use.stop_lost:  # sampling ended, but the connection dropped while stopping
            lost = getattr(server.c, "lost", None) or TransportLost("the SSH connection was lost while stopping the "
                                                                    "server", host=self.host.name)
        if pr.ssh_drops:  # one account of the drops: re-opened, or not (then the error below says why)
            fate = "re-opened" if lost is None else "not re-opened"
            self.hooks.on_progress(f"{lp.profile}: the SSH connection dropped {pr.ssh_drops} time(s); {fate}; "
                                   f"{pr.n_resent} cut request(s) sent again")
        if lost is not None:
            what = lost.message.removeprefix(f"[{self.host.name}] ")
            raise TransportLost(f"profile {lp.profile!r} ended as transport_lost: {what}", host=self.host.name,
                                cause=lost.cause)
        if is_baseline and not pr.launched:
            raise LaunchError(f"baseline profile {lp.profile!r} failed ({pr.cause}): {pr.hint}; without a baseline "
                              f"there is nothing to compare against", cause=pr.cause,
                              evidence="\n".join((pr.outcome or {}).get("log_tail", [])))

    def _keep_running(self, server: ServerKind, lp: LaunchPlan, pr: ProfileRun, use: _Serving,
                      drops: int) -> RunsDirError | None:
        """Leave ``lp``'s server running for the next profile (same argv): its log so far is copied now (its
        decode lines from where the log of the profile before on this server ended); the copy's error as
        :meth:`_keep` gives it."""
        stream = use.stream
        self._kept = KeptServer(rec=use.rec, stream=stream, outcome=use.outcome, profile=lp.profile,
                                key=server_key(lp), log_offset=len(stream.text) if stream is not None else 0)
        pr.ssh_drops = drops
        text = stream.text if stream is not None else riding_out(server, lambda: server.read_log(use.rec.log_path), "")
        pr.decode = [d.to_dict() for d in classify_log(text[use.log_offset:]).decode]
        pr.greedy_fallback = greedy_verification_fallback(text[use.log_offset:])
        pr.stop = "kept running: the next profile has the same argv and environment"
        return self._keep(self.run_dir / "logs" / f"{lp.profile}.log", mask_log_secrets(mask_text(text, self._secrets)))

    def _stop_kept(self, server: ServerKind) -> None:
        """Stop a server kept for a launch that did not come (its log stream closed first)."""
        kept, self._kept = self._kept, None
        if kept is not None:
            if kept.stream is not None:
                kept.stream.__exit__(None, None, None)
            self._stop(server)

    def _check_errors(self, lp: LaunchPlan, pr: ProfileRun) -> None:
        """Failed requests are data, but a profile whose every request failed did not run at all."""
        mine = [x for x in load_samples(self.samples_path) if x.profile == lp.profile]
        failed = [x for x in mine if x.error]
        pr.n_failed = len(failed)
        if failed:
            first = failed[0].error
            self.hooks.on_progress(f"{lp.profile}: {len(failed)} of {len(mine)} requests failed (first: {first[:160]})")
            if len(failed) == len(mine) and pr.crashed is None:
                pr.crashed = {"cause": "requests_failed", "fatal_line": None,
                              "hint": f"all {len(mine)} requests failed, e.g. {first[:200]}"}

    async def _sample(self, url: str, lp: LaunchPlan, todo: list[RequestSpec], pr: ProfileRun, rec=None,
                      progress: ServingProgress | None = None) -> None:
        """``todo`` through the sampling workers (:func:`~mtp_remote.experiment.workers.sample`), at the
        profile's concurrency (an attached endpoint: the playbook's ``load`` bounds, in flight and per second, and
        its API key); with ``early_stop`` a cell stops being fed once it is settled."""
        pb = self.playbook
        attached = getattr(rec, "attached", False)
        limit = (pb.load.concurrency if attached else
                 self._concurrency.get(lp.profile) or pb.concurrency or pb.max_running_requests())
        await sample(url, lp, todo, pr, playbook=pb, host=self.host, hooks=self.hooks, samples_path=self.samples_path,
                     limit=limit, cells=self._cells(lp, todo) if pb.early_stop else None, send_riding_out=self._send,
                     rate=pb.load.request_rate if attached else None, api_key=getattr(rec, "api_key", None),
                     progress=progress)

    def _cells(self, lp: LaunchPlan, todo: list[RequestSpec]) -> Cells:
        """The early-stopping bookkeeping of ``lp``'s cells, deciding with :func:`~mtp_remote.experiment.early_stop.cell_decision`."""
        pb = self.playbook
        return Cells(lp, todo, samples_path=self.samples_path, baseline=pb.baseline,
                     references=(calibration_profile(pb),) if pb.compare.calibration else (),
                     decide=lambda t, records: cell_decision(pb, self.profiles, lp, t, records, recorded=self.design))
