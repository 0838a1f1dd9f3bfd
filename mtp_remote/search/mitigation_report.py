"""The mitigation table as text: its rows (:func:`table_rows`, shared by the console and markdown) and
``mitigation.md`` (:func:`render_markdown`)."""

from __future__ import annotations

import shlex

from ..records.summary import Environment
from .ranking import beats_baseline, fmt_cost_ci, fmt_ratio_ci, recommendation
from .records import CandidateResult, MitigationDoc


def _fmt(x, spec: str, none: str = "–") -> str:
    return none if x is None else format(x, spec)


def table_rows(doc: MitigationDoc | dict) -> list[list[str]]:
    """The mitigation table as strings: rank (``2 =#1`` when tied with #1), candidate, change, loops (spec vs
    baseline, p), acceptance, tokens/s, x baseline [95 % CI], speed cost [95 % CI], verdict or skip reason."""
    return [_table_row(r) for r in MitigationDoc.of(doc).rows]


def _table_row(r: CandidateResult) -> list[str]:
    loops = f"{r.loops}/{r.n} vs {r.base_loops}/{r.base_n}" if r.n is not None else "–"
    if r.status == "baseline" and r.n is not None:
        loops = f"{r.loops}/{r.n} (no speculation)"
    if r.p is not None and r.n is not None:
        loops += f" (p={r.p:.2g})"
    verdict = r.verdict or r.status
    if r.status == "baseline":
        verdict = "baseline: speculation off"
    if r.status in ("skipped", "pending", "not-comparable"):
        verdict = f"{r.status}: {r.evidence}"
    if r.status == "no-loops-seen":
        verdict = (f"no loops seen; loop-free not shown over {r.family} candidate(s) "
                   f"(Holm p={r.bound_p_adjusted or 1:.2g})")
    rank = str(r.rank or "") + (" =#1" if r.tied_with else "")
    return [rank, r.where(), r.change, loops, _fmt(r.accept_length, ".2f"), _fmt(r.tokens_per_s, ".0f"),
            fmt_ratio_ci(r.speed_vs_baseline, r.speed_ci), fmt_cost_ci(r.speed_cost, r.speed_cost_ci), verdict]


HEADERS = ["rank", "candidate", "change", "loops T>0 (spec vs base)", "accept len", "tok/s", "vs base [95% CI]",
           "speed cost [95% CI]", "verdict"]


def render_markdown(doc: MitigationDoc | dict) -> str:
    """mitigation.md: what was tried on which host, the ranked table, and the command to use."""
    doc = MitigationDoc.of(doc)
    sim = " (simulated engine)" if doc.simulated else ""
    facts = doc.facts or Environment()
    lines = [f"# Mitigation of `{doc.profile}` on {doc.host}{sim}", "",
             (f"Run {doc.run_id}; SGLang {facts.sglang or 'unknown'}; "
             f"architectures {', '.join(facts.architectures or []) or 'unknown'}; "
             f"{doc.reused or 'baseline sampled in this run'}."), "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for row in table_rows(doc):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    best = doc.row(doc.best)
    lines += ["", recommendation(doc)]
    if any(r.tied_with for r in doc.rows):
        lines += ["", ("`=#1`: tied with #1 (not distinguishable at these samples): the 95 % Welch interval of "
                       "its tokens/s over #1's contains 1.")]
    if best:
        keep = not doc.with_status("baseline") or beats_baseline(best)
        label = "Profile flags" if keep else f"{best.name}'s profile flags, if speculation must stay on"
        lines += ["", f"{label}: `" + " ".join(shlex.quote(f) for f in best.flags) + "`"]
    lines += ["", ("Speeds over non-looping samples: ratio of geometric-mean tokens/s with a 95 % Welch t interval "
                   "on ln(tokens/s) (docs/metrics.md, \"Speed intervals in mitigate\").")]
    return "\n".join(lines) + "\n"
