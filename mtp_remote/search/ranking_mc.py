"""Monte Carlo of the mitigation ranking (:func:`ranking_error_rates`): seeded per-sample speeds through the very
functions of ``ranking.py``, on :class:`~mtp_remote.search.mitigate.CandidateResult` rows: interval coverage and
how often a truly slower candidate comes first without a tie mark; ``docs/metrics.md`` has its figures."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..analysis.speed import LogSpeed
from .mitigate import CandidateResult
from .ranking import SPEED_CONFIDENCE, pick_best, rank_results, speed_fields

#: The shares :func:`loop_claim_rates` reports, in its order.
LOOP_CLAIM_COUNTS = ("false_before", "false_after", "found_before", "found_after", "picked", "picked_bad")


@dataclass(frozen=True)
class RankingDraw:
    """One simulated ranking (:func:`simulate_ranking`): per candidate whether its interval holds the true
    ratio (``covered``), the index ranked #1 (``first``), those marked tied with it (``tied``), the pick
    (``best``)."""

    covered: list[bool]
    first: int
    tied: list[int]
    best: int


@dataclass(frozen=True)
class LoopClaimDraw:
    """One simulated table's loop claims (:func:`simulate_loop_claims`): candidate indices ``loop-free``
    before and after the family-wise step, those ``no-loops-seen``, the pick (None without one)."""

    before: list[int]
    loop_free: list[int]
    no_loops_seen: list[int]
    best: int | None


def simulate_ranking(true_ratios: Sequence[float], n: int, sigma: float, rng, *, n_base: int | None = None,
                     dist: str = "lognormal", prompts: int = 0, prompt_sd: float = 0.0,
                     confidence: float = SPEED_CONFIDENCE) -> RankingDraw:
    """One simulated mitigation table: a baseline arm and one arm per candidate (``true_ratios``: its true
    speed over the baseline), ``n`` non-looping samples each (``n_base`` for the baseline), per-sample
    tokens/s drawn from a scale family (``lognormal`` with log-sd ``sigma``, or ``gamma`` with the same
    coefficient of variation), so the true ratio of typical speeds is exactly the ratio of scales. With
    ``prompts`` > 0 each table also draws one log-speed offset per prompt (sd ``prompt_sd``: some prompts run
    faster than others on every arm) and every arm cycles through the same prompts, as the runner does. Runs
    :func:`speed_fields`, :func:`rank_results` and :func:`pick_best` on CandidateResult rows. Returns
    ``covered`` (per candidate: its interval holds the true ratio), ``first`` (index ranked #1),
    ``tied`` (indices marked tied with #1) and ``best`` (the pick's index). ``rng``: numpy Generator."""
    offsets = rng.normal(0.0, prompt_sd, prompts) if prompts else None

    def draw(scale: float, size: int):
        if dist == "lognormal":
            x = scale * rng.lognormal(0.0, sigma, size)
        else:
            k = 1.0 / (math.exp(sigma ** 2) - 1.0)  # gamma shape with the lognormal's coefficient of variation
            x = scale * rng.gamma(k, 1.0 / k, size)
        if offsets is not None:
            x = x * [math.exp(offsets[i % prompts]) for i in range(size)]
        return x

    base = LogSpeed.of(draw(100.0, n_base or n))
    rows = []
    for i, r in enumerate(true_ratios):
        ls = LogSpeed.of(draw(100.0 * r, n))
        speed = speed_fields(ls, base, None, confidence)
        rows.append(CandidateResult(name=f"c{i}", change="", source="sim", status="loop-free", flag_changes=1,
                                    log_speed=ls.to_dict(), base_log_speed=base.to_dict(),
                                    speed_vs_baseline=speed.speed_vs_baseline, speed_ci=speed.speed_ci))
    ranked = rank_results(rows, confidence=confidence)
    idx = {r.name: int(r.name[1:]) for r in rows}
    return RankingDraw(covered=[r.speed_ci is not None and r.speed_ci[0] <= t <= r.speed_ci[1]
                                for r, t in zip(rows, true_ratios)],
                       first=idx[ranked[0].name], tied=[idx[r.name] for r in ranked if r.tied_with],
                       best=idx[pick_best(ranked).name])


def ranking_error_rates(true_ratios: Sequence[float], n: int, sigma: float, *, trials: int = 1000, seed: int = 0,
                        n_base: int | None = None, dist: str = "lognormal", prompts: int = 0,
                        prompt_sd: float = 0.0) -> dict:
    """:func:`simulate_ranking` over ``trials`` seeded tables. ``coverage``: share of candidate intervals
    holding the true ratio; ``wrong_first_untied``: share of tables whose #1 is not the truly fastest and the
    truly fastest is not marked tied with it (the ranking claims a wrong winner); ``wrong_first``: #1 is not
    the truly fastest, tie or not; ``fastest_with_slower_tied``: #1 is the truly fastest and a truly slower
    candidate is marked tied with it (the price of honesty: "cannot tell" although they differ);
    ``top_two_separated``: the two truly fastest candidates are not marked tied, whichever comes first (with
    equal true speeds: the false-separation rate, ≈ 5 % by construction; with different ones: the power).
    Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    order = sorted(range(len(true_ratios)), key=lambda i: -true_ratios[i])
    fastest, second = order[0], order[1] if len(order) > 1 else None
    cov = covn = wrong = wrong_untied = tied_slower = separated = 0
    for _ in range(trials):
        out = simulate_ranking(true_ratios, n, sigma, rng, n_base=n_base, dist=dist, prompts=prompts,
                               prompt_sd=prompt_sd)
        if second is not None and out.first in (fastest, second):
            other = second if out.first == fastest else fastest
            separated += other not in out.tied
        cov += sum(out.covered)
        covn += len(out.covered)
        if out.first != fastest and true_ratios[out.first] < true_ratios[fastest]:
            wrong += 1
            wrong_untied += fastest not in out.tied
        tied_slower += any(i != fastest and true_ratios[i] < true_ratios[fastest] for i in out.tied
                           ) if out.first == fastest else 0
    return {"trials": trials, "n": n, "sigma": sigma, "dist": dist, "true_ratios": list(true_ratios),
            "coverage": cov / covn, "wrong_first": wrong / trials, "wrong_first_untied": wrong_untied / trials,
            "fastest_with_slower_tied": tied_slower / trials, "top_two_separated": separated / trials,
            "prompts": prompts, "prompt_sd": prompt_sd}


_LOOP_TEXT = "<think>\nThe question is 2+2." + " The user's question is 2+2." * 40
_CLEAN_TEXT = "<think>\nTwo plus two is four.\n</think>\nThe answer is 4."


def _records(profile: str, rate: float, prompts: int, rounds: int, speed: float, rng) -> list[dict]:
    """samples.jsonl records of one arm at T = 0.7: ``rounds`` per prompt, each degenerate with probability
    ``rate`` (the looping or the clean text), tokens/s lognormal around ``speed``."""
    out = []
    for i in range(rounds):
        for j in range(prompts):
            bad = rng.random() < rate
            out.append({"profile": profile, "temperature": 0.7, "prompt_id": f"p{j}", "sample_index": i,
                        "seed": 1000 + i, "text": _LOOP_TEXT if bad else _CLEAN_TEXT, "error": None,
                        "finish_reason": "length" if bad else "stop", "completion_tokens": 200,
                        "latency_s": 200 / (speed * float(rng.lognormal(0.0, 0.2))),
                        "spec_verify_ct": None if profile == "baseline" else 70})
    return out


def simulate_loop_claims(rates: Sequence[float], base_rate: float, rounds: int, rng, *, prompts: int = 5,
                         alpha: float = 0.05, margin: float = 0.05) -> LoopClaimDraw:
    """One simulated mitigation table for the loop claims: a baseline (degenerate rate ``base_rate``) and one
    candidate per ``rates`` entry, ``rounds`` samples per prompt each, judged by the very code of
    ``build_document``: ``mitigate.judge_profile`` (the decision rule), ``status_of``, then
    ``ranking.familywise_loop_free``, ``rank_results`` and ``pick_best``. Returns ``before`` (indices whose
    status was ``loop-free`` before the family-wise step: the rule without multiplicity control), ``loop_free``
    (after it), ``no_loops_seen`` and ``best`` (the pick's index or None)."""
    from .mitigate import CandidateResult, judge_profile, status_of
    from .ranking import familywise_loop_free

    samples = _records("baseline", base_rate, prompts, rounds, 100.0, rng)
    for i, r in enumerate(rates):
        samples += _records(f"c{i}", r, prompts, rounds, 150.0, rng)
    rows = []
    for i in range(len(rates)):
        st = judge_profile("baseline", f"c{i}", samples, None, alpha, margin)
        rows.append(CandidateResult(name=f"c{i}", change="", source="sim", status=status_of(st.verdict, st.loops),
                                    flag_changes=1, **st.row_fields()))
    before = [i for i, r in enumerate(rows) if r.status == "loop-free"]
    familywise_loop_free(rows, alpha)
    ranked = rank_results(rows)
    best = pick_best(ranked)
    return LoopClaimDraw(before=before, loop_free=[i for i, r in enumerate(rows) if r.status == "loop-free"],
                         no_loops_seen=[i for i, r in enumerate(rows) if r.status == "no-loops-seen"],
                         best=int(best.name[1:]) if best else None)


def loop_claim_rates(rates: Sequence[float], base_rate: float, rounds: int, *, trials: int = 200, seed: int = 0,
                     prompts: int = 5, alpha: float = 0.05, margin: float = 0.05) -> dict:
    """:func:`simulate_loop_claims` over ``trials`` seeded tables. ``false_before``/``false_after``: share of
    tables where some candidate whose true excess is at least ``margin`` was called ``loop-free`` without /
    with the family-wise step (the family-wise error of the claim); ``found_before``/``found_after``: share
    where every truly clean candidate (excess 0) is ``loop-free`` (the power); ``picked``: share with a recommendation at all
    (``loop-free`` or ``no-loops-seen``); ``picked_bad``: share whose pick truly loops at least the margin
    more. The text analysis is memoized (a pure function; the same two texts recur)."""
    import functools

    from ..analysis import diagnosis

    rng = np.random.default_rng(seed)
    bad = {i for i, r in enumerate(rates) if r - base_rate >= margin - 1e-12}
    clean = {i for i, r in enumerate(rates) if r <= base_rate}
    counts = Counter()
    original = diagnosis.analyze_text
    diagnosis.analyze_text = functools.lru_cache(maxsize=16)(original)
    try:
        for _ in range(trials):
            out = simulate_loop_claims(rates, base_rate, rounds, rng, prompts=prompts, alpha=alpha, margin=margin)
            counts.update(false_before=bool(bad & set(out.before)), false_after=bool(bad & set(out.loop_free)),
                          found_before=bool(clean) and clean <= set(out.before),
                          found_after=bool(clean) and clean <= set(out.loop_free),
                          picked=out.best is not None, picked_bad=out.best in bad)
    finally:
        diagnosis.analyze_text = original
    return {"trials": trials, "rates": list(rates), "base_rate": base_rate, "rounds": rounds,
            **{k: counts[k] / trials for k in LOOP_CLAIM_COUNTS}}


def simulate_bisect(changes: int, culprit: int, bad_rate: float, rounds: int, rng, *, familywise: bool = True,
                    prompts: int = 5, alpha: float = 0.05, base_rate: float = 0.0) -> list[int]:
    """One bisect over ``changes`` flag changes of which change ``culprit`` alone makes the server loop at
    ``bad_rate`` (the baseline and every subset without it: at ``base_rate``), by the very code of ``bisect.py``:
    ``ddmin`` with each distinct subset tested once (cached) and judged by ``mitigate.judge_arm`` on
    ``rounds`` samples per prompt — at ``bisect.test_alpha`` of its test number (``familywise``), else at
    ``alpha`` (the rule before issue 31). Returns the minimal change set found (``[culprit]`` is right)."""
    from .bisect import ddmin, test_alpha
    from .mitigate import judge_arm

    base = _records("baseline", base_rate, prompts, rounds, 100.0, rng)
    cache: dict[tuple, str] = {}

    def test(subset: list[int]) -> str:
        key = tuple(sorted(subset))
        if key in cache:
            return cache[key]
        if not subset:
            cache[key] = "pass"
            return "pass"
        name = f"t{len(cache) + 1}"
        level = test_alpha(alpha, len(cache) + 1) if familywise else alpha
        samples = base + _records(name, bad_rate if culprit in subset else base_rate, prompts, rounds, 150.0, rng)
        kind = judge_arm("baseline", name, samples, None, level)[0].kind
        cache[key] = "fail" if kind == "spec-corrupts-output" else "pass" if kind == "healthy" else "unresolved"
        return cache[key]

    if test(list(range(changes))) != "fail":
        return list(range(changes))  # the bad line was not seen to corrupt: nothing bisected
    return ddmin(list(range(changes)), test)


def bisect_rates(changes: int, bad_rate: float, rounds: int, *, trials: int = 200, seed: int = 0,
                 familywise: bool = True, base_rate: float = 0.0) -> dict:
    """:func:`simulate_bisect` over ``trials`` seeded searches, the culprit drawn uniformly: ``right`` (the
    minimal set is exactly the culprit), ``wrong`` (it leaves the culprit out: a false ``fail`` misled ddmin),
    ``larger`` (it holds the culprit and more: a missed ``fail``)."""
    import functools

    from ..analysis import diagnosis

    rng = np.random.default_rng(seed)
    right = wrong = larger = 0
    original = diagnosis.analyze_text
    diagnosis.analyze_text = functools.lru_cache(maxsize=16)(original)
    try:
        for _ in range(trials):
            culprit = int(rng.integers(changes))
            found = simulate_bisect(changes, culprit, bad_rate, rounds, rng, familywise=familywise,
                                    base_rate=base_rate)
            right += found == [culprit]
            wrong += culprit not in found
            larger += culprit in found and len(found) > 1
    finally:
        diagnosis.analyze_text = original
    return {"trials": trials, "changes": changes, "bad_rate": bad_rate, "base_rate": base_rate, "rounds": rounds,
            "familywise": familywise,
            "right": right / trials, "wrong": wrong / trials, "larger": larger / trials}
