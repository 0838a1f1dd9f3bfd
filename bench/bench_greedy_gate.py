"""The greedy gate's false alarm on a healthy host with noisy kernels (issue 31), over the real decision code.

Each trial builds one run of the field design as the runner stores it — 5 greedy prompts (one sample each)
and 80 clean samples per arm at T = 0.7 (16 per prompt: the loop excess is bounded below the margin, so only
the lossless evidence can keep the profile from ``healthy``) for the baseline, its A/A relaunch and a
*healthy* speculative arm — measures the floors with ``lossless.measure_calibration`` and judges the arm with
``verdict.judge_all``. Kernel noise model (an assumption, stated in ``docs/metrics.md``): the baseline's top-2
logprob margin at each of 256 greedy tokens ~ Exponential(mean 1.5 nats); another launch (the A/A arm, or the
speculative verify path) sees that margin plus N(0, 2 x noise) and its greedy output diverges at the first token
where it drops below 0. The speculative arm is exactly as noisy as the A/A arm: every verdict other than
``healthy`` is a false alarm.

The second table (``--greedy-only``) is the greedy-only plan (no temperature above 0: the real CPU hosts),
where ``healthy`` rests on the greedy bound (``lossless.greedy_bound``): N distinct prompts, one greedy sample
each, with the A/A arm; the speculative arm is as noisy as the A/A arm and, on a corrupt host, diverges on top
of that at a random token of a fraction ``rate`` of its prompts (where the baseline's margin is not a near tie).
``healthy`` at rate = margin is a false ``healthy`` (must stay under alpha); at rate 0 it is the power.

    PYTHONPATH=. .venv/bin/python bench/bench_greedy_gate.py [--trials 400] [--noise 0,0.05,0.1] [--seed 0]
    PYTHONPATH=. .venv/bin/python bench/bench_greedy_gate.py --greedy-only [--prompts 29,59] [--rates 0,0.1] [--tokens 16,256]
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from bench.mc_cli import Timed, csv_of, mc_parser
from mtp_remote.analysis.cells import SampleObs, summarize_cell
from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.lossless import measure_calibration
from mtp_remote.analysis.montecarlo import _CLEAN_TEXT
from mtp_remote.analysis.stopping import Design
from mtp_remote.analysis.verdict import judge_all

PROMPTS, TOKENS, ROUNDS, MARGIN_MEAN = 5, 256, 16, 1.5
DESIGN = Design(rounds=ROUNDS, family=2)  # one loop cell + the lossless member, one look at the end
CLEAN = analyze_text(_CLEAN_TEXT)


def _arm(profile: str, margins: np.ndarray, noise: float, rng: np.random.Generator, *,
         latency: float) -> list[SampleObs]:
    """One arm's samples: greedy outputs (the baseline's, with its top-2 ``margins``; another arm's diverge
    where its noisy margin flips) and clean T = 0.7 samples."""
    out = []
    baseline = profile == "baseline"
    for j in range(PROMPTS):
        ids = list(range(TOKENS))
        m = list(map(float, margins[j])) if baseline else None
        if not baseline and noise > 0:
            flips = np.flatnonzero(margins[j] + rng.normal(0.0, 2 * noise, TOKENS) < 0)
            if flips.size:
                ids = ids[: flips[0]] + [10**6] * (TOKENS - flips[0])
        out.append(SampleObs(profile, 0.0, f"p{j}", 0, None, CLEAN, "stop", TOKENS, 2.0, None, output_ids=ids,
                             top2_margins=m))
    speculative = not profile.startswith("baseline")
    for i in range(ROUNDS):
        out += [SampleObs(profile, 0.7, f"p{j}", i, 1000 + i, CLEAN, "stop", 200, latency,
                          60 if speculative else None) for j in range(PROMPTS)]
    return out


def _greedy_arm(profile: str, margins: np.ndarray, noise: float, rng: np.random.Generator,
                rate: float = 0.0) -> list[SampleObs]:
    """One arm of a greedy-only run: one greedy sample per prompt (rows of ``margins``), the baseline's output
    carrying its top-2 ``margins``; another arm diverges where its noisy margin flips and, with probability
    ``rate`` per prompt, at a uniformly drawn token whose margin is above 0.5 nats (a corrupt verify step)."""
    out = []
    tokens = margins.shape[1]
    for j, row in enumerate(margins):
        ids = list(range(tokens))
        at = []
        if profile != "baseline" and noise > 0:
            at += list(np.flatnonzero(row + rng.normal(0.0, 2 * noise, tokens) < 0)[:1])
        if rate and rng.random() < rate:
            at.append(int(rng.choice(np.flatnonzero(row > 0.5))))
        if at:
            ids = ids[: min(at)] + [10**6] * (tokens - min(at))
        verify = None if profile.startswith("baseline") else max(1, tokens // 3)  # acceptance length 3
        out.append(SampleObs(profile, 0.0, f"p{j}", 0, None, CLEAN, "stop", tokens, 1.0, verify, output_ids=ids,
                             top2_margins=list(map(float, row)) if profile == "baseline" else None))
    return out


def trial_greedy_only(noise: float, prompts: int, rate: float, rng: np.random.Generator,
                      design: Design = Design(rounds=1, family=1), tokens: int = TOKENS) -> str:
    """The verdict on one greedy-only run with the A/A arm (``design``: ``diagnosis.design_of``'s for one
    speculative profile and temperatures [0]: one look, the lossless member alone in the family)."""
    margins = rng.exponential(MARGIN_MEAN, (prompts, tokens))
    base = _greedy_arm("baseline", margins, noise, rng)
    aa = _greedy_arm("baseline-aa", margins, noise, rng)
    spec = _greedy_arm("mtp", margins, noise, rng, rate)
    cal = measure_calibration(base, aa)
    return judge_all({"mtp": ([summarize_cell("mtp", 0.0, True, spec)], spec)},
                     [summarize_cell("baseline", 0.0, False, base)], base, design=design, calibration=cal)["mtp"].kind


def greedy_only_rows(trials: int, noises: list[float], prompts: list[int], rates: list[float], seed: int,
                     tokens: list[int] = (TOKENS,)) -> None:
    """Print the greedy-only table: P(verdict) per (kernel noise, greedy tokens, prompts, divergence rate)."""
    margin = Design().greedy_margin
    print(f"\n**Greedy-only plan: the greedy bound** ({trials} runs per row, A/A arm, margins ~ Exp(mean {MARGIN_MEAN} nats), greedy margin {margin:.0%}, alpha 0.05, seed {seed})\n")
    print("| kernel noise (nats) | greedy tokens | prompts | corrupt divergence rate | healthy | inconclusive | "
          "spec-corrupts-output |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for noise in noises:
        for k in tokens:
            for n in prompts:
                for rate in rates:
                    rng = np.random.default_rng(seed)
                    c = Counter(trial_greedy_only(noise, n, rate, rng, tokens=k) for _ in range(trials))
                    print(f"| {noise:g} | {k} | {n} | {rate:.0%} | {c['healthy'] / trials:.1%} | "
                          f"{c['inconclusive'] / trials:.1%} | {c['spec-corrupts-output'] / trials:.1%} |", flush=True)


def trial(noise: float, rng: np.random.Generator) -> tuple[str, str]:
    """(verdict with the A/A arm, verdict without it) on one healthy host."""
    margins = rng.exponential(MARGIN_MEAN, (PROMPTS, TOKENS))
    base = _arm("baseline", margins, noise, rng, latency=2.0)
    aa = _arm("baseline-aa", margins, noise, rng, latency=2.0)
    spec = _arm("mtp", margins, noise, rng, latency=1.0)
    cells = {t: [summarize_cell("baseline", t, False, [s for s in base if s.temperature == t])] for t in (0.0, 0.7)}
    base_cells = cells[0.0] + cells[0.7]
    spec_cells = [summarize_cell("mtp", t, True, [s for s in spec if s.temperature == t]) for t in (0.0, 0.7)]
    cal = measure_calibration(base, aa)
    with_aa = judge_all({"mtp": (spec_cells, spec)}, base_cells, base, design=DESIGN, calibration=cal)["mtp"]
    without = judge_all({"mtp": (spec_cells, spec)}, base_cells, base, design=DESIGN)["mtp"]
    return with_aa.kind, without.kind


def main() -> None:
    ap = mc_parser(__doc__, trials=400)
    ap.add_argument("--noise", type=csv_of(float), default=[0, 0.05, 0.1],
                    help="kernel noise levels (nats), comma-separated")
    ap.add_argument("--greedy-only", action="store_true", help="the greedy-only plan's table (the greedy bound)")
    ap.add_argument("--prompts", type=csv_of(int), default=[29, 59],
                    help="greedy-only: distinct prompts per run, comma-separated")
    ap.add_argument("--rates", type=csv_of(float), default=[0, 0.1],
                    help="greedy-only: corrupt divergence rates, comma-separated")
    ap.add_argument("--tokens", type=csv_of(int), default=[16, 256],
                    help="greedy-only: greedy tokens per output, comma-separated")
    args = ap.parse_args()
    with Timed():
        if args.greedy_only:
            greedy_only_rows(args.trials, args.noise, args.prompts, args.rates, args.seed, args.tokens)
        else:
            gate_table(args.trials, args.noise, args.seed)


def gate_table(trials: int, noises: list[float], seed: int) -> None:
    """The greedy gate on a healthy host, with and without the A/A arm, per kernel noise level."""
    print(f"\n**Greedy gate on a healthy host** ({trials} runs per row, 5 greedy prompts x {TOKENS} tokens, "
          f"margins ~ Exp(mean {MARGIN_MEAN} nats), 80 clean samples per arm at T = 0.7, alpha 0.05, "
          f"seed {seed})\n")
    print("| kernel noise (nats) | plan | healthy | inconclusive | spec-corrupts-output |")
    print("|---:|---|---:|---:|---:|")
    for noise in noises:
        rng = np.random.default_rng(seed)
        kinds = [trial(noise, rng) for _ in range(trials)]
        for col, plan in ((0, "with the A/A arm"), (1, "no A/A arm")):
            c = Counter(k[col] for k in kinds)
            print(f"| {noise:g} | {plan} | {c['healthy'] / trials:.1%} | "
                  f"{c['inconclusive'] / trials:.1%} | {c['spec-corrupts-output'] / trials:.1%} |",
                  flush=True)


if __name__ == "__main__":
    main()
