"""Coverage of mitigate's speed intervals and errors of its tie-aware ranking, by Monte Carlo over the real code.

Each trial draws per-sample tokens/s for a baseline and three loop-free candidates with known true speed
ratios and runs them through ``ranking.speed_fields``, ``ranking.rank_results`` and ``ranking.pick_best``
(:func:`mtp_remote.search.ranking_mc.ranking_error_rates`). Prints the markdown table that ``docs/metrics.md`` shows.

    .venv/bin/python bench/bench_speed_ranking_mc.py [--trials 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import time

from mtp_remote.search.ranking_mc import ranking_error_rates

#: true speed over the baseline of candidates A, B, C: 4 % apart, 13 % apart, equal
CASES = [(1.30, 1.25, 1.00), (1.30, 1.15, 1.00), (1.30, 1.30, 1.00)]
#: (samples per arm, per-sample sd of ln tokens/s, distribution, prompts, sd of a prompt's ln-speed offset)
SETTINGS = [(6, 0.25, "lognormal", 0, 0.0), (12, 0.25, "lognormal", 0, 0.0), (20, 0.25, "lognormal", 0, 0.0),
            (20, 0.10, "lognormal", 0, 0.0), (20, 0.40, "lognormal", 0, 0.0), (12, 0.25, "gamma", 0, 0.0),
            (20, 0.25, "gamma", 0, 0.0), (20, 0.10, "lognormal", 5, 0.2)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{args.trials} tables per row, baseline and 3 candidates, 95 % Welch intervals, seed {args.seed}\n")
    print("| n/arm | sd ln | speeds | true A, B, C | CI coverage | #1 wrong (point estimate) | #1 wrong, no tie mark "
          "| A and B separated |")
    print("|---:|---:|---|---|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    for n, sd, dist, prompts, psd in SETTINGS:
        for case in CASES:
            o = ranking_error_rates(case, n, sd, trials=args.trials, seed=args.seed, dist=dist, prompts=prompts,
                                    prompt_sd=psd)
            kind = dist + (f", {prompts} prompts sd {psd:g}" if prompts else "")
            wrong = "–" if case[0] == case[1] else f"{o['wrong_first']:.1%}"
            wrong_untied = "–" if case[0] == case[1] else f"{o['wrong_first_untied']:.1%}"
            print(f"| {n} | {sd:g} | {kind} | {', '.join(f'{x:g}' for x in case)} | {o['coverage']:.1%} | "
                  f"{wrong} | {wrong_untied} | {o['top_two_separated']:.1%} |")
    print(f"\n{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
