"""Error rates of the decision rule, measured by Monte Carlo over the real code path.

Each trial plays a run as the runner drives it (baseline first, rounds of one sample per prompt, the
runner's early-stopping call after each round) and judges it with ``verdict.judge_all``
(``mtp_remote.analysis.montecarlo``). Prints the markdown table that ``docs/metrics.md`` shows: for each
design, the share of runs whose speculative profile(s) got each verdict and the mean samples per arm.

    .venv/bin/python bench/bench_verdict_mc.py [--trials 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from mtp_remote.analysis.montecarlo import error_rates
from mtp_remote.analysis.stopping import Design

# compare.resumes 3 (the default: the first run leaves 20 % of alpha to resumes); the family counts one lossless
# member per speculative profile (the playbooks have a T = 0 cell; nightly also the KL probe and answers)
DESIGNS = {
    "field (4/prompt, fixed)": (Design(rounds=4, family=2, resumes=3), 1),
    "8/prompt, sequential": (Design(rounds=8, family=2, sequential=True, resumes=3), 1),
    "nightly (12/prompt, sequential)": (Design(rounds=12, family=2, sequential=True, resumes=3), 1),
    "nightly, 2 spec profiles": (Design(rounds=12, family=4, sequential=True, resumes=3), 2),
}
# (baseline rate, spec rate): equal rates measure type I; a 0 baseline with 10/30/80 % spec loops, power
CASES = [(0.0, 0.0), (0.05, 0.05), (0.3, 0.3), (0.0, 0.10), (0.0, 0.30), (0.0, 0.80), (0.25, 0.55)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"{args.trials} trials per row, 5 prompts, alpha 0.05, margin 5 points, seed {args.seed}\n")
    print("| design | base | spec | corrupts | healthy | base-degen. | inconclusive | samples/arm (spec, base) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    for name, (design, n_spec) in DESIGNS.items():
        for base, spec in CASES:
            rates = {"baseline": base} | {f"mtp{i}": spec for i in range(n_spec)}
            r = error_rates(rates, design, trials=args.trials, seed=args.seed)
            k = r.kinds["mtp0"]
            used = sum(r.mean_samples[f"mtp{i}"] for i in range(n_spec)) / n_spec
            corrupt = r.any_corrupt if spec == base else k.get("spec-corrupts-output", 0.0)
            print(f"| {name} | {base:.0%} | {spec:.0%} | {corrupt:.1%} | {k.get('healthy', 0):.1%} | "
                  f"{k.get('base-model-degenerates', 0):.1%} | {k.get('inconclusive', 0):.1%} | "
                  f"{used:.1f}, {r.mean_samples['baseline']:.1f} |", flush=True)
    print(f"\n({time.perf_counter() - t0:.1f} s; 'corrupts' under equal rates = any speculative profile wrongly "
          f"called spec-corrupts-output: the type I error of the run)")


if __name__ == "__main__":
    main()
