"""The nightly's false "regressed" over a month and its power, by Monte Carlo over the real regression check.

Each trial is one host's month: 10 nights of history, then 30 nights, each a summary document (the baseline
and one speculative profile; T = 0 with 5 greedy samples and T = 0.7 with 60 samples per arm, the nightly
playbook's budget) judged by ``fleet.regression.check_regressions`` against the nights before it, as
``fleet.nightly`` does. **Assumed model** (not measured on a GPU host): loops ~ Binomial(n, 2 %) in both arms;
a night's load multiplies both arms' tokens/s by one LogNormal(0, 0.15) factor, each cell's mean tokens/s
carries its own LogNormal(0, 0.03) measurement noise; the speculative arm runs 1.5x the baseline;
``--launch-sd S`` adds a per-night log-odds effect ~ N(0, S) on each arm's loop rate (a launch that loops more or
less than the arm's rate). ``--before REV``: also the rule ``check_regressions`` had at git revision REV
(e6cf190: before issue 31, alpha per night on raw tokens/s; fdd45a7: loops against the last good run alone).
Power: from night 15 on, the speculative arm loops at 15 % or runs 20 % slower.

    PYTHONPATH=. nice .venv/bin/python bench/bench_nightly_mc.py [--months 200] [--seed 0] [--launch-sd 0]
        [--before REV ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types

import numpy as np

from mtp_remote.analysis.montecarlo import launched_rates
from mtp_remote.fleet import regression

WARMUP, NIGHTS, RATE, N, SPEC_RATIO = 10, 30, 0.02, 60, 1.5


def _night(i: int, rng, *, loop_rate: float = RATE, ratio: float = SPEC_RATIO, launch_sd: float = 0.0) -> dict:
    load = rng.lognormal(0.0, 0.15)
    launched = {"baseline": float(launched_rates(np.asarray(RATE), launch_sd, rng)),
                "mtp": float(launched_rates(np.asarray(loop_rate), launch_sd, rng))}
    cells = []
    for t, n in ((0.0, 5), (0.7, N)):
        for prof, speed in (("baseline", 100.0), ("mtp", 100.0 * ratio)):
            k = int(rng.binomial(n, launched[prof] if t > 0 else 0.0))
            cells.append({"profile": prof, "temperature": t, "n": n, "loops": k, "loop_rate": k / n,
                          "accept_length": None, "tokens_per_s": speed * load * rng.lognormal(0.0, 0.03)})
    return {"run_id": f"n{i}", "cells": cells, "verdicts": [{"profile": "mtp", "kind": "healthy"}],
            "playbook": {"name": "nightly", "alpha": 0.05, "baseline": "baseline",
                         "profiles": {"baseline": {"speculative": False}, "mtp": {"speculative": True}}}}


def _as_history(doc: dict) -> dict:
    return {"run_id": doc["run_id"], "cells": {(c["profile"], c["temperature"]): c for c in doc["cells"]},
            "verdicts": {}}


def month(check, rng, *, change: str | None = None, launch_sd: float = 0.0) -> list[list[str]]:
    """The regressed labels per night of one month; ``change``: "loops" or "speed" from night 15 on."""
    hist: list[dict] = []
    out = []
    for i in range(WARMUP + NIGHTS):
        late = change is not None and i >= WARMUP + 15
        doc = _night(i, rng, loop_rate=0.15 if late and change == "loops" else RATE,
                     ratio=SPEC_RATIO * 0.8 if late and change == "speed" else SPEC_RATIO, launch_sd=launch_sd)
        if i >= WARMUP:
            out.append(list(check(doc, hist).regressed))
        hist.insert(0, _as_history(doc))
    return out


def _before(rev: str):
    """``check_regressions`` as ``main`` had it at ``rev`` (from git), for the comparison."""
    src = subprocess.run(["git", "show", f"{rev}:mtp_remote/fleet/regression.py"], capture_output=True, text=True,
                         check=True).stdout
    mod = types.ModuleType(f"mtp_remote.fleet._regression_{rev}")
    mod.__package__ = "mtp_remote.fleet"
    sys.modules[mod.__name__] = mod
    exec(compile(src, "regression_before.py", "exec"), mod.__dict__)
    return mod.check_regressions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--months", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--launch-sd", type=float, default=0.0, help="per-night log-odds effect on each arm's loops")
    ap.add_argument("--before", nargs="*", default=[], metavar="REV",
                    help="also the rule at these git revisions (e6cf190: before issue 31; fdd45a7: loops against "
                         "the last good run alone)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rules = [(f"at {rev}", _before(rev)) for rev in args.before]
    rules.append(("now: loops against the earlier nights pooled, beta-binomial where they spread; α/30 a night; "
                  "speed on the spec/baseline ratio", regression.check_regressions))
    print(f"\n**Nightly false alarms and power** ({args.months} months per row of {NIGHTS} nights after {WARMUP} of "
          f"history, launch sd {args.launch_sd:g}, seed {args.seed})\n")
    print("| rule | healthy host: some false regressed in 30 nights | of them by loops | per night | loops 2 → 15 %: "
          "found that night | within 2 nights | 20 % slower: found that night | within 2 nights |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, check in rules:
        rng = np.random.default_rng(args.seed)
        healthy = [month(check, rng, launch_sd=args.launch_sd) for _ in range(args.months)]
        loops = [month(check, rng, change="loops", launch_sd=args.launch_sd) for _ in range(args.months)]
        slow = [month(check, rng, change="speed", launch_sd=args.launch_sd) for _ in range(args.months)]
        healthy_b, loops_b, slow_b = ([[bool(x) for x in m] for m in ms] for ms in (healthy, loops, slow))
        by_loops = np.mean([any("loop_rate" in lab for night in m for lab in night) for m in healthy])
        print(f"| {name} | {np.mean([any(m) for m in healthy_b]):.1%} | {by_loops:.1%} | {np.mean(healthy_b):.2%} | "
              f"{np.mean([m[15] for m in loops_b]):.1%} | {np.mean([m[15] or m[16] for m in loops_b]):.1%} | "
              f"{np.mean([m[15] for m in slow_b]):.1%} | {np.mean([m[15] or m[16] for m in slow_b]):.1%} |",
              flush=True)
    print(f"\n({time.perf_counter() - t0:.0f} s on this machine)")


if __name__ == "__main__":
    main()
