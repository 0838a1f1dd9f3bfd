"""Monte Carlo of the mitigation ranking (:func:`ranking_error_rates`): seeded per-sample speeds through the very
functions of ``ranking.py``, on :class:`~mtp_remote.search.mitigate.CandidateResult` rows: interval coverage and
how often a truly slower candidate comes first without a tie mark; ``docs/metrics.md`` has its figures."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..analysis.speed import LogSpeed
from .mitigate import CandidateResult
from .ranking import SPEED_CONFIDENCE, pick_best, rank_results, speed_fields


def simulate_ranking(true_ratios: Sequence[float], n: int, sigma: float, rng, *, n_base: int | None = None,
                     dist: str = "lognormal", prompts: int = 0, prompt_sd: float = 0.0,
                     confidence: float = SPEED_CONFIDENCE) -> dict:
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
        rows.append(CandidateResult(name=f"c{i}", change="", source="sim", status="loop-free", flag_changes=1,
                                    log_speed=ls.to_dict(), base_log_speed=base.to_dict(),
                                    **{k: v for k, v in speed_fields(ls, base, None, confidence).items()
                                       if k in ("speed_vs_baseline", "speed_ci")}))
    ranked = rank_results(rows, confidence=confidence)
    idx = {r.name: int(r.name[1:]) for r in rows}
    return {"covered": [r.speed_ci is not None and r.speed_ci[0] <= t <= r.speed_ci[1]
                        for r, t in zip(rows, true_ratios)],
            "first": idx[ranked[0].name], "tied": [idx[r.name] for r in ranked if r.tied_with],
            "best": idx[pick_best(ranked).name]}


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
        if second is not None and out["first"] in (fastest, second):
            other = second if out["first"] == fastest else fastest
            separated += other not in out["tied"]
        cov += sum(out["covered"])
        covn += len(out["covered"])
        if out["first"] != fastest and true_ratios[out["first"]] < true_ratios[fastest]:
            wrong += 1
            wrong_untied += fastest not in out["tied"]
        tied_slower += any(i != fastest and true_ratios[i] < true_ratios[fastest] for i in out["tied"]
                           ) if out["first"] == fastest else 0
    return {"trials": trials, "n": n, "sigma": sigma, "dist": dist, "true_ratios": list(true_ratios),
            "coverage": cov / covn, "wrong_first": wrong / trials, "wrong_first_untied": wrong_untied / trials,
            "fastest_with_slower_tied": tied_slower / trials, "top_two_separated": separated / trials,
            "prompts": prompts, "prompt_sd": prompt_sd}
