"""The nightly's false "regressed" over a month and its power, by Monte Carlo over the real regression check.

Each trial is one host's month: 10 nights of history, then 30 nights, each a summary document (the baseline
and one speculative profile; T = 0 with 5 greedy samples and T = 0.7 with 60 samples per arm, the nightly
playbook's budget) judged by ``fleet.regression.check_regressions`` against the nights before it, as
``fleet.nightly`` does. **Assumed model** (not measured on a GPU host): loops ~ Binomial(n, 2 %) in both arms;
a night's load multiplies both arms' tokens/s by one LogNormal(0, 0.15) factor, each cell's mean tokens/s
carries its own LogNormal(0, 0.03) measurement noise; the speculative arm runs 1.5x the baseline. "Before" is
the rule of ``main`` before issue 31 (alpha per night, raw tokens/s of every cell), loaded from git when
``--before`` is given. Power: from night 15 on, the speculative arm loops at 15 % or runs 20 % slower.

    PYTHONPATH=. nice .venv/bin/python bench/bench_nightly_mc.py [--months 200] [--seed 0] [--before]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types

import numpy as np

from mtp_remote.fleet import regression

WARMUP, NIGHTS, RATE, N, SPEC_RATIO = 10, 30, 0.02, 60, 1.5


def _night(i: int, rng, *, loop_rate: float = RATE, ratio: float = SPEC_RATIO) -> dict:
    load = rng.lognormal(0.0, 0.15)
    cells = []
    for t, n in ((0.0, 5), (0.7, N)):
        for prof, rate, speed in (("baseline", RATE, 100.0), ("mtp", loop_rate, 100.0 * ratio)):
            k = int(rng.binomial(n, rate if t > 0 else 0.0))
            cells.append({"profile": prof, "temperature": t, "n": n, "loops": k, "loop_rate": k / n,
                          "accept_length": None, "tokens_per_s": speed * load * rng.lognormal(0.0, 0.03)})
    return {"run_id": f"n{i}", "cells": cells, "verdicts": [{"profile": "mtp", "kind": "healthy"}],
            "playbook": {"name": "nightly", "alpha": 0.05, "baseline": "baseline",
                         "profiles": {"baseline": {"speculative": False}, "mtp": {"speculative": True}}}}


def _as_history(doc: dict) -> dict:
    return {"run_id": doc["run_id"], "cells": {(c["profile"], c["temperature"]): c for c in doc["cells"]},
            "verdicts": {}}


def month(check, rng, *, change: str | None = None) -> list[bool]:
    """Regressed (any check) per night of one month; ``change``: "loops" or "speed" from night 15 on."""
    hist: list[dict] = []
    out = []
    for i in range(WARMUP + NIGHTS):
        late = change is not None and i >= WARMUP + 15
        doc = _night(i, rng, loop_rate=0.15 if late and change == "loops" else RATE,
                     ratio=SPEC_RATIO * 0.8 if late and change == "speed" else SPEC_RATIO)
        if i >= WARMUP:
            out.append(bool(check(doc, hist).regressed))
        hist.insert(0, _as_history(doc))
    return out


def _before():
    """``check_regressions`` as ``main`` had it before issue 31 (from git), for the comparison."""
    src = subprocess.run(["git", "show", "e6cf190:mtp_remote/fleet/regression.py"], capture_output=True, text=True,
                         check=True).stdout
    mod = types.ModuleType("mtp_remote.fleet._regression_before")
    mod.__package__ = "mtp_remote.fleet"
    sys.modules[mod.__name__] = mod
    exec(compile(src, "regression_before.py", "exec"), mod.__dict__)
    return mod.check_regressions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--months", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--before", action="store_true", help="also the rule before issue 31 (needs git)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rules = [("now: alpha/30 a night, speed on the spec/baseline ratio", regression.check_regressions)]
    if args.before:
        rules.insert(0, ("before: alpha a night, raw tokens/s", _before()))
    print(f"\n**Nightly false alarms and power** ({args.months} months per row of {NIGHTS} nights after {WARMUP} of "
          f"history, seed {args.seed})\n")
    print("| rule | healthy host: some false regressed in 30 nights | per night | loops 2 → 15 %: found that "
          "night | within 2 nights | 20 % slower: found that night | within 2 nights |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, check in rules:
        rng = np.random.default_rng(args.seed)
        healthy = [month(check, rng) for _ in range(args.months)]
        loops = [month(check, rng, change="loops") for _ in range(args.months)]
        slow = [month(check, rng, change="speed") for _ in range(args.months)]
        print(f"| {name} | {np.mean([any(m) for m in healthy]):.1%} | {np.mean(healthy):.2%} | "
              f"{np.mean([m[15] for m in loops]):.1%} | {np.mean([m[15] or m[16] for m in loops]):.1%} | "
              f"{np.mean([m[15] for m in slow]):.1%} | {np.mean([m[15] or m[16] for m in slow]):.1%} |", flush=True)
    print(f"\n({time.perf_counter() - t0:.0f} s on this machine)")


if __name__ == "__main__":
    main()
