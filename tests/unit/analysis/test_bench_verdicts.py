"""``bench/bench_verdicts.py`` regenerates the docs' tables: its KL table runs through the real decision code
(issue 31: ``--only kl`` failed with an ImportError once ``summarize_cell`` moved to ``analysis.cells``)."""

from __future__ import annotations

import re

from bench.bench_verdicts import kl_rows


def test_the_kl_table_runs_and_ranks_the_three_step_leak_above_the_healthy_arm(capsys):
    kl_rows(pool_n=1, trials=4, seed=0)  # 5 sim-decoded samples per arm, 4 tests per cell
    rows = {m[1]: (float(m[2]), float(m[3]), float(m[4])) for m in
            re.finditer(r"^\| ([^|]+?) \| ([0-9.e+-]+) \| ([0-9.]+)% \| ([0-9.]+)% \|$", capsys.readouterr().out, re.M)}
    assert set(rows) == {"healthy MTP 3 steps (noise 0.02)", "state_leak, 1 step", "state_leak, 3 steps",
                         "harmless 1.25x kernel difference", "harmless 1.5x kernel difference",
                         "harmless 2x kernel difference", "harmless 3x kernel difference"}
    assert rows["state_leak, 3 steps"][0] > 10 * rows["healthy MTP 3 steps (noise 0.02)"][0]
    assert rows["healthy MTP 3 steps (noise 0.02)"][1:] == (0.0, 0.0)


def test_the_greedy_gate_bench_calls_a_noiseless_healthy_host_healthy_and_a_noisy_one_never_corrupt():
    import numpy as np

    from bench.bench_greedy_gate import trial

    rng = np.random.default_rng(0)
    assert trial(0.0, rng) == ("healthy", "healthy")
    kinds = [trial(0.1, rng) for _ in range(5)]  # with the A/A arm: judged; without: not judged, held back
    assert all(without == "inconclusive" for _, without in kinds), kinds
    assert "spec-corrupts-output" not in {k for pair in kinds for k in pair}, kinds


def test_the_greedy_only_bench_runs_the_greedy_bound_healthy_at_29_clean_prompts_corrupt_when_every_one_diverges():
    import numpy as np

    from bench.bench_greedy_gate import trial_greedy_only

    rng = np.random.default_rng(0)
    assert trial_greedy_only(0.0, 29, 0.0, rng, tokens=16) == "healthy"
    assert trial_greedy_only(0.0, 28, 0.0, rng, tokens=16) == "inconclusive"  # 1 - 0.05^(1/28) = 10.1 %
    assert trial_greedy_only(0.0, 10, 1.0, rng, tokens=16) == "spec-corrupts-output"


def test_gpu_minutes_count_each_arms_launch_and_tokens_and_follow_the_next_line_to_a_healthy_verdict():
    import numpy as np

    from bench.bench_gpu_minutes import Cost, chain_cost
    from mtp_remote.analysis.montecarlo import simulate_chain
    from mtp_remote.analysis.stopping import Design

    cost = Cost()
    # 20 clean samples + 5 greedy on 16 in flight: 4 min launch + 25 x 600 tokens / (35 tok/s x 16)
    assert cost.arm_s(20, 0.0, greedy=True) == 240 + 25 * 600 / (35 * 16)
    assert cost.arm_s(0, 0.5, greedy=False) == 0.0  # an arm that takes no new sample is not relaunched
    rates = {"baseline": 0.0, "baseline-aa": 0.0, "mtp": 0.0}
    design = Design(rounds=4, family=2, resumes=3)
    chain = simulate_chain(rates, design, resumes=3, rng=np.random.default_rng(0), follow_need=True,
                           aa="baseline-aa")
    # the first run's 0/20 vs 0/20 cannot bound the excess; its next: line asks for the look at 32 per prompt
    assert [o.verdicts["mtp"] for o in chain] == ["inconclusive", "healthy"]
    assert chain[-1].samples == {"baseline": 160, "baseline-aa": 160, "mtp": 160}
    first = 3 * cost.arm_s(20, 0.0, greedy=True) + 3 * cost.arm_s(140, 0.0, greedy=False)
    assert chain_cost(chain, rates, cost) == first / 60 * 2
