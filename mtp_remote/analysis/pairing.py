"""Pairing of samples across arms, and the greedy (T=0) comparison of paired outputs.

A loop under speculation only means something against the matched baseline sample: same prompt, same
sample index, same seed, same temperature. :func:`pair_samples` builds those pairs; :func:`greedy_report`
compares every paired temperature-0 output (first divergence index, LCS ratio). Works on any object with
the attributes of ``verdict.SampleObs`` (duck-typed to keep this module free of cycles). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .divergence import NEAR_TIE_MARGIN, GreedyDivergence, greedy_divergence


def pair_key(sample: Any) -> tuple:
    """``(temperature, prompt_id, sample_index, seed)``: what must match for two samples to pair."""
    return (float(sample.temperature), sample.prompt_id, sample.sample_index, sample.seed)


def pair_samples(spec: Sequence[Any], base: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Pairs ``(spec_sample, base_sample)`` with equal :func:`pair_key`, in the spec arm's order.

    Samples without a counterpart are left out; when a key repeats in an arm, the first sample wins.
    """
    by_key: dict[tuple, Any] = {}
    for b in base:
        by_key.setdefault(pair_key(b), b)
    return [(s, by_key[pair_key(s)]) for s in spec if pair_key(s) in by_key]


@dataclass(frozen=True)
class GreedyPair:
    """One paired T=0 comparison; ``spec_loop_onset`` is the spec output's loop start token or None.

    ``near_tie``: the divergence sits where the baseline's top-2 logprob margin is below
    ``divergence.NEAR_TIE_MARGIN`` (None without margins or without a divergence on ids).
    """

    prompt_id: str
    divergence: GreedyDivergence
    spec_loop_onset: int | None
    base_loops: bool
    near_tie: bool | None = None
    margin: float | None = None  # the baseline's top-2 margin at the first divergence (nats), when known


def _comparable(sample: Any):
    """Token ids when present, else the text (``text`` attribute), else None."""
    ids = getattr(sample, "output_ids", None)
    if ids:
        return ids
    return getattr(sample, "text", None)


def greedy_report(spec: Sequence[Any], base: Sequence[Any],
                  near_tie_margin: float = NEAR_TIE_MARGIN) -> list[GreedyPair]:
    """Compare every paired, successful temperature-0 output of the two arms.

    Ids are compared when both samples carry ``output_ids``; otherwise both texts (split by
    ``degeneracy.tokenize``). Pairs where either side has neither are skipped. ``near_tie_margin``: nats
    (a host's calibrated value, see ``divergence.Calibration``).
    """
    out: list[GreedyPair] = []
    for s, b in pair_samples(spec, base):
        if float(s.temperature) != 0.0 or s.metrics is None or b.metrics is None:
            continue
        sa, ba = _comparable(s), _comparable(b)
        if sa is None or ba is None:
            continue
        if isinstance(sa, str) != isinstance(ba, str):
            sa, ba = getattr(s, "text", None), getattr(b, "text", None)
            if sa is None or ba is None:
                continue
        onset = s.metrics.loop.start_token if s.metrics.loop else None
        div = greedy_divergence(sa, ba)
        margins = getattr(b, "top2_margins", None)
        tie = at = None
        if margins and div.unit == "ids" and div.first_index is not None and div.first_index < len(margins):
            at = float(margins[div.first_index])
            tie = bool(at < near_tie_margin)
        out.append(GreedyPair(s.prompt_id, div, onset, b.metrics.is_loop, tie, at))
    return out
