"""The nightly regression check: tonight's run against the last good run and the spread of earlier ones.

A regression is a *tested* change, not a changed label:

- loop rate, per (profile, temperature) cell: one-sided Fisher exact test that tonight loops more than the
  last good (completed) run of the same host and playbook, Holm-adjusted over the cells tested;
- speed (mean tokens/s per cell): one-sided t prediction-interval test of tonight's mean against the means of
  up to ``HISTORY_RUNS`` earlier good runs (the between-run spread; at least 3 runs are needed, fewer are
  reported as "not tested"), Holm-adjusted;
- a profile that launched in the last good run and failed tonight (did not start, crashed, hung).

Input: the summary document and :func:`mtp_remote.report.history.good_runs` rows; output: a
:class:`RegressionReport` (JSON-able). Pure apart from the deferred scipy import in ``analysis.runstats``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.runstats import loop_diff, speed_vs_history
from ..analysis.stats import holm

#: Verdict kinds of a profile that produced no usable samples (did not start, crashed, hung).
FAILED_KINDS = ("launch-failed", "crashed", "hung")

#: Earlier good runs whose per-cell speeds give the between-run spread.
HISTORY_RUNS = 10


@dataclass
class RegressionReport:
    """``baseline_run``: the last good run compared against (None: no earlier good run). ``checks``: one dict
    per tested quantity with ``kind`` (``loop_rate``/``speed``/``launch``), ``profile``, ``temperature``,
    the figures, ``p``/``p_adjusted`` and ``regressed``. ``regressed``: sorted "profile T=t (kind)" labels."""

    baseline_run: str | None
    alpha: float
    checks: list[dict] = field(default_factory=list)

    @property
    def regressed(self) -> list[str]:
        return sorted({_label(c) for c in self.checks if c["regressed"]})

    def to_dict(self) -> dict:
        return {"baseline_run": self.baseline_run, "alpha": self.alpha, "checks": self.checks,
                "regressed": self.regressed}


def _label(c: dict) -> str:
    t = "" if c.get("temperature") is None else f" T={c['temperature']:g}"
    return f"{c['profile']}{t} ({c['kind']})"


def check_regressions(doc: dict, earlier: list[dict], *, alpha: float | None = None) -> RegressionReport:
    """Compare the completed run ``doc`` (summary.json) with ``earlier`` good runs (newest first, as
    :func:`mtp_remote.report.history.good_runs` returns them). ``alpha`` defaults to the playbook's."""
    alpha = alpha if alpha is not None else float(doc.get("playbook", {}).get("alpha") or 0.05)
    if not earlier:
        return RegressionReport(None, alpha)
    last = earlier[0]
    rep = RegressionReport(last["run_id"], alpha)
    loops, speeds = [], []
    for c in doc.get("cells", []):
        key = (c["profile"], float(c["temperature"]))
        prev = last["cells"].get(key)
        if prev and prev["n"] and c["n"]:
            d = loop_diff(prev["loops"], prev["n"], c["loops"], c["n"])
            loops.append({"kind": "loop_rate", "profile": key[0], "temperature": key[1], "run": d.loops_b,
                          "n": d.n_b, "last_good": d.loops_a, "n_last_good": d.n_a, "p": d.p_worse})
        if c.get("tokens_per_s") is not None:
            hist = [r["cells"][key]["tokens_per_s"] for r in earlier[:HISTORY_RUNS]
                    if key in r["cells"] and r["cells"][key].get("tokens_per_s") is not None]
            s = speed_vs_history(c["tokens_per_s"], hist)
            speeds.append({"kind": "speed", "profile": key[0], "temperature": key[1], "tokens_per_s": s.value,
                           "history_runs": s.k, "history_mean": s.history_mean, "history_sd": s.history_sd,
                           "p": s.p_slower})
    for group in (loops, speeds):
        tested = [c for c in group if c["p"] is not None]
        for c, adj in zip(tested, holm([c["p"] for c in tested])):
            c["p_adjusted"] = adj
        for c in group:
            c.setdefault("p_adjusted", None)
            c["regressed"] = c["p_adjusted"] is not None and c["p_adjusted"] < alpha
            if c["kind"] == "speed" and c["p"] is None:
                c["note"] = f"not tested: {c['history_runs']} earlier good run(s), 3 needed for the spread"
        rep.checks += group
    launched_before = {p for (p, _t) in last["cells"]}
    for v in doc.get("verdicts", []):
        if v["kind"].startswith(FAILED_KINDS) and v["profile"] in launched_before:
            rep.checks.append({"kind": "launch", "profile": v["profile"], "temperature": None, "p": None,
                               "p_adjusted": None, "regressed": True,
                               "note": f"{v['kind']}; launched in {last['run_id']}"})
    return rep


def describe(rep: RegressionReport) -> list[str]:
    """One line per regression, with its evidence (for the console and the junit case)."""
    out = []
    for c in rep.checks:
        if not c["regressed"]:
            continue
        if c["kind"] == "loop_rate":
            out.append(f"{_label(c)}: {c['run']}/{c['n']} loops tonight vs {c['last_good']}/{c['n_last_good']} in "
                       f"{rep.baseline_run} (Fisher one-sided p={c['p']:.2g}, Holm {c['p_adjusted']:.2g})")
        elif c["kind"] == "speed":
            out.append(f"{_label(c)}: {c['tokens_per_s']:.1f} tok/s tonight vs {c['history_mean']:.1f} ± "
                       f"{c['history_sd']:.1f} over {c['history_runs']} earlier good runs "
                       f"(t prediction p={c['p']:.2g}, Holm {c['p_adjusted']:.2g})")
        else:
            out.append(f"{_label(c)}: {c['note']}")
    return out
