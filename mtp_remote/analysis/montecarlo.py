"""Monte Carlo of the whole decision pipeline: simulated sample outcomes through the real decision code.

:func:`simulate_run` plays one run the way the runner drives it — arms one after another, baseline first,
rounds of one sample per prompt, after each round the runner's own early-stopping call
(:func:`stopping.cell_decision` on samples.jsonl-shaped records) — then pools the cells
(:func:`cells.summarize_cell`) and judges every speculative profile with :func:`verdict.judge_all`, the
function ``diagnosis.diagnose`` calls. Only the text analysis is replaced: a sample's outcome (degenerate or
not) is drawn from a per-prompt rate and carries precomputed metrics of a looping or a clean text.
:func:`error_rates` repeats it over seeds. ``bench/bench_verdict_mc.py`` and ``tests/unit/analysis/
test_montecarlo.py`` use it; ``docs/metrics.md`` has the figures. Pure (seeded numpy random numbers).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .cells import SampleObs, summarize_cell
from .degeneracy import analyze_text
from .stopping import Design, cell_decision
from .verdict import judge_all

_LOOP_TEXT = "<think>\nThe question is 2+2." + " The user's question is 2+2." * 40
_CLEAN_TEXT = "<think>\nTwo plus two is four.\n</think>\nThe answer is 4."


@dataclass
class RunOutcome:
    """One simulated run: ``verdicts`` profile -> kind; ``samples`` profile -> samples taken at T > 0."""

    verdicts: dict[str, str]
    samples: dict[str, int]
    evidence: dict[str, str] = field(default_factory=dict)


def _rates(rate: float | Sequence[float], prompts: int) -> list[float]:
    if isinstance(rate, (int, float)):
        return [float(rate)] * prompts
    if len(rate) != prompts:
        raise ValueError(f"need one rate per prompt ({prompts}), got {len(rate)}")
    return [float(r) for r in rate]


#: ``draw(profile, prompt index, round, rng) -> (metrics, finish_reason)``: one sample's outcome.
Draw = Callable[[str, int, int, np.random.Generator], tuple]


def simulate_run(rates: Mapping[str, float | Sequence[float] | None], design: Design, *,
                 baseline: str = "baseline", prompts: int = 5, temperature: float = 0.7,
                 rng: np.random.Generator, metrics: tuple | None = None, draw: Draw | None = None) -> RunOutcome:
    """One run over ``rates`` (profile -> degenerate rate at ``temperature``, one number or one per prompt;
    the baseline first). ``design.rounds`` samples per prompt at most; ``design.sequential`` stops each
    cell as the runner does. ``draw`` replaces the Bernoulli outcomes (e.g. decoding with the sim in
    process; ``rates`` then only names the profiles). Returns the verdict kinds and the samples each arm
    used."""
    loop_m, clean_m = metrics or (analyze_text(_LOOP_TEXT), analyze_text(_CLEAN_TEXT))
    names = [baseline] + [p for p in rates if p != baseline]
    records: list[dict] = []
    obs: dict[str, list[SampleObs]] = {p: [] for p in names}
    for name in names:
        per_prompt = None if draw else np.asarray(_rates(rates[name], prompts))
        for i in range(design.rounds):
            if draw:
                outs = [draw(name, j, i, rng) for j in range(prompts)]
            else:
                outs = [(loop_m, "length") if bad else (clean_m, "stop") for bad in rng.random(prompts) < per_prompt]
            for j, (m, finish) in enumerate(outs):
                o = SampleObs(name, temperature, f"p{j}", i, 1000 + i, m, finish, 200, 0.0, None)
                records.append({"profile": name, "temperature": temperature, "prompt_id": f"p{j}",
                                "sample_index": i, "error": None, "finish_reason": finish,
                                "metrics": {"loop": {"period": 6} if m.is_loop else None,
                                            "near_loop": bool(getattr(m, "near_loop", False))}})
                obs[name].append(o)
            if design.sequential and cell_decision(records, profile=name, baseline=baseline,
                                                   temperature=temperature, design=design)["settled"]:
                break
    base_cells = [summarize_cell(baseline, temperature, False, obs[baseline])]
    spec = {p: ([summarize_cell(p, temperature, True, obs[p])], obs[p]) for p in names if p != baseline}
    found = judge_all(spec, base_cells, obs[baseline], design=design)
    return RunOutcome({p: v.kind for p, v in found.items()}, {p: len(obs[p]) for p in names},
                      {p: v.evidence for p, v in found.items()})


@dataclass
class ErrorRates:
    """Over ``trials`` runs: ``kinds`` profile -> {verdict kind: share}; ``mean_samples`` per arm (T > 0);
    ``any_corrupt``: share of runs where some speculative profile got ``spec-corrupts-output``."""

    trials: int
    kinds: dict[str, dict[str, float]]
    mean_samples: dict[str, float]
    any_corrupt: float


def error_rates(rates: Mapping[str, float | Sequence[float]], design: Design, *, trials: int = 200,
                seed: int = 0, prompts: int = 5, baseline: str = "baseline") -> ErrorRates:
    """:func:`simulate_run` ``trials`` times from one seeded generator."""
    rng = np.random.default_rng(seed)
    metrics = (analyze_text(_LOOP_TEXT), analyze_text(_CLEAN_TEXT))
    kinds: dict[str, Counter] = {}
    used: dict[str, list[int]] = {}
    corrupt = 0
    for _ in range(trials):
        out = simulate_run(rates, design, baseline=baseline, prompts=prompts, rng=rng, metrics=metrics)
        corrupt += any(k == "spec-corrupts-output" for k in out.verdicts.values())
        for p, k in out.verdicts.items():
            kinds.setdefault(p, Counter())[k] += 1
        for p, n in out.samples.items():
            used.setdefault(p, []).append(n)
    return ErrorRates(trials, {p: {k: v / trials for k, v in sorted(c.items())} for p, c in kinds.items()},
                      {p: float(np.mean(v)) for p, v in used.items()}, corrupt / trials)
