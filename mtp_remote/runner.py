"""Drive a plan on one host: for each profile, launch → wait ready → sample through the tunnel → stop.

Every sample is appended to ``runs/<run-id>/samples.jsonl`` the moment it arrives, so an interrupted run
keeps what it has and ``--resume RUN_ID`` requests only what is missing. Per-request failures are data
(``error`` field); a baseline that cannot launch makes the run fail (exit 2); a speculative profile that
cannot launch gets the verdict ``launch-failed:<cause>``. ``finally`` always stops the server we launched
and releases the host lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import secrets
import socket
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from .analysis.degeneracy import analyze_text
from .client import Completion, ServerClient
from .config import HostConfig, Playbook
from .errors import LaunchError
from .plan import LaunchPlan, RequestSpec, plan_run
from .remote import connect as transport
from .remote.commands import api_key_of, mask_argv, mask_log_secrets, mask_text, playbook_secrets
from .remote.logs import classify_log
from .samples import THINK_PREFIX, analysed_text  # noqa: F401 (re-exported: diagnosis, ops)
from .server import ServerLifecycle, TimedOut, WaitOutcome

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
    server_info: dict = field(default_factory=dict)
    decode: list[dict] = field(default_factory=list)
    n_requests: int = 0
    n_resumed: int = 0
    stopping: dict = field(default_factory=dict)  # temperature -> early-stopping decision
    n_failed: int = 0  # requests of this profile that returned an error
    occupancy: dict = field(default_factory=dict)  # requests in flight vs the limit (Occupancy.to_dict)

    crashed: dict | None = None  # {"cause", "hint", "fatal_line"} when the server died while sampling

    @property
    def launched(self) -> bool:
        """Ready, and did not die while sampling."""
        return self.outcome is not None and self.outcome.get("kind") == "ready" and self.crashed is None


@dataclass
class Hooks:
    """Progress callbacks: ``on_progress(message)``, ``on_profile(profile, n_requests)``,
    ``on_sample(profile, done, total)``; ``interrupted()`` says whether the user asked to stop (an error that
    follows is then reported as the interrupt)."""

    on_progress: Callable[[str], None] = lambda msg: None
    on_profile: Callable[[str, int], None] = lambda profile, n: None
    on_sample: Callable[[str, int, int], None] = lambda profile, done, total: None
    interrupted: Callable[[], bool] = lambda: False
    checkpoint: Callable[[], None] = lambda: None  # raises KeyboardInterrupt if the user asked to stop


def _failure(alive: bool, cls) -> dict | None:
    """{"cause", "hint", "fatal_line"} when the server died or logged a fatal line, else None."""
    if cls.is_fatal:
        return {"cause": cls.cls, "hint": cls.hint, "fatal_line": cls.fatal_line}
    if not alive:
        return {"cause": "process_exited", "fatal_line": None,
                "hint": "the server process exited while requests were running"}
    return None


def sample_record(req: RequestSpec, comp: Completion, *, speculative: bool, api: str, kl: dict | None = None,
                  think_opened_by_prompt: bool = False) -> dict:
    """One line of samples.jsonl: the request, the response, its degeneracy metrics and (with the KL probe)
    the k3 estimator of prefill vs decode logprobs; top-2 margins are kept at T=0 for the near-tie rule."""
    metrics = None
    if comp.error is None:
        metrics = analyze_text(analysed_text(comp.text, think_opened_by_prompt), comp.output_ids).to_dict()
    accept = (comp.completion_tokens / comp.spec_verify_ct) if comp.spec_verify_ct else None
    return {
        "profile": req.profile, "speculative": speculative, "temperature": req.temperature,
        "prompt_id": req.prompt_id, "sample_index": req.sample_index, "seed": req.seed, "api": api,
        "text": comp.text, "finish_reason": comp.finish_reason, "prompt_tokens": comp.prompt_tokens,
        "completion_tokens": comp.completion_tokens, "reasoning_tokens": comp.reasoning_tokens,
        "latency_s": round(comp.latency_s, 4), "spec_verify_ct": comp.spec_verify_ct,
        "accept_length": round(accept, 4) if accept else None, "output_ids": comp.output_ids,
        "error": comp.error, "metrics": metrics, "kl": kl, "think_opened_by_prompt": think_opened_by_prompt,
        "top2_margins": comp.top2_margins if req.temperature == 0 else None,
    }


def load_samples(path: Path) -> list[dict]:
    """Samples already stored (a truncated last line from a crash is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            log.warning("skipping a truncated line in %s", path)
    return out


def sample_key(s: dict) -> tuple:
    return (s["profile"], float(s["temperature"]), s["prompt_id"], s["sample_index"])


class Runner:
    """Runs a playbook on one host and writes ``run_dir`` (samples.jsonl, logs/, run.json).

    ``python`` is the remote python; ``workdir`` the remote work directory. Call :meth:`run`; it returns the
    list of :class:`ProfileRun`. Raises MtpRemoteError when the run cannot be done (SSH, lock, baseline
    launch)."""

    def __init__(self, host: HostConfig, playbook: Playbook, run_dir: Path, *, run_id: str, python: str,
                 profiles: list[str] | None = None, hooks: Hooks | None = None, c=None):
        self.host = host
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

    # -- run ------------------------------------------------------------------------------------------------

    def run(self) -> list[ProfileRun]:
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        own_c = self.c is None
        c = self.c or transport.connect(self.host)
        lc = ServerLifecycle(c, self.host, python=self.python, workdir=self.host.workdir, run_id=self.run_id,
                             on_progress=self.hooks.on_progress)
        try:
            lc.prepare()
            lc.acquire_lock(f"{getpass.getuser()}@{socket.gethostname()}")
            try:
                self._stop_leftover(lc)
                for lp in plan_run(self.host, self.playbook, lc.workdir, self.profiles):
                    self._run_profile(c, lc, lp)
            finally:
                try:
                    lc.stop(term_s=self.playbook.timeouts.term_s,
                            gpu_release_s=self.playbook.timeouts.gpu_release_s)
                finally:
                    lc.release_lock()
        finally:
            if own_c:
                transport.close(c)
        return self.profile_runs

    def _stop_leftover(self, lc: ServerLifecycle) -> None:
        res = lc.stop(term_s=self.playbook.timeouts.term_s, gpu_release_s=self.playbook.timeouts.gpu_release_s)
        if res.found in ("running", "group-only", "gone") and res.log_path:
            text = lc.read_log(res.log_path)
            if text:
                dest = self.run_dir / "logs" / f"previous-{res.pid}.log"
                dest.write_text(mask_log_secrets(mask_text(text, self._secrets)))
                self.hooks.on_progress(f"stopped a server left by an earlier run (PID {res.pid}); "
                                       f"its log {res.log_path} is kept and copied to {dest}")

    def _run_profile(self, c, lc: ServerLifecycle, lp: LaunchPlan) -> None:
        self.hooks.checkpoint()
        pr = ProfileRun(profile=lp.profile, speculative=lp.speculative, argv_masked=mask_argv(lp.argv))
        self.profile_runs.append(pr)
        done = {sample_key(s) for s in load_samples(self.samples_path) if s.get("error") is None}
        todo = [r for r in lp.requests if r.key not in done]
        pr.n_requests, pr.n_resumed = len(lp.requests), len(lp.requests) - len(todo)
        if not todo:
            self.hooks.on_progress(f"{lp.profile}: all {len(lp.requests)} samples already stored; not launched")
            pr.outcome = {"kind": "skipped", "profile": lp.profile}
            return
        is_baseline = lp.profile == self.playbook.baseline
        t0 = time.monotonic()
        self.hooks.on_progress(f"{lp.profile}: launching ({'speculative' if lp.speculative else 'baseline'})")
        try:
            rec = lc.launch(lp.profile, lp.argv, lp.env)
        except LaunchError as e:
            pr.launch_error, pr.cause, pr.hint = e.message, e.cause or "launch_refused", e.message
            if is_baseline:
                raise
            return
        try:
            outcome = lc.wait_ready(rec, timeout_s=self.playbook.timeouts.ready_s)
            self.hooks.checkpoint()
            if outcome.ok:
                with transport.tunnel(c, self.host) as url:
                    outcome = self._confirm_health(lc, rec, url, outcome, t0)
                    pr.ready_s = time.monotonic() - t0
                    if outcome.ok:
                        self.hooks.on_progress(f"{lp.profile}: ready in {pr.ready_s:.1f} s")
                        ts = time.monotonic()
                        asyncio.run(self._sample_watched(lc, rec, url, lp, todo, pr))
                        pr.sampling_s = time.monotonic() - ts
                        self._check_errors(lp, pr)
            pr.outcome = outcome.to_dict()
            if pr.crashed is not None:
                pr.cause, pr.hint = pr.crashed["cause"], pr.crashed["hint"]
                self.hooks.on_progress(f"{lp.profile}: server failed during sampling: {pr.cause} — {pr.hint}")
            if not outcome.ok:
                pr.cause, pr.hint = outcome.cause, outcome.hint
                self.hooks.on_progress(outcome.describe())
        finally:
            text = lc.read_log(rec.log_path)
            (self.run_dir / "logs" / f"{lp.profile}.log").write_text(mask_log_secrets(mask_text(text, self._secrets)))
            pr.decode = [d.to_dict() for d in classify_log(text).decode]
            res = lc.stop(term_s=self.playbook.timeouts.term_s, gpu_release_s=self.playbook.timeouts.gpu_release_s)
            pr.stop, pr.gpu_release_s = res.describe(), res.gpu_release_s
        if is_baseline and not pr.launched:
            raise LaunchError(f"baseline profile {lp.profile!r} failed ({pr.cause}): {pr.hint}; without a baseline "
                              f"there is nothing to compare against", cause=pr.cause,
                              evidence="\n".join((pr.outcome or {}).get("log_tail", [])))

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

    def _confirm_health(self, lc: ServerLifecycle, rec, url: str, outcome: WaitOutcome, t0: float) -> WaitOutcome:
        """After the ready line: /health must answer 200 (it is 503 until warmup ends)."""
        deadline = t0 + self.playbook.timeouts.ready_s

        async def poll() -> bool:
            async with ServerClient(url, timeout_s=10) as sc:  # /health needs no API key
                while time.monotonic() < deadline:
                    if await sc.health() == 200:
                        return True
                    await asyncio.sleep(0.1)
            return False

        if asyncio.run(poll()):
            return outcome
        return TimedOut(profile=rec.profile, elapsed_s=time.monotonic() - t0, milestones=outcome.milestones,
                        log_tail=outcome.log_tail, cause="health_check_failed",
                        hint="the ready line was printed but /health never answered 200")

    async def _sample_watched(self, lc: ServerLifecycle, rec, url: str, lp: LaunchPlan, todo: list[RequestSpec],
                              pr: ProfileRun) -> None:
        """Sample while watching the server: if its process dies or its log shows a fatal line, pending
        requests are cancelled (samples already stored are kept) and ``pr.crashed`` says why."""
        sampling = asyncio.ensure_future(self._sample(url, lp, todo, pr))
        watching = asyncio.ensure_future(self._watch(lc, rec))
        done, _ = await asyncio.wait({sampling, watching}, return_when=asyncio.FIRST_COMPLETED)
        if sampling in done:
            watching.cancel()
            sampling.result()
            # requests can all return (failed) before the watcher's next look: look once more
            pr.crashed = await asyncio.to_thread(self._server_failure, lc, rec)
            return
        pr.crashed = watching.result()
        sampling.cancel()
        try:
            await sampling
        except asyncio.CancelledError:
            pass

    @staticmethod
    def _server_failure(lc: ServerLifecycle, rec) -> dict | None:
        """None if the server is alive and its log shows no fatal line; else cause, hint, fatal line."""
        alive, text = lc.poll(rec, 0)
        return _failure(alive, classify_log(text))

    async def _watch(self, lc: ServerLifecycle, rec, interval_s: float = 1.0) -> dict:
        """Poll the server's process and log (from a byte offset) until it dies, logs a fatal line, or writes
        nothing for ``timeouts.stall_s`` seconds while requests are in flight (a hung scheduler: SGLang logs a
        ``Decode batch`` line every few dozen steps while it decodes)."""
        alive, startup = await asyncio.to_thread(lc.poll, rec, 0)
        offset = len(startup.encode("utf-8", "surrogateescape"))
        text = ""  # what the server wrote since sampling began
        last_growth = time.monotonic()
        stall_s = self.playbook.timeouts.stall_s
        while True:
            await asyncio.sleep(interval_s)
            alive, new = await asyncio.to_thread(lc.poll, rec, offset)
            if new:
                offset += len(new.encode("utf-8", "surrogateescape"))
                text = text[-(1 << 20):] + new  # fatal lines come last: a bounded window is enough
                last_growth = time.monotonic()
            failure = _failure(alive, classify_log(text if not alive else text[: text.rfind("\n") + 1]))
            if failure is not None:  # (complete lines only while it lives)
                return failure
            if time.monotonic() - last_growth > stall_s:
                return {"cause": "stalled", "fatal_line": None,
                        "hint": f"the server wrote nothing for {stall_s:.0f} s while requests were in flight: its "
                                f"scheduler looks hung (SGLang's --watchdog-timeout would end it); raise "
                                f"timeouts.stall_s if generations are legitimately that slow"}

    async def _sample(self, url: str, lp: LaunchPlan, todo: list[RequestSpec], pr: ProfileRun) -> None:
        """Send ``todo`` through ``limit`` workers fed by one queue, so a slot is refilled the moment its
        request returns (no round barrier); with ``early_stop`` a cell stops being fed once it is settled
        (:class:`_Cells`). A response's metrics and JSON line are done by a separate task (metrics in a worker
        thread) while its worker already sends the next request, so no slot waits for bookkeeping."""
        pb = self.playbook
        limit = pb.concurrency or pb.max_running_requests()
        queue = deque(sorted(todo, key=_send_order))
        cells = _Cells(self, lp, todo) if pb.early_stop else None
        occupancy = Occupancy(limit)
        progress = {"done": 0, "total": len(todo)}
        self.hooks.on_profile(lp.profile, len(todo))
        if cells is not None:
            progress["total"] -= cells.settle_stored(queue, self.hooks.on_progress)

        def next_request() -> RequestSpec | None:
            while queue:
                req = queue.popleft()
                if cells is None or not cells.settled(req.temperature):
                    return req
            occupancy.queue_empty()
            return None

        with self.samples_path.open("a") as f:
            async with ServerClient(url, timeout_s=pb.timeouts.request_s, max_connections=limit + 2,
                                    api_key=api_key_of(lp.argv)) as sc:

                async def send(req: RequestSpec) -> tuple[Completion, dict | None]:
                    with occupancy.in_flight():
                        if pb.api == "chat":
                            comp = await sc.chat(req.prompt, temperature=req.temperature,
                                                 max_tokens=pb.max_tokens, top_p=pb.top_p, seed=req.seed)
                        else:
                            text = pb.prompt_template.replace("{prompt}", req.prompt)
                            comp = await sc.generate(text, temperature=req.temperature,
                                                     max_new_tokens=pb.max_tokens, top_p=pb.top_p, seed=req.seed,
                                                     return_logprob=pb.kl_probe)
                        kl = await self._kl_probe(sc, comp) if pb.kl_probe else None
                    return comp, kl

                async def finish(req: RequestSpec, comp: Completion, kl: dict | None) -> None:
                    # metrics cost 2-8 ms a sample (a loop costs most): in a thread, after the slot is refilled
                    rec = await asyncio.to_thread(
                        sample_record, req, comp, speculative=lp.speculative, api=pb.api, kl=kl,
                        think_opened_by_prompt=pb.think_opened_by_prompt)
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    progress["done"] += 1
                    if cells is not None:
                        progress["total"] -= cells.completed(req, rec, queue, self.hooks.on_progress)
                    self.hooks.on_sample(lp.profile, progress["done"], progress["total"])

                finishing: set[asyncio.Future] = set()

                async def worker() -> None:
                    while (req := next_request()) is not None:
                        comp, kl = await send(req)
                        task = asyncio.ensure_future(finish(req, comp, kl))
                        finishing.add(task)
                        task.add_done_callback(finishing.discard)
                        self.hooks.checkpoint()

                workers = [asyncio.ensure_future(worker()) for _ in range(min(limit, len(queue)))]
                try:
                    await asyncio.gather(*workers)
                    while finishing:
                        await asyncio.gather(*finishing)
                finally:
                    for w in workers:  # one failed or we were cancelled: the others stop sending too
                        w.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)
                    # responses already received are still stored (no network in there: quick)
                    await asyncio.gather(*finishing, return_exceptions=True)
                    pr.occupancy = occupancy.to_dict()
                    if cells is not None:
                        pr.stopping.update(cells.decisions())
                pr.server_info = await sc.server_info()

    @staticmethod
    async def _kl_probe(sc: ServerClient, comp: Completion) -> dict | None:
        """Re-score the generated tokens by prefill; mean/max k3 of prefill vs decode logprobs."""
        from .analysis.divergence import kl_probe

        if comp.error or not comp.prompt_ids or not comp.output_ids or not comp.output_logprobs:
            return None
        prefill = await sc.score(comp.prompt_ids + comp.output_ids, len(comp.prompt_ids))
        if not prefill:
            return None
        n = min(len(prefill), len(comp.output_logprobs))
        pairs = [(p, d) for p, d in zip(prefill[:n], comp.output_logprobs[:n]) if p is not None and d is not None]
        if not pairs:
            return None
        probe = kl_probe([p for p, _ in pairs], [d for _, d in pairs])
        return {"mean_k3": probe.mean_k3, "max_k3": probe.max_k3, "n_tokens": probe.n_tokens}

    def _cell_decision(self, lp: LaunchPlan, temperature: float, records: list[dict]) -> dict:
        """Early-stopping state of one cell from ``records`` (samples.jsonl dicts held in memory: the
        baseline's, and this profile's whole rounds only; see :class:`_Cells`). See analysis.stopping."""
        from .analysis.stopping import StopRule, baseline_settled, stop_decision

        stored = [s for s in records if s.get("error") is None and float(s["temperature"]) == temperature]

        def counts(profile: str) -> tuple[int, int]:
            arm = [s for s in stored if s["profile"] == profile]
            return sum(1 for s in arm if (s.get("metrics") or {}).get("loop")), len(arm)

        pb = self.playbook
        rule = StopRule(budget=pb.samples_at(temperature) * len(pb.prompts), round_size=len(pb.prompts),
                        alpha=pb.compare.alpha)
        k, n = counts(lp.profile)
        if lp.profile == pb.baseline:
            d = baseline_settled(k, n, rule)
        else:
            kb, nb = counts(pb.baseline)
            d = stop_decision(k, n, kb, nb, rule)
        return {"settled": d.settled, "outcome": d.outcome, "reason": d.reason, "n": n, "budget": rule.budget}


def _send_order(req: RequestSpec) -> tuple:
    """Queue order: round by round (sample index), both temperatures' cells side by side, prompts in plan
    order — so whole rounds complete early, which is what a stopping look needs."""
    return (req.sample_index, req.temperature)


class Occupancy:
    """Requests in flight over time, for the figure "requests in flight vs the server's limit".

    ``in_flight()`` wraps one request (HTTP send to response); ``queue_empty()`` marks the moment nothing
    is left to send (the tail starts). ``to_dict()``: ``limit``, ``mean_in_flight`` (time-weighted, from the
    first send to the tail) and its ``share`` of ``limit``, ``full_s`` (seconds of that span), ``tail_s``
    (from then to the last response), ``sent`` (requests). Wall-clock ``t_first_send``/``t_queue_empty``
    (epoch seconds) let a benchmark line it up with the server's own counts."""

    def __init__(self, limit: int):
        self.limit = limit
        self.n = 0
        self.sent = 0
        self._area = 0.0
        self._t_last: float | None = None
        self._t0: float | None = None
        self._t_empty: float | None = None
        self._t_end: float | None = None
        self._wall0: float | None = None
        self._wall_empty: float | None = None

    def _step(self, delta: int) -> None:
        now = time.monotonic()
        if self._t0 is None:
            self._t0, self._wall0 = now, time.time()
        elif self._t_empty is None:
            self._area += self.n * (now - self._t_last)
        self._t_last, self._t_end = now, now
        self.n += delta

    @contextlib.contextmanager
    def in_flight(self):
        self._step(+1)
        self.sent += 1
        try:
            yield
        finally:
            self._step(-1)

    def queue_empty(self) -> None:
        if self._t_empty is None and self._t0 is not None:
            now = time.monotonic()
            self._area += self.n * (now - self._t_last)
            self._t_last, self._t_empty, self._wall_empty = now, now, time.time()

    def to_dict(self) -> dict:
        if self._t0 is None:
            return {"limit": self.limit, "sent": 0}
        end = self._t_empty if self._t_empty is not None else self._t_end
        span = max(end - self._t0, 1e-9)
        mean = self._area / span
        return {"limit": self.limit, "sent": self.sent, "mean_in_flight": round(mean, 3),
                "share": round(mean / self.limit, 4), "full_s": round(span, 3),
                "tail_s": round(self._t_end - end, 3), "t_first_send": self._wall0,
                "t_queue_empty": self._wall_empty}


class _Cells:
    """Early-stopping bookkeeping of one profile's cells (one per temperature), all in memory.

    A cell is looked at when a whole round (every prompt's sample ``i``) has completed, on the samples of the
    completed rounds only — never on whichever requests finished first: a looping output runs to
    ``max_tokens`` and finishes last, so counting completions as they come would under-count loops. Later
    rounds are already in flight meanwhile (that is what keeps the server full); once a cell is settled its
    queued requests are dropped and those in flight finish and are stored (all sent samples are kept, so
    what is stored is not selected by speed). Records start from samples.jsonl, read once."""

    def __init__(self, runner: Runner, lp: LaunchPlan, todo: list[RequestSpec]):
        self.runner, self.lp = runner, lp
        temps = sorted({r.temperature for r in todo})
        stored = [s for s in load_samples(runner.samples_path) if s.get("error") is None]
        self.base = [s for s in stored if s["profile"] == runner.playbook.baseline]
        self.mine = {t: [s for s in stored if s["profile"] == lp.profile and float(s["temperature"]) == t]
                     for t in temps}
        self.pending = {t: Counter(r.sample_index for r in todo if r.temperature == t) for t in temps}
        self.rounds = {t: sorted({r.sample_index for r in lp.requests if r.temperature == t}) for t in temps}
        self.whole = dict.fromkeys(temps, 0)  # rounds complete, counted from the first
        self.decision: dict[float, dict | None] = dict.fromkeys(temps)

    def settled(self, t: float) -> bool:
        d = self.decision.get(t)
        return bool(d and d["settled"])

    def _advance(self, t: float) -> bool:
        """Move the whole-rounds mark; True when it moved (a new look)."""
        before = self.whole[t]
        rounds = self.rounds[t]
        while self.whole[t] < len(rounds) and self.pending[t][rounds[self.whole[t]]] == 0:
            self.whole[t] += 1
        return self.whole[t] > before

    def _look(self, t: float, queue: deque, on_progress) -> int:
        """Decide on the whole rounds; when settled, drop the cell's queued requests. Returns how many."""
        upto = self.rounds[t][self.whole[t] - 1]
        mine = [s for s in self.mine[t] if s["sample_index"] <= upto]
        is_baseline = self.lp.profile == self.runner.playbook.baseline
        d = self.runner._cell_decision(self.lp, t, mine if is_baseline else self.base + mine)
        self.decision[t] = d
        if not d["settled"]:
            return 0
        kept = [r for r in queue if r.temperature != t]
        dropped = len(queue) - len(kept)
        queue.clear()
        queue.extend(kept)
        on_progress(f"{self.lp.profile} T={t:g}: settled after {d['n']} samples ({d['reason']}); "
                    f"{dropped} requests saved")
        return dropped

    def settle_stored(self, queue: deque, on_progress) -> int:
        """A look at what was stored before (``--resume``); returns the requests dropped."""
        return sum(self._look(t, queue, on_progress) for t in self.rounds if self._advance(t))

    def completed(self, req: RequestSpec, rec: dict, queue: deque, on_progress) -> int:
        """Count one returned request; look when it completed a round. Returns the requests dropped."""
        t = req.temperature
        self.pending[t][req.sample_index] -= 1
        if rec.get("error") is None:
            self.mine[t].append(rec)
        if self.settled(t) or not self._advance(t):
            return 0
        return self._look(t, queue, on_progress)

    def decisions(self) -> dict[str, dict | None]:
        return {str(t): d for t, d in self.decision.items()}
