"""Calibration: the A/A arm, the baseline relaunched under another name (``compare.calibration``) and sampled like
it, so the verdict can tell a noisy host (and a launch effect) from a speculative profile that corrupts output."""

from __future__ import annotations

from dataclasses import replace

from ..config.playbook import Playbook
from ..records.summary import aa_profile_name
from .plan import LaunchPlan


def calibration_profile(playbook: Playbook) -> str:
    """Name of the A/A arm (the baseline relaunched, ``compare.calibration``): ``<baseline>-aa``."""
    return aa_profile_name(playbook.baseline)


def calibration_plan(pb: Playbook, lp: LaunchPlan) -> tuple[LaunchPlan, int | None]:
    """The A/A arm of the baseline's plan ``lp``: its launch and requests under :func:`calibration_profile`'s
    name, and the concurrency it is sampled at: ``compare.calibration_concurrency``, else None — the
    baseline's. At half concurrency (the old default) its "run-to-run spread" measured the concurrency change
    (±12-57 %) and disabled ``spec-slower``; run like the baseline, what differs is the launch alone."""
    name = calibration_profile(pb)
    return replace(lp, profile=name, requests=[replace(r, profile=name) for r in lp.requests]), \
        pb.compare.calibration_concurrency


def with_calibration(pb: Playbook, plans: list[LaunchPlan], *, relaunch: bool
                     ) -> tuple[list[LaunchPlan], dict[str, int]]:
    """The run's launches: ``plans`` with the A/A arm right after the baseline when the playbook asks for it
    (``compare.calibration``) and the kind of server can relaunch (``capabilities.relaunch``: not an attached
    endpoint), and {profile: concurrency} for the arms sampled at another concurrency than the playbook's. What
    the opening line counts and what the runner launches are both this (one plan)."""
    launches: list[LaunchPlan] = []
    concurrency: dict[str, int] = {}
    for lp in plans:
        launches.append(lp)
        if lp.profile == pb.baseline and pb.compare.calibration and relaunch:
            aa, conc = calibration_plan(pb, lp)
            launches.append(aa)
            if conc is not None:
                concurrency[aa.profile] = conc
    return launches, concurrency
