"""The nightly regression check: tonight's run against the earlier good runs of the same host and playbook.

A regression is a *tested* change, not a changed label:

- loop rate, per (profile, temperature) cell: one-sided Fisher exact test that tonight loops more than the
  same cell pooled over up to ``HISTORY_RUNS`` earlier good (completed) runs of the same host and playbook,
  and where those nights spread beyond binomial (a launch effect) the larger p of the beta-binomial tail
  (``analysis.runstats.loops_vs_history``). Pooled, not the last run alone: at a month's budget a night tests
  at α/30, and against one night of 60 samples a 2 → 15 % jump was found 12 % of the time, 59.5 % pooled
  (``docs/metrics.md``);
- speed, per speculative (profile, temperature) cell: its tokens/s over the baseline's of the same night (the
  ratio cancels what the night does to both arms: load, clocks, a neighbour), one-sided t prediction-interval
  test against the ratios of up to ``HISTORY_RUNS`` earlier good runs (the between-run spread; at least 3
  runs are needed, fewer are reported as "not tested");
- each kind Holm-adjusted over its cells at half the night's level (``p_adjusted`` = Holm of 2·p: the two
  kinds together stay within it);
- a profile that launched in the last good run and failed tonight (did not start, crashed, hung).

A false-alarm budget per month (issue 31): the tests of one night run at ``alpha / NIGHTS_PER_MONTH``, so by the
union bound a healthy host raises a false "regressed" in a month of nightlies with probability at most
``alpha`` (at ``alpha`` per night, on raw tokens/s, it was about one a month).

Input: the summary document and :func:`mtp_remote.report.history.good_runs` rows; output: a
:class:`RegressionReport` (JSON-able). Pure apart from the deferred scipy import in ``analysis.runstats``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.runstats import loops_vs_history, speed_vs_history
from ..analysis.stats import holm
from ..records.summary import CellRecord, Summary
from .records import RegressionCheck

#: Verdict kinds of a profile that produced no usable samples (did not start, crashed, hung).
FAILED_KINDS = ("launch-failed", "crashed", "hung")

#: Earlier good runs whose per-cell speed ratios give the between-run spread.
HISTORY_RUNS = 10
#: Nights a month's false-alarm budget (``alpha``) is spread over: one night tests at alpha / 30.
NIGHTS_PER_MONTH = 30
#: The kinds of test that share a night's budget equally (Bonferroni between them, Holm within each).
KINDS_TESTED = ("loop_rate", "speed")


@dataclass
class RegressionReport:
    """``baseline_run``: the newest earlier good run (None: none, nothing tested). ``alpha``: the month's
    false-alarm budget, ``night_alpha`` the level tonight's Holm-adjusted p-values are compared with
    (``alpha / NIGHTS_PER_MONTH``). ``checks``: one :class:`~mtp_remote.fleet.records.RegressionCheck` per tested
    quantity (``kind`` ``loop_rate``/``speed``/``launch``, the cell, the figures, ``p``/``p_adjusted``,
    ``regressed``).
    ``regressed``: sorted "profile T=t (kind)" labels."""

    baseline_run: str | None
    alpha: float
    checks: list[RegressionCheck] = field(default_factory=list)
    night_alpha: float | None = None

    @property
    def regressed(self) -> list[str]:
        return sorted({c.label() for c in self.checks if c.regressed})

    def to_dict(self) -> dict:
        return {"baseline_run": self.baseline_run, "alpha": self.alpha, "night_alpha": self.night_alpha,
                "checks": [c.to_dict() for c in self.checks], "regressed": self.regressed}


def check_regressions(doc: Summary | dict, earlier: list[dict], *, alpha: float | None = None) -> RegressionReport:
    """Compare the completed run ``doc`` (summary.json) with ``earlier`` good runs (newest first, as
    :func:`mtp_remote.report.history.good_runs` returns them). ``alpha``: the month's false-alarm budget,
    default the playbook's; tonight's tests run at ``alpha / NIGHTS_PER_MONTH``."""
    doc = Summary.of(doc)
    alpha = alpha if alpha is not None else float(doc.playbook.alpha or 0.05)
    night = alpha / NIGHTS_PER_MONTH
    if not earlier:
        return RegressionReport(None, alpha, night_alpha=night)
    last = earlier[0]
    rep = RegressionReport(last["run_id"], alpha, night_alpha=night)
    baseline, flags = doc.playbook.baseline, doc.playbook.profiles
    tonight = {(c.profile, float(c.temperature)): c for c in doc.cells}
    loops, speeds = [], []
    nights = {key: [(h["loops"], h["n"]) for r in earlier[:HISTORY_RUNS] if (h := r["cells"].get(key) or {}).get("n")]
              for key in tonight}
    for c in doc.cells:
        key = (c.profile, float(c.temperature))
        pool = nights[key]
        if pool and c.n:
            d = loops_vs_history(c.loops, c.n, pool, [v for k, v in nights.items() if k != key and k[1] > 0])
            check = RegressionCheck(kind="loop_rate", profile=key[0], temperature=key[1], run=d.loops, n=d.n,
                                    history_loops=d.history_loops, history_n=d.history_n, history_runs=d.k,
                                    history_rho=round(d.rho, 4), p=d.p_worse)
            if d.rho > 0:
                check.note = _spread_note(d.rho)
            loops.append(check)
        entry = flags.get(key[0])
        speculative = entry.speculative if entry is not None and "speculative" in entry else key[0] != baseline
        ratio = _ratio(c, tonight.get((baseline, key[1])))
        if speculative and key[0] != baseline and ratio is not None:
            hist = [h for r in earlier[:HISTORY_RUNS]
                    if (h := _ratio(r["cells"].get(key), r["cells"].get((baseline, key[1])))) is not None]
            s = speed_vs_history(ratio, hist)
            speeds.append(RegressionCheck(kind="speed", profile=key[0], temperature=key[1], ratio=s.value,
                                          tokens_per_s=c.tokens_per_s, history_runs=s.k,
                                          history_mean=s.history_mean, history_sd=s.history_sd, p=s.p_slower))
    # the night's budget split between the two kinds (Holm within each at half of it): by the union bound the
    # night's loop and speed tests together stay within alpha/30 (each kind at alpha/30 spent it twice)
    for group in (loops, speeds):
        tested = [c for c in group if c.p is not None]
        for c, adj in zip(tested, holm([c.p * len(KINDS_TESTED) for c in tested])):
            c.p_adjusted = min(1.0, adj)
        for c in group:
            c.mark_written("p_adjusted")
            c.regressed = c.p_adjusted is not None and c.p_adjusted < night
            if c.kind == "speed" and c.p is None:
                c.note = f"not tested: {c.history_runs} earlier good run(s), 3 needed for the spread"
        rep.checks += group
    launched_before = {p for (p, _t) in last["cells"]}
    for v in doc.verdicts:
        if v.kind.startswith(FAILED_KINDS) and v.profile in launched_before:
            rep.checks.append(RegressionCheck(kind="launch", profile=v.profile, temperature=None, p=None,
                                              p_adjusted=None, regressed=True,
                                              note=f"{v.kind}; launched in {last['run_id']}"))
    return rep


def _spread_note(rho: float) -> str:
    """Why a loop test against nights that spread is wider, and what it does not hold (docs/metrics.md)."""
    return (f"the earlier nights' loop rates spread beyond binomial (rho {rho:.3g}): tested with the beta-binomial "
            f"tail; at a launch spread of 0.5 in log-odds a month's false alarms measured 8.5 %, above alpha")


def _ratio(spec, base) -> float | None:
    """Tokens/s of a speculative cell over the baseline's of the same run and temperature (cells of tonight's
    summary, or a history row's ``{"tokens_per_s", ...}``); None without both."""
    a, b = (_tokens_per_s(x) for x in (spec, base))
    return a / b if a is not None and b else None


def _tokens_per_s(cell) -> float | None:
    if isinstance(cell, CellRecord):
        return cell.tokens_per_s
    return None if cell is None else cell.get("tokens_per_s")


def describe(rep: RegressionReport) -> list[str]:
    """One line per regression, with its evidence (for the console and the junit case)."""
    out = []
    for c in rep.checks:
        if not c.regressed:
            continue
        if c.kind == "loop_rate":
            test = "beta-binomial" if c.history_rho else "Fisher"
            out.append(f"{c.label()}: {c.run}/{c.n} loops tonight vs {c.history_loops}/{c.history_n} over "
                       f"{c.history_runs} earlier good run(s) ({test} one-sided p={c.p:.2g}, Holm {c.p_adjusted:.2g})"
                       + (f"; {c.note}" if c.note else ""))
        elif c.kind == "speed":
            out.append(f"{c.label()}: {c.ratio:.2f}x the baseline's tok/s tonight vs {c.history_mean:.2f} ± "
                       f"{c.history_sd:.2f} over {c.history_runs} earlier good runs "
                       f"(t prediction p={c.p:.2g}, Holm {c.p_adjusted:.2g})")
        else:
            out.append(f"{c.label()}: {c.note}")
    return out
