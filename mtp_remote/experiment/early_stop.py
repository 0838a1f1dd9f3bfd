"""Early stopping while sampling: one cell's decision by the verdict's own rule (``analysis.stopping`` with the
design of ``analysis.diagnosis``), so a cell stops being fed once the test that will judge it is settled."""

from __future__ import annotations

from dataclasses import replace

from ..analysis import stopping
from ..analysis.diagnosis import design_of
from ..config.playbook import Playbook
from .plan import LaunchPlan


def cell_decision(pb: Playbook, profiles: list[str] | None, lp: LaunchPlan, temperature: float,
                  records: list[dict]) -> dict:
    """Early-stopping state of one cell from ``records`` (samples.jsonl dicts held in memory: the
    baseline's, and this profile's whole rounds only; see :class:`~mtp_remote.experiment.sampling.Cells`): the decision rule of the
    verdict (analysis.stopping.cell_decision with diagnosis.design_of — one rule from first sample to
    verdict)."""
    n_spec = sum(1 for p in pb.profile_order() if p != pb.baseline and (not profiles or p in profiles))
    design = design_of(pb, n_spec, temperature)
    if temperature == 0:  # greedy cells are evidence, not a test: sampled in full
        design = replace(design, sequential=False)
    return stopping.cell_decision(records, profile=lp.profile, baseline=pb.baseline, temperature=temperature,
                         design=design)
