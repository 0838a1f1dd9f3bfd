"""Family-wise error of mitigate's "loop-free" claims over 1, 3 and 7 candidates, by Monte Carlo over the real code.

Each trial draws samples.jsonl records (5 prompts x ROUNDS at T = 0.7, the looping or the clean text) for a
baseline and the candidates and runs ``build_document``'s own steps: ``mitigate.judge_profile`` (the decision
rule), ``status_of``, ``ranking.familywise_loop_free`` (Holm over the candidates' bound tests), ``rank_results``
and ``pick_best`` (:func:`mtp_remote.search.ranking_mc.loop_claim_rates`). Two tables: every candidate loops
exactly the margin (5 points) more than a clean baseline, so any "loop-free" is false ("before" is the rule
without the family-wise step); one candidate truly clean among candidates at the margin (the power).
Prints the markdown tables that ``docs/metrics.md`` shows.

    PYTHONPATH=. nice .venv/bin/python bench/bench_loop_claims_mc.py [--trials 300] [--seed 0]
"""

from __future__ import annotations

from bench.mc_cli import Timed, csv_of, mc_parser
from mtp_remote.search.ranking_mc import bisect_rates, loop_claim_rates

MARGIN = 0.05


def main() -> None:
    ap = mc_parser(__doc__, trials=300)
    ap.add_argument("--k", type=csv_of(int), default=[1, 3, 7], help="candidates per table, comma-separated")
    ap.add_argument("--rounds", type=csv_of(int), default=[4, 24],
                    help="false-claim table: samples per prompt, comma-separated")
    ap.add_argument("--power-rounds", type=csv_of(int), default=[24, 48],
                    help="power table: samples per prompt, comma-separated")
    ap.add_argument("--bisect-only", action="store_true", help="only the bisect table")
    args = ap.parse_args()
    with Timed():
        if args.bisect_only:
            bisect_table(args.trials, args.seed)
        else:
            claim_tables(args.k, args.rounds, args.power_rounds, args.trials, args.seed)


def exact_fwer(k: int, n: int, alpha: float = 0.05) -> float:
    """The family-wise rate of a false "loop-free" over ``k`` candidates that all loop exactly at the margin
    over a baseline that never loops (0/n), computed: each candidate's p-value is then the binomial tail
    P(X <= x | n, margin) (``stats.bound_p_value``), and Holm claims some candidate iff the smallest p is at most
    alpha / k, so the rate is 1 - (1 - P(p <= alpha / k))^k."""
    from scipy import stats

    from mtp_remote.analysis.stats import bound_p_value

    hit = sum(stats.binom.pmf(x, n, MARGIN) for x in range(n + 1) if bound_p_value(x, n, 0, n, MARGIN) <= alpha / k)
    return float(1 - (1 - hit) ** k)


def claim_tables(ks: list[int], rounds: list[int], power_rounds: list[int], trials: int, seed: int) -> None:
    """The two tables of mitigate's loop-free claims (false claims at the margin, then the power)."""
    print(f"\n**Every candidate loops at the margin** ({trials} tables per row, baseline 0 %, candidates "
          f"{MARGIN:.0%}, 5 prompts, alpha 0.05, seed {seed})\n")
    print("| candidates | samples per arm | some loop-free, before | some loop-free, Holm | exact FWER of the rule "
          "| a pick (`no-loops-seen`) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for k in ks:
        for r in rounds:
            out = loop_claim_rates([MARGIN] * k, 0.0, r, trials=trials, seed=seed)
            print(f"| {k} | {5 * r} | {out['false_before']:.1%} | {out['false_after']:.1%} | "
                  f"{exact_fwer(k, 5 * r):.2%} | {out['picked']:.1%} |", flush=True)
    print(f"\n**One clean candidate among candidates at the margin** ({trials} tables per row)\n")
    print("| candidates | samples per arm | clean one loop-free, Holm | before | a candidate at the margin loop-free, Holm |")
    print("|---:|---:|---:|---:|---:|")
    for k in ks:
        for r in power_rounds:
            rates = [0.0] + [MARGIN] * (k - 1)
            out = loop_claim_rates(rates, 0.0, r, trials=trials, seed=seed)
            before = out.get("found_before")
            print(f"| {k} | {5 * r} | {out['found_after']:.1%} | {before:.1%} | {out['false_after']:.1%} |",
                  flush=True)


def bisect_table(trials: int, seed: int) -> None:
    """bisect over 4 flag changes, one of which makes the server loop (``ranking_mc.bisect_rates``): each test
    at alpha (before) or at ``bisect.test_alpha`` of its number (the family-wise spending)."""
    print(f"\n**bisect: 4 flag changes, one culprit** ({trials} searches per row, 5 prompts, alpha 0.05, seed "
          f"{seed}; baseline and innocent subsets loop at the base rate)\n")
    print("| culprit's loop rate | base rate | samples per test | rule | right flag | culprit left out | "
          "culprit plus others |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for bad, base in ((0.8, 0.0), (0.3, 0.0), (0.3, 0.1)):
        for rounds in (4, 12):
            for fw in (False, True):
                out = bisect_rates(4, bad, rounds, trials=trials, seed=seed, familywise=fw, base_rate=base)
                print(f"| {bad:.0%} | {base:.0%} | {5 * rounds} | {'alpha/(i(i+1))' if fw else 'alpha each'} | "
                      f"{out['right']:.1%} | {out['wrong']:.1%} | {out['larger']:.1%} |", flush=True)


if __name__ == "__main__":
    main()
