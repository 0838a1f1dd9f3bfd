"""What is sent and what is kept while sampling one profile: the queue's order, the early-stopping bookkeeping
of its cells, the requests-in-flight meter, and one sample's record in ``samples.jsonl``.

Pure bookkeeping (no I/O but reading ``samples.jsonl``): the runner (:mod:`mtp_remote.experiment.runner`) drives the
server and the HTTP client and calls these.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from ..analysis.degeneracy import analyze_text
from ..analysis.settled import LoopWatch
from ..analysis.samples import analysed_text
from ..records.sample import Sample
from ..responses import Completion
from ..files import loads_json
from .plan import LaunchPlan, RequestSpec

log = logging.getLogger(__name__)


def sample_record(req: RequestSpec, comp: Completion, *, speculative: bool, api: str, kl: dict | None = None,
                  think_opened_by_prompt: bool = False, max_tokens: int = 0) -> Sample:
    """One line of samples.jsonl: the request, the response, its degeneracy metrics and (with the KL probe)
    the k3 estimator of prefill vs decode logprobs; top-2 margins are kept at T=0 for the near-tie rule."""
    metrics = None
    if comp.error is None:
        metrics = analyze_text(analysed_text(comp.text, think_opened_by_prompt), comp.output_ids).to_dict()
    accept = (comp.completion_tokens / comp.spec_verify_ct) if comp.spec_verify_ct else None
    return Sample.model_validate({
        "profile": req.profile, "speculative": speculative, "temperature": req.temperature,
        "prompt_id": req.prompt_id, "sample_index": req.sample_index, "seed": req.seed, "api": api,
        "text": comp.text, "finish_reason": comp.finish_reason, "prompt_tokens": comp.prompt_tokens,
        "completion_tokens": comp.completion_tokens, "reasoning_tokens": comp.reasoning_tokens,
        "latency_s": round(comp.latency_s, 4), "spec_verify_ct": comp.spec_verify_ct,
        "accept_length": round(accept, 4) if accept else None, "output_ids": comp.output_ids,
        "error": comp.error, "metrics": metrics, "kl": kl, "think_opened_by_prompt": think_opened_by_prompt,
        "top2_margins": comp.top2_margins if req.temperature == 0 else None,
        # set when we stopped it once its loop was settled (finish_reason "loop-stop"): the rule, the loop, the
        # tokens it had (``at_tokens``: its completion_tokens, over which its speed and acceptance are measured),
        # the tokens not generated (``saved_tokens``: max_tokens - at_tokens) and whether the abort was accepted
        "loop_stop": ({**comp.stop, "saved_tokens": max(max_tokens - comp.completion_tokens, 0)}
                      if comp.stop is not None else None),
        "request": comp.request,  # {"endpoint", "body"}: what was sent, exactly (bug-report replays it)
        "tool_calls": comp.tool_calls,  # [{"name", "arguments"}] of a chat response (also in ``text``)
    })


def loop_watch(think_opened_by_prompt: bool = False) -> Callable[[str, list[int] | None], dict | None]:
    """A fresh ``watch`` for one streamed request (:meth:`~mtp_remote.client.ServerClient.generate_stream`): the
    settled escaped-loop rule (:class:`~mtp_remote.analysis.settled.LoopWatch`) on the text as the analysis
    will see it; returns the settled loop as a dict, or None to go on."""
    watch = LoopWatch()

    def look(text: str, ids: list[int] | None) -> dict | None:
        hit = watch.look(analysed_text(text, think_opened_by_prompt), ids)
        return hit.to_dict() if hit is not None else None

    return look


def streams(req: RequestSpec, *, stop_on_loop: bool, kl_probe: bool) -> bool:
    """Whether ``req`` is streamed and stopped once its loop is settled: with ``stop_on_loop``, at T > 0 and
    without the KL probe. T = 0 samples run to their end: their top-2 margins (the near-tie rule) and the whole
    greedy output (the divergence) are evidence; the KL probe re-scores the whole output."""
    return stop_on_loop and not kl_probe and req.temperature > 0


def load_samples(path: Path) -> list[Sample]:
    """Samples already stored (a truncated last line from a crash, or a line that is no sample, is skipped)."""
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8", errors="replace") as f:  # line by line: never the whole file at once
        for line in f:
            if not line.strip():
                continue
            try:
                out.append(Sample.of(loads_json(line)))
            except ValueError:  # a truncated line, one nested past the parser's depth, or no sample (pydantic's)
                log.warning("skipping a truncated line in %s", path)
    return out


def sample_key(s: Sample | dict) -> tuple:
    """(profile, temperature, prompt id, sample index): a request's identity for pairing and resume."""
    return Sample.of(s).key


def latest_samples(samples: list[Sample | dict]) -> list[Sample]:
    """One record per (profile, temperature, prompt, sample index): the last successful one, else the last
    failure (a resumed run re-requests what failed, so both may be stored)."""
    best: dict[tuple, Sample] = {}
    for x in map(Sample.of, samples):
        key = x.key
        if key not in best or x.error is None or best[key].error is not None:
            best[key] = x
    return list(best.values())


def send_order(req: RequestSpec) -> tuple:
    """Queue order: round by round (sample index), both temperatures' cells side by side, prompts in plan
    order — so whole rounds complete early, which is what a stopping look needs."""
    return (req.sample_index, req.temperature)


class Pacer:
    """At most ``rate`` request starts per second (None: no bound): ``await pacer.wait()`` before each send.
    Starts are spaced ``1 / rate`` seconds apart, whatever the number of workers (a production endpoint's bound:
    ``load.request_rate``)."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self._next = 0.0

    async def wait(self) -> None:
        if not self.interval:
            return
        now = time.monotonic()
        at = max(now, self._next)
        self._next = at + self.interval
        if at > now:
            await asyncio.sleep(at - now)


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


class Cells:
    """Early-stopping bookkeeping of one profile's cells (one per temperature), all in memory.

    A cell is looked at when a whole round (every prompt's sample ``i``) has completed, on the samples of the
    completed rounds only — never on whichever requests finished first: a looping output runs to
    ``max_tokens`` and finishes last, so counting completions as they come would under-count loops. Later
    rounds are already in flight meanwhile (that is what keeps the server full); once a cell is settled its
    queued requests are dropped and those in flight finish and are stored (all sent samples are kept, so
    what is stored is not selected by speed). Records start from samples.jsonl (``samples_path``), read once.
    ``decide(temperature, records)`` is the decision rule (the verdict's: ``Runner._cell_decision``)."""

    def __init__(self, lp: LaunchPlan, todo: list[RequestSpec], *, samples_path: Path, baseline: str,
                 decide: Callable[[float, list[Sample]], dict], references: tuple[str, ...] = ()):
        self.lp, self.baseline, self.decide = lp, baseline, decide
        temps = sorted({r.temperature for r in todo})
        stored = [s for s in load_samples(samples_path) if s.error is None]
        # the arms a cell is judged against: the baseline, and its A/A relaunch (``references``) once sampled
        refs = {baseline, *references} - {lp.profile}
        self.base = [s for s in stored if s.profile in refs]
        self.mine = {t: [s for s in stored if s.profile == lp.profile and float(s.temperature) == t]
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
        mine = [s for s in self.mine[t] if s.sample_index <= upto]
        d = self.decide(t, mine if self.lp.profile == self.baseline else self.base + mine)
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

    def completed(self, req: RequestSpec, rec: Sample | dict, queue: deque, on_progress) -> int:
        """Count one returned request; look when it completed a round. Returns the requests dropped."""
        rec = Sample.of(rec)
        t = req.temperature
        self.pending[t][req.sample_index] -= 1
        if rec.error is None:
            self.mine[t].append(rec)
        if self.settled(t) or not self._advance(t):
            return 0
        return self._look(t, queue, on_progress)

    def decisions(self) -> dict[str, dict | None]:
        return {str(t): d for t, d in self.decision.items()}
