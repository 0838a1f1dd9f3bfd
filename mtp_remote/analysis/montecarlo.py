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
from dataclasses import dataclass, field, replace

import numpy as np

from ..records.sample import Sample, SampleMetrics
from .cells import SampleObs, summarize_cell
from .degeneracy import analyze_text
from .stopping import Design, cell_decision
from .lossless import measure_calibration
from .verdict import judge_all

_LOOP_TEXT = "<think>\nThe question is 2+2." + " The user's question is 2+2." * 40
_CLEAN_TEXT = "<think>\nTwo plus two is four.\n</think>\nThe answer is 4."


@dataclass
class RunOutcome:
    """One simulated run: ``verdicts`` profile -> kind; ``samples`` profile -> samples taken at T > 0;
    ``needed``: profile -> the samples per arm an inconclusive verdict says would decide (its comparisons'
    ``samples_needed``), None when it names none."""

    verdicts: dict[str, str]
    samples: dict[str, int]
    evidence: dict[str, str] = field(default_factory=dict)
    needed: dict[str, int | None] = field(default_factory=dict)


def _rates(rate: float | Sequence[float], prompts: int) -> list[float]:
    if isinstance(rate, (int, float)):
        return [float(rate)] * prompts
    if len(rate) != prompts:
        raise ValueError(f"need one rate per prompt ({prompts}), got {len(rate)}")
    return [float(r) for r in rate]


#: ``draw(profile, prompt index, round, rng) -> (metrics, finish_reason[, extra])``: one sample's outcome;
#: ``extra`` may give ``kl_k3`` (the KL probe, nats/token) and ``answer_ok`` (the expected-answer check).
Draw = Callable[[str, int, int, np.random.Generator], tuple]


@dataclass
class _Run:
    """The samples of one run so far (records as samples.jsonl holds them, and the observations)."""

    names: list[str]
    records: list[Sample] = field(default_factory=list)
    obs: dict[str, list[SampleObs]] = field(default_factory=dict)
    next_round: dict[str, int] = field(default_factory=dict)


def launched_rates(rates: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Degenerate rates of one launch: each shifted by one log-odds effect ~ N(0, ``sd``) for the launch (0 and 1
    stay put)."""
    if sd <= 0:
        return rates
    with np.errstate(divide="ignore"):
        logit = np.log(rates) - np.log1p(-rates)
    return 1 / (1 + np.exp(-(logit + rng.normal(0.0, sd))))


def _sample(run: _Run, rates, design: Design, *, baseline: str, prompts: int, temperature: float,
            rng: np.random.Generator, metrics: tuple, draw: Draw | None, launch_sd: float = 0.0,
            aa: str | None = None) -> None:
    """Sample every arm up to ``design.rounds`` (baseline first, then the A/A arm ``aa``), stopping each cell
    as the runner does: a cell settled by what is stored gets no new sample (a resume's ``settle_stored``).
    Each call is one launch per arm: with ``launch_sd`` its rates move by a per-launch log-odds effect."""
    loop_m, clean_m = metrics
    for name in run.names:
        per_prompt = None if draw else launched_rates(np.asarray(_rates(rates[name], prompts)), launch_sd, rng)
        obs = run.obs.setdefault(name, [])
        start = run.next_round.get(name, 0)
        if start and design.sequential and cell_decision(run.records, profile=name, baseline=baseline,
                                                         temperature=temperature, design=design, aa=aa)["settled"]:
            continue
        for i in range(start, design.rounds):
            if draw:
                outs = [draw(name, j, i, rng) for j in range(prompts)]
            else:
                outs = [(loop_m, "length") if bad else (clean_m, "stop") for bad in rng.random(prompts) < per_prompt]
            for j, (m, finish, *more) in enumerate(outs):
                extra = more[0] if more else {}
                o = SampleObs(name, temperature, f"p{j}", i, 1000 + i, m, finish, 200, 0.0, None,
                              kl_k3=extra.get("kl_k3"), answer_ok=extra.get("answer_ok"),
                              kl_max_k3=extra.get("kl_max_k3"), kl_tokens=extra.get("kl_tokens"))
                run.records.append(Sample(profile=name, temperature=temperature, prompt_id=f"p{j}", sample_index=i,
                                          error=None, finish_reason=finish,
                                          metrics=SampleMetrics(loop=m.is_loop,
                                                                near_loop=bool(getattr(m, "near_loop", False)))))
                obs.append(o)
            run.next_round[name] = i + 1
            if design.sequential and cell_decision(run.records, profile=name, baseline=baseline,
                                                   temperature=temperature, design=design, aa=aa)["settled"]:
                break


def _judge(run: _Run, design: Design, *, baseline: str, temperature: float, aa: str | None = None) -> RunOutcome:
    obs = run.obs
    base_cells = [summarize_cell(baseline, temperature, False, obs[baseline])]
    spec = {p: ([summarize_cell(p, temperature, True, obs[p])], obs[p]) for p in run.names if p not in (baseline, aa)}
    calibration = measure_calibration(obs[baseline], obs[aa]) if aa else None
    found = judge_all(spec, base_cells, obs[baseline], design=design, calibration=calibration)
    needed = {p: max((c.samples_needed or 0 for c in v.comparisons), default=0) or None
              for p, v in found.items() if v.kind == "inconclusive"}
    return RunOutcome({p: v.kind for p, v in found.items()}, {p: len(obs[p]) for p in run.names},
                      {p: v.evidence for p, v in found.items()}, needed)


def simulate_run(rates: Mapping[str, float | Sequence[float] | None], design: Design, *,
                 baseline: str = "baseline", prompts: int = 5, temperature: float = 0.7,
                 rng: np.random.Generator, metrics: tuple | None = None, draw: Draw | None = None) -> RunOutcome:
    """One run over ``rates`` (profile -> degenerate rate at ``temperature``, one number or one per prompt;
    the baseline first). ``design.rounds`` samples per prompt at most; ``design.sequential`` stops each
    cell as the runner does. ``draw`` replaces the Bernoulli outcomes (e.g. decoding with the sim in
    process; ``rates`` then only names the profiles). Returns the verdict kinds and the samples each arm
    used."""
    return simulate_chain(rates, design, resumes=0, baseline=baseline, prompts=prompts, temperature=temperature,
                          rng=rng, metrics=metrics, draw=draw)[0]


def simulate_chain(rates: Mapping[str, float | Sequence[float] | None], design: Design, *, resumes: int,
                   baseline: str = "baseline", prompts: int = 5, temperature: float = 0.7,
                   rng: np.random.Generator, metrics: tuple | None = None, draw: Draw | None = None,
                   until_decided: bool = True, replan: bool = False, launch_sd: float = 0.0,
                   follow_need: bool = False, aa: str | None = None) -> list[RunOutcome]:
    """A first run and up to ``resumes`` resumes: while some profile is ``inconclusive`` (``until_decided``;
    else always), ``--resume --samples`` the design's next look (2x, 4x, ... the first run's rounds:
    ``Design.stage_ends``), or with ``follow_need`` the look the tool's own ``next:`` line names (the first
    later look with the samples the verdict says would decide, else the last: ``report.next_step``). Stored
    samples are kept, cells settled by them get no new sample. ``replan``: each resume a new design spending the whole alpha again (the
    rule before issue 20, for comparison). ``launch_sd``: a per-launch log-odds effect on every arm's rates
    (each run relaunches every arm). ``aa``: the profile in ``rates`` that is the baseline's A/A relaunch
    (``compare.calibration``): sampled after the baseline, judged as the host's floor (``measure_calibration``),
    not as a speculative profile. Returns the outcome after each run."""
    metrics = metrics or (analyze_text(_LOOP_TEXT), analyze_text(_CLEAN_TEXT))
    names = [baseline] + ([aa] if aa else []) + [p for p in rates if p not in (baseline, aa)]
    run = _Run(names)
    out = []
    ends = list(design.stage_ends()[: resumes + 1])
    while ends:
        end = ends.pop(0)
        d = replace(design, rounds=end, first_rounds=None, resumes=0) if replan else \
            replace(design, rounds=end, first_rounds=design.k0)
        _sample(run, rates, d, baseline=baseline, prompts=prompts, temperature=temperature, rng=rng,
                metrics=metrics, draw=draw, launch_sd=launch_sd, aa=aa)
        out.append(_judge(run, d, baseline=baseline, temperature=temperature, aa=aa))
        if until_decided and "inconclusive" not in out[-1].verdicts.values():
            break
        need = max((n for n in out[-1].needed.values() if n), default=0)
        if follow_need and need and ends:  # the tool's next: line: the first later look that gets there
            want = -(-need // prompts)
            ends = ends[next((i for i, e in enumerate(ends) if e >= want), len(ends) - 1):]
    return out


@dataclass
class ErrorRates:
    """Over ``trials`` runs: ``kinds`` profile -> {verdict kind: share}; ``mean_samples`` per arm (T > 0);
    ``any_corrupt``: share of runs where some speculative profile got ``spec-corrupts-output``."""

    trials: int
    kinds: dict[str, dict[str, float]]
    mean_samples: dict[str, float]
    any_corrupt: float
    healthy_any: float = 0.0


def error_rates(rates: Mapping[str, float | Sequence[float]], design: Design, *, trials: int = 200,
                seed: int = 0, prompts: int = 5, baseline: str = "baseline", resumes: int = 0,
                replan: bool = False) -> ErrorRates:
    """:func:`simulate_run` ``trials`` times from one seeded generator; with ``resumes``, a chain of up to
    that many resumes (:func:`simulate_chain`): ``any_corrupt`` is then the share of chains where *some*
    run said ``spec-corrupts-output`` (the family-wise error over the chain), ``kinds`` the last verdicts
    and ``healthy_any`` the share of chains where some run said ``healthy``."""
    rng = np.random.default_rng(seed)
    metrics = (analyze_text(_LOOP_TEXT), analyze_text(_CLEAN_TEXT))
    kinds: dict[str, Counter] = {}
    used: dict[str, list[int]] = {}
    corrupt = healthy = 0
    for _ in range(trials):
        chain = simulate_chain(rates, design, resumes=resumes, baseline=baseline, prompts=prompts, rng=rng,
                               metrics=metrics, replan=replan)
        out = chain[-1]
        corrupt += any(k == "spec-corrupts-output" for o in chain for k in o.verdicts.values())
        healthy += any(k == "healthy" for o in chain for k in o.verdicts.values())
        for p, k in out.verdicts.items():
            kinds.setdefault(p, Counter())[k] += 1
        for p, n in out.samples.items():
            used.setdefault(p, []).append(n)
    return ErrorRates(trials, {p: {k: v / trials for k, v in sorted(c.items())} for p, c in kinds.items()},
                      {p: float(np.mean(v)) for p, v in used.items()}, corrupt / trials, healthy / trials)
