"""How ``mitigate`` ranks loop-free candidates by speed, and says when it cannot tell them apart.

Each row carries its non-looping samples' speed summary on the log scale (``analysis.speed.LogSpeed``: n,
mean and variance of ln(completion_tokens / latency_s), the per-sample tokens/s of ``analysis.cells``) and
its baseline's. From those: the speed over the baseline with a 95 % Welch interval, the speed cost against the
as-deployed reference with its interval (:func:`speed_fields`), the rank by the point estimate with every
candidate the data cannot separate from #1 marked ``tied_with`` (:func:`rank_results`: the Welch interval of
candidate over #1 contains 1), the pick among #1 and its ties (:func:`pick_best`: fewest flag changes from
the as-deployed profile, then the faster point estimate) and the sentence that says so
(:func:`recommendation`). ``ranking_mc.py`` is the Monte Carlo of that ranking.

Before ranking, "loop-free" is a claim over the whole table (:func:`familywise_loop_free`, issue 31): each
candidate's bound test ("its loop excess is at least the margin") is Holm-adjusted over every candidate judged
together; a candidate whose adjusted p is not below alpha is ``no-loops-seen`` (no degenerate sample, excess
not bounded at this family size) or ``undecided``. With seven candidates tried, one of them looking clean by
chance is no longer called a cure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..analysis.speed import LogSpeed, log_contrast
from ..analysis.stats import holm
from .candidates import parse_flags
from .records import CandidateResult, MitigationDoc, SpeedFields

#: Confidence of every speed interval in the mitigation table.
SPEED_CONFIDENCE = 0.95
#: Rows that may be recommended: shown loop-free over the family, or (when none is) no loop seen at all.
CURES = ("loop-free", "no-loops-seen")
#: Rows ranked by speed: the cures and the baseline (speculation off), which every cure must beat.
RANKED = (*CURES, "baseline")
_ORDER = {"loop-free": 0, "baseline": 0, "no-loops-seen": 0, "undecided": 1, "pending": 2, "corrupts": 3,
          "crashed": 4, "launch-failed": 4, "skipped": 5, "not-comparable": 6, "reference": 7}


def familywise_loop_free(rows: list, alpha: float) -> None:
    """Holm over the bound tests of every candidate judged (rows with a ``bound_p``; not the reference, the
    baseline or rows ``not-comparable``), in place: each gets ``bound_p_adjusted`` and ``family``; a row whose
    verdict made it a cure (``loop-free``, or ``no-loops-seen`` from an earlier pass) stays ``loop-free``
    only when the adjusted p is below ``alpha``, else becomes ``no-loops-seen`` (no degenerate sample at
    T > 0) or ``undecided``, its evidence saying so. Idempotent: a merged fleet table is re-adjusted over all
    its candidates. The family-wise rate of a false "loop-free" over the table is then at most ``alpha``."""
    fam = [r for r in rows if r.bound_p is not None and r.status not in ("reference", "baseline", "not-comparable")]
    for r, a in zip(fam, holm([r.bound_p for r in fam])):
        r.bound_p_adjusted, r.family = a, len(fam)
        if r.status not in CURES:
            continue
        note = f"; loop-free not shown over {len(fam)} candidate{'s' if len(fam) > 1 else ''} (Holm p={a:.2g})"
        r.evidence = r.evidence.split("; loop-free not shown over ")[0]
        if a < alpha:
            r.status = "loop-free"
        else:
            r.status = "no-loops-seen" if r.loops == 0 else "undecided"
            r.evidence += note


def speed_fields(cand: LogSpeed | None, base: LogSpeed | None, ref: LogSpeed | None = None,
                 confidence: float = SPEED_CONFIDENCE) -> SpeedFields:
    """``speed_vs_baseline`` (exp of the mean log tokens/s difference: the ratio of geometric means) and
    ``speed_ci`` [low, high]; ``speed_cost`` = 1 − the same ratio against the reference (as deployed) and
    ``speed_cost_ci``. A point estimate needs one sample per arm, an interval two; None where undefined."""
    out = SpeedFields()
    if cand is None:
        return out
    if base is not None:
        out.speed_vs_baseline = math.exp(cand.mean - base.mean)
        r = log_contrast([cand], [base], confidence)
        out.speed_ci = [r.low, r.high] if r else None
    if ref is not None:
        out.speed_cost = 1.0 - math.exp(cand.mean - ref.mean)
        r = log_contrast([cand], [ref], confidence)
        out.speed_cost_ci = [1.0 - r.high, 1.0 - r.low] if r else None
    return out


def flag_changes(flags: Sequence[str], reference: Sequence[str]) -> int:
    """How many flags differ between a candidate's profile flags and the as-deployed ones: each flag added,
    removed or set to another value counts once."""
    a, b = dict(parse_flags(list(flags))), dict(parse_flags(list(reference)))
    return sum(1 for k in set(a) | set(b) if a.get(k, "\0") != b.get(k, "\0"))


def _ls(r, key: str) -> LogSpeed | None:
    return LogSpeed.from_dict(getattr(r, key, None))


def versus_top(r, top, confidence: float = SPEED_CONFIDENCE):
    """Welch interval of row ``r``'s speed over row ``top``'s: directly on the same host (the shared baseline
    cancels), as a ratio of the two baseline ratios across hosts. None when an arm lacks two samples."""
    if getattr(r, "host", None) == getattr(top, "host", None):
        return log_contrast([_ls(r, "log_speed")], [_ls(top, "log_speed")], confidence)
    return log_contrast([_ls(r, "log_speed"), _ls(top, "base_log_speed")],
                        [_ls(r, "base_log_speed"), _ls(top, "log_speed")], confidence)


def rank_results(rows: list, by: str = "speed_vs_baseline", confidence: float = SPEED_CONFIDENCE) -> list:
    """Loop-free rows and the baseline row (speculation off, 1.00x) first, fastest point estimate first
    (``by``: the speed over the baseline — on one host the same order as tokens/s, across hosts the only
    comparable figure), numbered; a loop-free row whose
    speed the samples cannot separate from #1's (:func:`versus_top` contains 1, or has too few samples to
    tell) gets ``tied_with`` = #1's name. Then undecided, corrupting, failed and skipped rows; the reference
    row last. Rows are :class:`~mtp_remote.search.mitigate.CandidateResult`; returns them sorted."""
    out = sorted(rows, key=lambda r: (_ORDER.get(r.status, 9), -(getattr(r, by) or 0.0)))
    free = [x for x in out if x.status in RANKED]
    for i, r in enumerate(free):
        r.rank = i + 1
        r.tied_with = None
        if i:
            c = versus_top(r, free[0], confidence)
            if c is None or not c.excludes_one:
                r.tied_with = free[0].name
    return out


def pick_best(ranked: list):
    """The candidate to recommend: #1, or among #1 and the rows tied with it the one with the fewest flag
    changes (``flag_changes``; unknown counts last), then the faster point estimate — among the rows shown
    ``loop-free``, or when there is none among the ``no-loops-seen`` ones. None when no row is either."""
    free = [r for r in ranked if r.status == "loop-free"] or [r for r in ranked if r.status == "no-loops-seen"]
    if not free:
        return None
    top = free[0]
    group = [top] + [r for r in free[1:] if r.tied_with == top.name or _tied(r, top)]
    return min(group, key=lambda r: (r.flag_changes if r.flag_changes is not None else math.inf,
                                     -(r.speed_vs_baseline or 0.0)))


def _tied(r, top) -> bool:
    """True when the samples cannot separate ``r``'s speed from ``top``'s (Welch interval contains 1)."""
    c = versus_top(r, top)
    return c is None or not c.excludes_one


def beats_baseline(row: CandidateResult) -> bool:
    """True when a loop-free row is faster than the baseline beyond doubt: its 95 % interval of the speed over
    the baseline lies above 1. Not faster, or not distinguishably so: turning speculation off is as fast."""
    ci = CandidateResult.of(row).speed_ci
    return bool(ci) and ci[0] > 1.0


def fmt_ratio_ci(ratio: float | None, ci: Sequence[float] | None) -> str:
    """``1.31x [1.18–1.45]``; ``–`` without a point estimate."""
    if ratio is None:
        return "–"
    return f"{ratio:.2f}x" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")


def fmt_cost_ci(cost: float | None, ci: Sequence[float] | None) -> str:
    """``22% [15%–30%]``; ``–`` without a point estimate."""
    if cost is None:
        return "–"
    return f"{cost:.0%}" + (f" [{ci[0]:.0%}–{ci[1]:.0%}]" if ci else "")


def recommendation(doc: MitigationDoc | dict) -> str:
    """One sentence on ``doc.best`` (a mitigation document, or its JSON mapping): loop-free, its speed over the
    baseline and its cost with their 95 % intervals — or, when the samples cannot separate it from other
    candidates, "X or Y: their speeds are not distinguishable with N samples; X has the smaller change"."""
    doc = MitigationDoc.of(doc)
    best = next((r for r in doc.with_status(*CURES) if r.name == doc.best), None)
    base = next(iter(doc.with_status("baseline")), None)
    base_speed = f"{base.tokens_per_s:.0f} tok/s" if base and base.tokens_per_s is not None else "its own speed"
    if best is None:
        return _no_cure(doc, base_speed)
    if base is not None and not beats_baseline(best):
        return _no_faster_than_off(best, base, base_speed)
    top = doc.with_status(best.status)[0]
    group = [top] + [r for r in doc.with_status(best.status)[1:] if r.tied_with == top.name]
    speed = f"{fmt_ratio_ci(best.speed_vs_baseline, best.speed_ci)} the baseline's tokens/s"
    cost = (f", speed cost {fmt_cost_ci(best.speed_cost, best.speed_cost_ci)} of the as-deployed speed"
            if best.speed_cost is not None else "")
    claim = "loop-free"
    if best.status == "no-loops-seen":
        claim = (f"no loop seen in {best.n} samples, but loop-free not shown over the {best.family} "
                 f"candidate(s) tried (Holm p={best.bound_p_adjusted or 1:.2g}): resume with more samples to "
                 f"confirm it")
    if len(group) == 1:
        return f"Best: **{best.where()}** ({best.change}): {claim}, {speed}{cost}."
    others = [r for r in group if r is not best]
    ns = sorted({ls.n if (ls := _ls(r, "log_speed")) else 0 for r in group})
    n = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"
    names = " or ".join([f"**{best.where()}**"] + [r.where() for r in others])
    if best.flag_changes is not None and all(
            r.flag_changes is not None and r.flag_changes > best.flag_changes for r in others):
        why = f"{best.name} has the smaller change ({best.flag_changes} flag(s))"
    else:
        why = f"{best.name} has the higher point estimate"
    return (f"Best: {names}: their speeds are not distinguishable with {n} non-looping samples each; {why}. "
            f"{best.name} ({best.change}): {claim}, {speed}{cost}.")


def _no_faster_than_off(best: CandidateResult, base: CandidateResult, base_speed: str) -> str:
    """The sentence when the best cure is not faster than the baseline beyond doubt: run without speculation."""
    how = "slower than" if (best.speed_ci and best.speed_ci[1] < 1.0) else \
        "not faster than" if (best.speed_vs_baseline or 0.0) <= 1.0 else "not distinguishably faster than"
    tps = f", {best.tokens_per_s:.0f} tok/s" if best.tokens_per_s is not None else ""
    return (f"Recommendation: **run without speculation** (the {base.name} profile, {base_speed}): the "
            f"fastest loop-free cure, {best.name} ({best.change}), runs at "
            f"{fmt_ratio_ci(best.speed_vs_baseline, best.speed_ci)} the baseline's tokens/s"
            f"{tps}, {how} turning speculation off.")


def _no_cure(doc: MitigationDoc, base_speed: str) -> str:
    """The sentence when no candidate is loop-free: what the candidates did instead (crashes are a bug to
    report, not "no cure"), and speculation off as what runs meanwhile."""
    tried = [r for r in doc.rows if r.status not in ("reference", "baseline", "skipped", "pending")]
    crashed = [r for r in tried if r.status in ("crashed", "launch-failed")]
    corrupt = [r for r in tried if r.status == "corrupts"]
    run = doc.run_id or "RUN_ID"
    meanwhile = f"meanwhile run without speculation (the baseline, {base_speed})"
    if crashed and len(crashed) == len(tried):
        causes = ", ".join(f"{r.name}: {r.verdict or r.status}" for r in crashed)
        return (f"No candidate could be judged: every one that was tried failed ({causes}). A server that "
                f"crashes is a bug worth reporting: `mtp-remote bug-report {run}`; {meanwhile}.")
    parts = []
    if corrupt:
        parts.append(f"{len(corrupt)} still loop{'s' if len(corrupt) == 1 else ''}")
    if crashed:
        parts.append(f"{len(crashed)} failed ({', '.join(r.verdict or r.status for r in crashed)})")
    if len(tried) > len(corrupt) + len(crashed):
        parts.append(f"{len(tried) - len(corrupt) - len(crashed)} undecided")
    what = "; ".join(parts) or "none was run"
    return (f"No candidate is loop-free ({what}): run `mtp-remote bisect` for the minimal trigger and report it "
            f"upstream (`mtp-remote bug-report`); {meanwhile}.")
