"""GPU-minutes to a verdict with the field playbook, by Monte Carlo over the real decision code (issue 31).

Each trial is a chain of runs as an operator follows the tool's own ``next:`` advice
(:func:`mtp_remote.analysis.montecarlo.simulate_chain`: the runner's sampling and early-stopping calls,
``judge_all`` after each run, ``--resume --samples`` the design's next look while the verdict is
``inconclusive`` — the look its ``next:`` line names, the first with the samples the verdict says would
decide — at most ``compare.resumes`` resumes). The design is the shipped playbook's own
(``diagnosis.design_of(playbooks/diagnose-mtp.yaml)``): as shipped, with ``early_stop: true``, and with the
nightly playbook's 12 samples per prompt and early stopping. The samples
each arm took become GPU-minutes under the assumptions printed above the table (the field's hardware: a
Qwen3.6-27B-class model at TP size 2); only the loop test decides here (Bernoulli loop outcomes at the given
rates), so greedy divergence and the KL probe, which can end a corrupt run sooner, are not counted.

    PYTHONPATH=. nice .venv/bin/python bench/bench_gpu_minutes.py [--trials 300] [--seed 0]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.mc_cli import Timed, mc_parser
from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.diagnosis import design_of
from mtp_remote.analysis.montecarlo import _CLEAN_TEXT, _LOOP_TEXT, simulate_chain
from mtp_remote.config.playbook import load_playbook

ROOT = Path(__file__).resolve().parent.parent
PLAYBOOK = ROOT / "playbooks" / "diagnose-mtp.yaml"
NIGHTLY = ROOT / "playbooks" / "nightly.yaml"
#: (name, base loop rate, speculative loop rate) at T = 0.7
HOSTS = [("healthy, no loops", 0.0, 0.0), ("healthy, 2 % loops in both arms", 0.02, 0.02),
         ("MTP loops 3 %", 0.0, 0.03), ("MTP loops 10 %", 0.0, 0.10), ("MTP loops 80 %", 0.0, 0.80)]


@dataclass(frozen=True)
class Cost:
    """What a sample and a launch cost on the field's hardware (stated, not measured here)."""

    tp_size: int = 2               # GPUs a server holds (--tp-size 2)
    tokens_per_s: float = 35.0     # per request, both arms (the field's 30-40 tok/s; MTP's speed-up not credited)
    in_flight: int = 16            # requests in flight per arm (--max-running-requests 16, the playbook's default)
    loop_tokens: int = 2048        # a looping sample runs to max_tokens
    clean_tokens: int = 600        # an answer with its reasoning block
    launch_s: float = 240.0        # launch to ready (weights load, CUDA graphs), each arm each run
    greedy_prompts: int = 5        # the T = 0 cell: one greedy sample per prompt per arm, first run only

    def arm_s(self, samples: int, rate: float, *, greedy: bool) -> float:
        """Seconds one arm's server runs in one run: its launch, then its samples' tokens decoded
        ``in_flight`` at a time (``samples`` at T = 0.7 at loop rate ``rate``, plus the greedy cell)."""
        n = samples + (self.greedy_prompts if greedy else 0)
        if n == 0:
            return 0.0
        tokens = n * (rate * self.loop_tokens + (1 - rate) * self.clean_tokens)
        return self.launch_s + tokens / (self.tokens_per_s * min(self.in_flight, n))


def chain_cost(outcomes, rates: dict[str, float], cost: Cost) -> float:
    """GPU-minutes of one chain: each run launches the arms that take new samples (the first run every arm:
    the baseline, its A/A relaunch with ``compare.calibration``, the speculative profile)."""
    seconds, before = 0.0, Counter()
    for i, out in enumerate(outcomes):
        for arm, n in out.samples.items():
            seconds += cost.arm_s(n - before[arm], rates[arm], greedy=i == 0)
        before = Counter(out.samples)
    return seconds / 60 * cost.tp_size


def table(trials: int, seed: int, cost: Cost) -> None:
    pb = load_playbook(PLAYBOOK)
    shipped = design_of(pb, 1)
    nightly = design_of(load_playbook(NIGHTLY), 1)
    designs = [("as shipped", shipped), ("early_stop: true", replace(shipped, sequential=True)),
               (f"samples: {nightly.rounds}, early_stop: true (the nightly's sizing)",
                replace(shipped, rounds=nightly.rounds, sequential=True))]
    aa = f"{pb.baseline}-aa" if pb.compare.calibration else None
    metrics = (analyze_text(_LOOP_TEXT), analyze_text(_CLEAN_TEXT))
    print(f"\n**GPU-minutes to a verdict, field playbook** ({trials} chains per row, seed {seed}; "
          f"{pb.samples_at(0.7)} samples per prompt at T = 0.7 over {len(pb.prompts)} prompts; while inconclusive "
          f"a resume to the look the `next:` line names, at most {shipped.resumes}; α {shipped.alpha}, margin "
          f"{shipped.margin:.0%}, family {shipped.family}; arms: baseline{', its A/A relaunch (the A/A contrast)' if aa else ''}, mtp)\n")
    print(f"Assumed: TP size {cost.tp_size}, {cost.tokens_per_s:g} tok/s per request in both arms, "
          f"{cost.in_flight} in flight, {cost.launch_s / 60:g} min launch to ready per arm and run, a loop "
          f"{cost.loop_tokens} tokens, an answer {cost.clean_tokens}, a greedy sample per prompt and arm in the "
          f"first run.\n")
    print("| host (T = 0.7 loops: base, MTP) | design | GPU-min, mean (p90) | runs | samples/arm at T = 0.7 "
          "| healthy | spec-corrupts-output | inconclusive at the end |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, base, spec in HOSTS:
        rates = {"baseline": base, **({aa: base} if aa else {}), "mtp": spec}
        for dname, design in designs:
            rng = np.random.default_rng(seed)
            chains = [simulate_chain(rates, design, resumes=design.resumes, rng=rng, metrics=metrics,
                                     follow_need=True, aa=aa)
                      for _ in range(trials)]
            gpu = np.array([chain_cost(c, rates, cost) for c in chains])
            final = Counter(c[-1].verdicts["mtp"] for c in chains)
            print(f"| {name} | {dname} | {gpu.mean():.0f} ({np.percentile(gpu, 90):.0f}) | "
                  f"{np.mean([len(c) for c in chains]):.2f} | {np.mean([c[-1].samples['mtp'] for c in chains]):.0f} | "
                  f"{final['healthy'] / trials:.1%} | {final['spec-corrupts-output'] / trials:.1%} | "
                  f"{final['inconclusive'] / trials:.1%} |", flush=True)


def main() -> None:
    args = mc_parser(__doc__, trials=300).parse_args()
    with Timed():
        table(args.trials, args.seed, Cost())


if __name__ == "__main__":
    main()
