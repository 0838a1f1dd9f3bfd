"""The fast run finder and repeated-span search agree with brute force on random sequences."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mtp_remote.analysis.loops import detect_loop, find_runs, longest_repeated_span


def brute_runs(seq: list[int], min_repeats: int = 3) -> set[tuple[int, int, int]]:
    """Every maximal stretch with a primitive period p and >= min_repeats copies, by definition."""
    n, out = len(seq), set()
    for p in range(1, n // min_repeats + 1):
        i = 0
        while i + p < n:
            if seq[i] != seq[i + p]:
                i += 1
                continue
            j = i
            while j + p < n and seq[j] == seq[j + p]:
                j += 1
            start, end = i, j + p
            unit = seq[start:start + p]
            primitive = all(p % q or unit[q:] != unit[:-q] for q in range(1, p))
            if end - start >= min_repeats * p and primitive:
                out.add((start, end, p))
            i = j + 1
    return out


def random_sequence(rng: random.Random) -> list[int]:
    """Noise with a few planted repeats of random units (short and long)."""
    seq: list[int] = []
    while len(seq) < 300:
        if rng.random() < 0.3:
            unit = [rng.randrange(6) for _ in range(rng.choice([1, 2, 3, 5, 40, 70]))]
            seq += unit * rng.randint(2, 12) + unit[: rng.randrange(len(unit))]
        else:
            seq += [rng.randrange(6) for _ in range(rng.randint(1, 30))]
    return seq


@pytest.mark.parametrize("seed", range(25))
def test_find_runs_matches_brute_force(seed):
    seq = random_sequence(random.Random(seed))
    fast = {(r.start, r.end, r.period) for r in find_runs(np.array(seq), lambda s, e, p: True)}
    expected = brute_runs(seq)
    short = {r for r in expected if r[2] <= 32}
    assert {r for r in fast if r[2] <= 32} == short
    long_found = {r for r in fast if r[2] > 32}
    assert long_found <= expected
    # long periods come from anchors: every planted long loop with >= 3 copies is found
    assert {r for r in expected if r[2] > 32 and (r[1] - r[0]) >= 3 * r[2] + 40} <= long_found


@pytest.mark.parametrize("seed", range(10))
def test_longest_repeated_span_matches_brute_force(seed):
    seq = random_sequence(random.Random(100 + seed))[:200]
    text = ",".join(map(str, seq))
    best = 0
    for length in range(1, len(seq)):
        grams = {tuple(seq[i:i + length]) for i in range(len(seq) - length + 1)}
        if len(grams) < len(seq) - length + 1:
            best = length
        else:
            break
    assert longest_repeated_span(np.array(seq)) == best, text[:80]


def test_detect_loop_prefers_the_tail_loop_over_a_longer_escaped_one():
    seq = [9, 8, 7] * 30 + list(range(100, 140)) + [1, 2, 3, 4] * 9
    run, kind = detect_loop(np.array(seq))
    assert (kind, run.period, run.start) == ("tail", 4, 130)
