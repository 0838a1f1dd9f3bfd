"""The verdict's evidence in words (``analysis.verdict`` writes its sentences with these): loop counts, the
samples that would decide, the greedy comparison (divergence, its gate, the greedy bound and what closes it).
Pure: comparison rows, greedy pairs and bounds in, phrases out."""

from __future__ import annotations

from collections.abc import Sequence

from ..records.summary import Comparison
from .lossless import GreedyBound, LosslessTest
from .stopping import Design


def fmt_p(p: float) -> str:
    """A p-value as the evidence gives it (two significant digits)."""
    return f"{p:.2g}"


def fmt_t(t: float) -> str:
    """A temperature as the evidence gives it (``0.7``, ``0``)."""
    return f"{t:g}"


def greedy_loops_lead(rows: list[Comparison]) -> str:
    """The greedy cell's loops as the lead of a lossless verdict, when the speculative arm loops on more prompts
    than the baseline: ``"loops: spec 3/8 vs baseline 0/8 degenerate at T=0 (greedy: the same prompts; 3 with a
    settled loop where the baseline's output of the prompt has none); "``.
    Greedy loop counts are no test of their own (one output per prompt; the greedy lossless test judges T = 0),
    but they are the symptom a user looks for first; empty otherwise."""
    r = next((r for r in rows if r.temperature == 0.0 and r.spec_loops > r.base_loops), None)
    if r is None:
        return ""
    only = r.greedy_spec_only_loops
    # the count is of settled loops the pairing located (a near loop cut at max_tokens is degenerate, not located)
    where = f"; {only} with a settled loop where the baseline's output of the prompt has none" if only else ""
    return f"loops: {counts_phrase(r)} (greedy: the same prompts{where}); "


def greedy_phrase(pairs, rows, near_tie_margin: float) -> tuple[str, str | None]:
    """(evidence phrase, the first divergence beyond a near tie in words or None) of the greedy pairs
    (``pairing.greedy_report``); fills the T = 0 row."""
    if not pairs:
        return "", None
    diverged = [g for g in pairs if not g.divergence.identical]
    spec_only_loops = [g for g in pairs if g.spec_loop_onset is not None and not g.base_loops]
    hard = [g for g in diverged if g.near_tie is False]
    ties = sum(bool(g.near_tie) for g in diverged)
    for r in rows:
        if r.temperature == 0.0:
            r.update(greedy_pairs=len(pairs), greedy_diverged=len(diverged), greedy_near_tie_flips=ties,
                     greedy_hard_flips=len(hard), greedy_spec_only_loops=len(spec_only_loops),
                     greedy_first_divergence=min((g.divergence.first_index for g in diverged), default=None),
                     greedy_min_lcs_ratio=min(g.divergence.lcs_ratio for g in pairs))
    if not diverged:
        return f"greedy output identical to baseline on {len(pairs)}/{len(pairs)} prompts", None
    first = min(diverged, key=lambda g: g.divergence.first_index)
    note = f"; {ties} at a near tie" if ties else ""
    phrase = (f"greedy output diverges at token {first.divergence.first_index} "
              f"({len(diverged)}/{len(pairs)} prompts{note})")
    gate = None
    if spec_only_loops:
        gate = f"greedy output loops on {len(spec_only_loops)}/{len(pairs)} prompts where the baseline's does not"
    elif hard:
        g = min(hard, key=lambda g: g.divergence.first_index)
        gate = (f"greedy output diverges at token {g.divergence.first_index} of prompt {g.prompt_id} where the "
                f"baseline's top-2 margin is {g.margin:.2f} nats (not a near tie: > {near_tie_margin:.2g})")
    return phrase, gate


def counts_phrase(r: Comparison) -> str:
    """A comparison's loop counts: ``spec 9/10 vs baseline 0/10 degenerate at T=0.7``."""
    return f"spec {r.spec_loops}/{r.spec_n} vs baseline {r.base_loops}/{r.base_n} degenerate at T={fmt_t(r.temperature)}"


def launch_note(fam: list[Comparison], corrupt: list[Comparison], alpha: float) -> str:
    """The phrase for a loop excess over the baseline that the A/A contrast did not confirm (the speculative
    arm loops more than the baseline's launch but not more than its A/A relaunch): '' when there is none."""
    for r in fam:
        if r in corrupt or "p_vs_aa" not in r or not r.p:
            continue
        holm = r.p_adjusted / r.p
        if r.p_vs_base * holm < alpha:
            return (f"; the excess over the baseline (p={fmt_p(min(1.0, r.p_vs_base * holm))}) is not one over "
                    f"its A/A relaunch ({r.aa_loops}/{r.aa_n} degenerate, p={fmt_p(r.p_adjusted)}): the "
                    f"baseline's two launches differ by as much, so it is not called corruption")
    return ""


def resumed_note(design: Design) -> str:
    """The caveat of a loop verdict at a resume look (``design.rounds`` past the first run's K0): each resume
    relaunched every arm and the loop test reads the pooled samples of those launches as one rate per arm, so a
    launch-to-launch spread is outside its alpha (measured: a chain of up to 3 resumes on a healthy host at a
    launch spread of 0.5 in log-odds, 8.3 % with the A/A contrast; ``docs/metrics.md``). '' on a first run."""
    if design.rounds <= design.k0:
        return ""
    return ("; a resumed run: its samples pool several launches per arm, and a launch-to-launch spread is outside "
            "the loop test (docs/metrics.md, launch effect): confirm with a new run (not --resume)")


def need_phrase(r: Comparison, design: Design) -> str:
    """What would decide an open comparison: the samples per arm, or why no number would."""
    n = r.samples_needed
    if n:
        return f"about {n} samples per arm would decide"
    return (f"an excess this close to the {design.margin:.0%} margin needs more than 100000 samples per arm; "
            f"raise compare.margin or accept the finding")


def greedy_need(gb: GreedyBound) -> str:
    """What would close an open greedy bound, in words (the evidence's "about N samples per arm" for greedy)."""
    if gb.prompts_needed is None:
        return "no number of identical prompts closes it at this floor (raise compare.greedy_margin)"
    return (f"{gb.prompts_needed} distinct prompts with greedy output identical beyond near ties would close it "
            f"({gb.prompts_needed - gb.prompts} more than this run's {gb.prompts})" + censored_note(gb))


def censored_note(gb: GreedyBound) -> str:
    """The note on prompts a near-tie flip left out of the count, '' without any."""
    if not gb.censored:
        return ""
    return (f"; {gb.censored} of {gb.censored + gb.prompts} diverged at a near tie first and are not counted "
            f"(shorter greedy outputs, max_tokens, leave fewer)")


def greedy_next(gb: GreedyBound, tests: Sequence[LosslessTest], gate: str | None) -> str | None:
    """What closes a greedy-only plan's open gate (the ``next:`` line reads it from the T = 0 row), None when
    nothing is open: an A/A arm where a hard divergence has no floor to be judged against, more distinct prompts
    where the bound is above the margin (the ``next:`` line adds the command that runs again)."""
    if gate is not None and any(t.name == "greedy" and not t.judged and t.counts["hard"] for t in tests):
        return "measure this host's floor: set `compare.calibration: true` (an A/A arm) in the playbook"
    if gate is None and not gb.closed:
        if gb.prompts_needed is None:
            return "raise `compare.greedy_margin`: no number of identical prompts closes the gate at this floor"
        return (f"give the playbook at least {gb.prompts_needed} distinct prompts ({gb.prompts_needed - gb.prompts} "
                f"more): that many with greedy output identical beyond near ties bound the per-prompt divergence "
                f"rate under {gb.margin:.0%} at {gb.confidence:.0%}{censored_note(gb)}")
    return None
