"""Early stopping while sampling: one cell's decision by the verdict's own rule (``analysis.stopping`` with the
design of ``analysis.diagnosis``), so a cell stops being fed once the test that will judge it is settled."""

from __future__ import annotations

from ..analysis import stopping
from ..analysis.diagnosis import design_of
from ..config.playbook import Playbook
from .calibration import calibration_profile
from .plan import LaunchPlan


def cell_decision(pb: Playbook, profiles: list[str] | None, lp: LaunchPlan, temperature: float,
                  records: list[dict], *, recorded: dict | None = None) -> dict:
    """Early-stopping state of one cell from ``records`` (samples.jsonl dicts held in memory: the
    baseline's, and this profile's whole rounds only; see :class:`~mtp_remote.experiment.sampling.Cells`): the decision rule of the
    verdict (analysis.stopping.cell_decision with diagnosis.design_of — one rule from first sample to
    verdict). ``recorded``: the design the run's first launch recorded (a resume is a later look of it). Greedy
    cells are not a loop test: sampled in full, with no p-value. With ``kl_probe`` no cell stops early except
    for *spec-loops-more*: the KL test needs the whole budget of probed samples (the baseline's: its floor).
    With ``compare.calibration`` a speculative cell's loop excess settles it only beyond the A/A arm's too (the
    A/A contrast, ``stopping.contrast_p``; its samples are among ``records`` once it has run)."""
    n_spec = sum(1 for p in pb.profile_order() if p != pb.baseline and (not profiles or p in profiles))
    design = design_of(pb, n_spec, temperature, recorded=recorded)
    if temperature == 0:  # greedy cells are lossless evidence, not a loop test: sampled in full, no p-value
        return {"settled": False, "outcome": "continue", "reason": "greedy: compared with the baseline's output",
                "n": sum(1 for r in records if r.profile == lp.profile), "budget": design.rounds,
                "p": None, "bound": None}
    d = stopping.cell_decision(records, profile=lp.profile, baseline=pb.baseline, temperature=temperature,
                               design=design, aa=calibration_profile(pb) if pb.compare.calibration else None)
    if pb.kl_probe and d["settled"] and d["outcome"] != "spec-loops-more":
        d = {**d, "settled": False, "reason": d["reason"] + "; sampling on for the KL probe"}
    return d
