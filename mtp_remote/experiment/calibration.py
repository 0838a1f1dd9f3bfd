"""Calibration: the A/A arm, the baseline relaunched under another name (``compare.calibration``) and sampled at
another concurrency, so the verdict can tell a noisy host from a speculative profile that corrupts output."""

from __future__ import annotations

from dataclasses import replace

from ..config.playbook import Playbook
from .plan import LaunchPlan


def calibration_profile(playbook: Playbook) -> str:
    """Name of the A/A arm (the baseline relaunched, ``compare.calibration``): ``<baseline>-aa``."""
    return f"{playbook.baseline}-aa"


def calibration_plan(pb: Playbook, lp: LaunchPlan) -> tuple[LaunchPlan, int]:
    """The A/A arm of the baseline's plan ``lp``: its launch and requests under :func:`calibration_profile`'s
    name, and the concurrency it is sampled at (``compare.calibration_concurrency``, default half the baseline's,
    or 2)."""
    name = calibration_profile(pb)
    limit = pb.concurrency or pb.max_running_requests()
    concurrency = pb.compare.calibration_concurrency or (limit // 2 if limit > 1 else 2)
    return replace(lp, profile=name, requests=[replace(r, profile=name) for r in lp.requests]), concurrency
