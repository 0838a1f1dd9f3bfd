"""The operating characteristic of the verdict rule (issue 20), measured over the real code path.

Every row plays whole runs as the runner drives them (``mtp_remote.analysis.montecarlo``: baseline first,
rounds of one sample per prompt, the runner's early-stopping call after each round, ``verdict.judge_all``)
on the nightly design (5 prompts, budget 12 per prompt, early stopping, alpha 0.05, margin 5 points,
``compare.resumes`` 3). Tables (markdown, for ``docs/metrics.md``):

1. family-wise false ``spec-corrupts-output`` over a chain of up to 3 resumes, each following the tool's
   ``next:`` advice while the verdict is inconclusive — this design vs re-planning every resume;
2. P(healthy) when the loop excess is at (or above) the margin, single run and chain;
3. power at 5/10/20 points of loop excess;
4. the KL test's false alarm and power: per-sample k3 decoded by the sim in process (``bench/sim_pools``),
   healthy with numeric noise, a harmless 1.25x kernel difference, state_leak at 1 and 3 speculative steps;
5. what the rule assumes: the false alarm under a per-launch log-odds effect;
6. the nightly bar: state_leak at ``--speculative-num-steps 1`` decoded by the sim in process, nightly
   playbook (KL probe and expected answers on): how often it is ``healthy``.

    PYTHONPATH=. .venv/bin/python bench/bench_verdicts.py [--trials 400] [--sim-trials 20]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.montecarlo import _CLEAN_TEXT, _LOOP_TEXT, simulate_chain, simulate_run
from mtp_remote.analysis.stopping import Design

NIGHTLY = Design(rounds=12, family=1, sequential=True, resumes=3)
NIGHTLY_LOSSLESS = replace(NIGHTLY, family=2)  # + the lossless member (KL probe, answers)


def chains(rates: dict, trials: int, seed: int, *, replan: bool = False, design: Design = NIGHTLY,
           launch_sd: float = 0.0, aa: str | None = None) -> list[list]:
    """``trials`` chains of up to 3 resumes (each stops once nothing is inconclusive), one seeded generator."""
    rng = np.random.default_rng(seed)
    metrics = (analyze_text(_LOOP_TEXT), analyze_text(_CLEAN_TEXT))
    return [simulate_chain(rates, design, resumes=3, rng=rng, metrics=metrics, replan=replan, launch_sd=launch_sd,
                           aa=aa) for _ in range(trials)]


def launch_effect(trials: int, seed: int) -> None:
    print(f"\n**Launch effect** (each run relaunches every arm with a log-odds effect ~ N(0, sd) on its loop rate; "
          f"{trials} chains per row, seed {seed}; without an A/A arm, and with one and the A/A contrast required)\n")
    print("| loop rates (base, spec) | launch sd | arms | spec-corrupts-output, first run | ≤ 3 resumes | "
          "samples/arm, first run |")
    print("|---|---:|---|---:|---:|---:|")
    cases = [((0.10, 0.10), sd) for sd in (0.0, 0.25, 0.5)] + [((0.0, 0.10), 0.0), ((0.0, 0.20), 0.0),
                                                                ((0.02, 0.80), 0.0), ((0.0, 0.10), 0.5)]
    for (base, spec), sd in cases:
        for aa in (None, "baseline-aa"):
            rates = {"baseline": base, **({aa: base} if aa else {}), "mtp": spec}
            cs = chains(rates, trials, seed, launch_sd=sd, aa=aa)
            arms = "baseline, A/A, mtp (contrast)" if aa else "baseline, mtp"
            print(f"| {base:.0%}, {spec:.0%} | {sd:g} | {arms} | {upto(cs, 'spec-corrupts-output', 1):.1%} | "
                  f"{upto(cs, 'spec-corrupts-output', 4):.1%} | {np.mean([c[0].samples['mtp'] for c in cs]):.1f} |",
                  flush=True)


def upto(chain_list: list[list], kind: str, stages: int) -> float:
    """Share of chains in which some run among the first ``stages`` called the profile ``kind``."""
    return float(np.mean([any(o.verdicts["mtp"] == kind for o in c[:stages]) for c in chain_list]))


def chain_fwer(trials: int, seed: int) -> None:
    print("\n**Family-wise false alarm over a chain of resumes** (equal loop rates; share of chains in which some "
          f"run called the profile `spec-corrupts-output`; {trials} chains per row, each resumed to the design's "
          f"next look while inconclusive, seed {seed})\n")
    print("| base = spec | rule | first run | ≤ 1 resume | ≤ 2 resumes | ≤ 3 resumes | runs per chain |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for rate in (0.05, 0.10, 0.20):
        for replan in (True, False):
            cs = chains({"baseline": rate, "mtp": rate}, trials, seed, replan=replan)
            name = "re-planned each resume (before)" if replan else "fixed design (now)"
            print(f"| {rate:.0%} | {name} | " + " | ".join(f"{upto(cs, 'spec-corrupts-output', s):.1%}"
                                                         for s in range(1, 5))
                  + f" | {np.mean([len(c) for c in cs]):.2f} |", flush=True)


def healthy_at_margin(trials: int, seed: int) -> None:
    print(f"\n**P(healthy) with the loop excess at or above the margin** ({trials} chains per row, seed {seed})\n")
    print("| base | spec | excess | healthy, first run | healthy in a chain of ≤ 3 resumes |")
    print("|---:|---:|---:|---:|---:|")
    for base, spec in ((0.0, 0.05), (0.05, 0.10), (0.0, 0.07), (0.0, 0.10)):
        cs = chains({"baseline": base, "mtp": spec}, trials, seed)
        print(f"| {base:.0%} | {spec:.0%} | {spec - base:.0%} | {upto(cs, 'healthy', 1):.1%} | "
              f"{upto(cs, 'healthy', 4):.1%} |", flush=True)


def power(trials: int, seed: int) -> None:
    print(f"\n**Power** (share of chains called `spec-corrupts-output`; {trials} chains per row, seed {seed}; "
          "family 1: loop test alone, 2: with the lossless member of a playbook with T = 0, KL or answers)\n")
    print("| base | spec | family | first run | after ≤ 3 resumes | samples/arm, first run |")
    print("|---:|---:|---:|---:|---:|---:|")
    for family in (1, 2):
        for spec in (0.05, 0.10, 0.20):
            cs = chains({"baseline": 0.0, "mtp": spec}, trials, seed, design=replace(NIGHTLY, family=family))
            n1 = np.mean([c[0].samples["mtp"] for c in cs])
            print(f"| 0% | {spec:.0%} | {family} | {upto(cs, 'spec-corrupts-output', 1):.1%} | "
                  f"{upto(cs, 'spec-corrupts-output', 4):.1%} | {n1:.1f} |", flush=True)


def kl_rows(pool_n: int, trials: int, seed: int) -> None:
    from bench.sim_pools import Arm, SimDecoder

    dec = SimDecoder(max_new=2048)
    arms = {"baseline (noise 0.02)": Arm(0, False, 0.02), "healthy MTP 3 steps (noise 0.02)": Arm(3, False, 0.02),
            "state_leak, 1 step": Arm(1, True, 0.02), "state_leak, 3 steps": Arm(3, True, 0.02)}
    t0 = time.perf_counter()
    pools = {name: np.array([dec.probe(j, arm, 5000 + i) for i in range(pool_n) for j in range(5)])
             for name, arm in arms.items()}
    for times in (1.25, 1.5, 2.0, 3.0):  # a healthy verify kernel whose gap is this multiple of the floor's
        harmless = pools["healthy MTP 3 steps (noise 0.02)"].copy()
        harmless[:, :2] *= times
        pools[f"harmless {times:g}x kernel difference"] = harmless
    rng = np.random.default_rng(seed)
    clean = analyze_text(_CLEAN_TEXT)
    print(f"\n**KL test** (per-sample k3 at T = 1, 2048 tokens max, decoded by the sim in process: "
          f"{pool_n * 5} samples per arm, resampled; {trials} tests per cell through `verdict.judge_all`, "
          f"alpha 0.05, seed {seed}; {time.perf_counter() - t0:.0f} s to decode)\n")
    print("| speculative arm | mean k3 over all tokens (nats/token) | flagged, 20 per arm | flagged, 60 per arm |")
    print("|---|---:|---:|---:|")
    from mtp_remote.analysis.cells import SampleObs, summarize_cell
    from mtp_remote.analysis.verdict import judge_all

    def obs(profile, rows):
        return [SampleObs(profile, 0.7, f"p{i % 5}", i // 5, i, clean, "stop", 200, 1.0, None,
                          kl_k3=float(m), kl_max_k3=float(x), kl_tokens=int(t)) for i, (m, x, t) in enumerate(rows)]

    floor = pools["baseline (noise 0.02)"]
    for name, pool in pools.items():
        if name.startswith("baseline"):
            continue
        shares = []
        for n in (20, 60):
            hits = 0
            for _ in range(trials):
                b = obs("baseline", floor[rng.integers(len(floor), size=n)])
                s = obs("mtp", pool[rng.integers(len(pool), size=n)])
                v = judge_all({"mtp": ([summarize_cell("mtp", 0.7, True, s)], s)},
                              [summarize_cell("baseline", 0.7, False, b)], b, design=Design(rounds=n // 5))["mtp"]
                hits += bool(v.kl_probe and v.kl_probe["flagged"])
            shares.append(hits / trials)
        tw = float((pool[:, 0] * pool[:, 2]).sum() / pool[:, 2].sum())
        print(f"| {name} | {tw:.2g} | {shares[0]:.1%} | {shares[1]:.1%} |", flush=True)


def nightly_bar(trials: int, seed: int) -> None:
    from bench.sim_pools import Arm, SimDecoder

    dec = SimDecoder(max_new=2048)
    arms = {"baseline": Arm(0, False, 0.02), "mtp": Arm(1, True, 0.02)}
    cache: dict = {}

    def draw(profile, j, i, rng):
        key = (profile, j, i, int(rng.integers(1 << 30)))
        if key not in cache:
            cache[key] = dec.sample(j, arms[profile], key[3])
        return cache[key]

    t0 = time.perf_counter()
    kinds: dict[str, int] = {}
    used = []
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        out = simulate_run({"baseline": None, "mtp": None}, NIGHTLY_LOSSLESS, rng=rng, draw=draw)
        kinds[out.verdicts["mtp"]] = kinds.get(out.verdicts["mtp"], 0) + 1
        used.append(out.samples["mtp"])
    print(f"\n**Nightly bar**: state_leak at `--speculative-num-steps 1` (numeric_noise 0.02), nightly playbook "
          f"with the KL probe and expected answers, decoded by the sim in process: {trials} runs, seed {seed}, "
          f"{time.perf_counter() - t0:.0f} s\n")
    print("| verdict | runs |")
    print("|---|---:|")
    for k, v in sorted(kinds.items()):
        print(f"| {k} | {v}/{trials} |")
    print(f"\n(samples per arm: mean {np.mean(used):.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--kl-trials", type=int, default=400)
    ap.add_argument("--sim-trials", type=int, default=20)
    ap.add_argument("--pool", type=int, default=40, help="sim samples per prompt and arm for the KL table")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="fwer,healthy,power,launch,kl,nightly")
    args = ap.parse_args()
    t0 = time.perf_counter()
    parts = args.only.split(",")
    if "fwer" in parts:
        chain_fwer(args.trials, args.seed)
    if "healthy" in parts:
        healthy_at_margin(args.trials, args.seed)
    if "power" in parts:
        power(args.trials, args.seed)
    if "launch" in parts:
        launch_effect(args.trials, args.seed)
    if "kl" in parts:
        kl_rows(args.pool, args.kl_trials, args.seed)
    if "nightly" in parts:
        nightly_bar(args.sim_trials, args.seed)
    print(f"\n({time.perf_counter() - t0:.0f} s on this machine)")


if __name__ == "__main__":
    main()
