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

    PYTHONPATH=. .venv/bin/python bench/bench_greedy_gate.py [--trials 400] [--noise 0,0.05,0.1] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--noise", default="0,0.05,0.1", help="kernel noise levels (nats), comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"\n**Greedy gate on a healthy host** ({args.trials} runs per row, 5 greedy prompts x {TOKENS} tokens, "
          f"margins ~ Exp(mean {MARGIN_MEAN} nats), 80 clean samples per arm at T = 0.7, alpha 0.05, "
          f"seed {args.seed})\n")
    print("| kernel noise (nats) | plan | healthy | inconclusive | spec-corrupts-output |")
    print("|---:|---|---:|---:|---:|")
    for noise in (float(x) for x in args.noise.split(",")):
        rng = np.random.default_rng(args.seed)
        kinds = [trial(noise, rng) for _ in range(args.trials)]
        for col, plan in ((0, "with the A/A arm"), (1, "no A/A arm")):
            c = Counter(k[col] for k in kinds)
            print(f"| {noise:g} | {plan} | {c['healthy'] / args.trials:.1%} | "
                  f"{c['inconclusive'] / args.trials:.1%} | {c['spec-corrupts-output'] / args.trials:.1%} |",
                  flush=True)
    print(f"\n({time.perf_counter() - t0:.0f} s on this machine)")


if __name__ == "__main__":
    main()
