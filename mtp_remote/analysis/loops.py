"""Periodic runs in integer token sequences: the engine under loop detection and repeated-span search.

A *run* is a maximal stretch ``ids[start:end]`` with smallest period ``p`` (``ids[i] == ids[i + p]``
throughout) that holds at least three copies of its unit. This module finds the runs that matter for the
loop rules of ``corpus/README.md`` in about O(n) numpy work and applies those rules (:func:`detect_loop`).
Every period up to :data:`SMALL_PERIOD` is checked exhaustively (one vector comparison per period); longer periods are proposed by content-defined
anchors (32-grams whose rolling hash is 0 mod 4; their repeat distances inside a loop equal the period) and
then verified exactly, so a reported run is never a hash artefact. It also computes the longest repeated
span with rolling hashes (exact-length gallop from the loops' lower bound). Pure: arrays in, numbers out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: The loop thresholds of ``corpus/README.md`` (tail loop, escaped loop, any unit; see ``degeneracy.py``).
TAIL_MIN_TOKENS = 32
TAIL_MIN_REPEATS = 3
ESCAPED_MIN_REPEATS = 10
ANY_UNIT_MIN_REPEATS = 50
MIN_UNIT_TOKENS = 3

#: Periods up to this many tokens are checked exhaustively; longer ones through anchors.
SMALL_PERIOD = 32
_ANCHOR_K = 32  # k-gram length hashed for the anchors
_ANCHOR_MOD = 4  # a k-gram is an anchor when its hash is 0 modulo this (a power of two)
_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible modulo 2**64
_MIX = np.uint64(0xBF58476D1CE4E5B9)


@dataclass(frozen=True)
class Run:
    """A maximal periodic stretch ``[start, end)`` of tokens with smallest period ``period`` (tokens).

    ``copies``: the complete copies when they were counted on a subsequence (tokens left out inside the
    span, e.g. code fences between the copies); None to count them from the span."""

    start: int
    end: int
    period: int
    copies: int | None = None

    @property
    def length(self) -> int:
        """Tokens covered, the trailing partial copy included."""
        return self.end - self.start

    @property
    def repeats(self) -> int:
        """Complete copies of the unit (a trailing partial copy is not counted)."""
        return self.copies if self.copies is not None else self.length // self.period


def _runs_for_period(a: np.ndarray, p: int, min_len: int) -> list[tuple[int, int]]:
    """Maximal ``[start, end)`` stretches of period ``p`` covering at least ``min_len`` tokens."""
    n = a.shape[0]
    need = min_len - p  # consecutive positions with a[i] == a[i + p]
    if need < 1 or n - p < need:
        return []
    eq = a[p:] == a[:-p]
    block = (need + 1) // 2  # a stretch of ``need`` Trues contains an aligned all-True block of this size
    m = (eq.shape[0] // block) * block
    if block > 1 and not eq[:m].reshape(-1, block).all(axis=1).any():
        return []
    edges = np.flatnonzero(np.diff(eq.view(np.int8), prepend=np.int8(0), append=np.int8(0)))
    starts, stops = edges[0::2], edges[1::2]
    keep = (stops - starts) >= need
    return [(int(s), int(e) + p) for s, e in zip(starts[keep], stops[keep])]


def _is_primitive(unit: np.ndarray) -> bool:
    """True when ``unit`` is not a power of a shorter unit (its smallest period is its length)."""
    p = unit.shape[0]
    for q in range(1, p // 2 + 1):
        if p % q == 0 and np.array_equal(unit[q:], unit[:-q]):
            return False
    return True


def token_hashes(a: np.ndarray) -> np.ndarray:
    """Mix integer ids into well-spread uint64 values (same id, same value)."""
    x = a.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(31)
    x *= _MIX
    x ^= x >> np.uint64(29)
    return x


class GramHasher:
    """Rolling polynomial hashes of every ``L``-gram of a sequence, modulo 2**64.

    ``grams(L)[i]`` identifies ``ids[i:i+L]``; equal spans give equal values and unequal spans collide with
    probability about ``n**2 / 2**64`` per call (callers verify anything they report).
    """

    def __init__(self, a: np.ndarray):
        n = a.shape[0]
        x = token_hashes(a)
        with np.errstate(over="ignore"):
            powers = np.cumprod(np.full(n + 1, _BASE, dtype=np.uint64))
            powers = np.concatenate(([np.uint64(1)], powers[:-1]))
            inv = np.uint64(pow(int(_BASE), -1, 2**64))
            self._inv_powers = np.cumprod(np.full(n + 1, inv, dtype=np.uint64))
            self._inv_powers = np.concatenate(([np.uint64(1)], self._inv_powers[:-1]))
            self._prefix = np.concatenate(([np.uint64(0)], np.cumsum(x * powers[:n], dtype=np.uint64)))
        self.n = n

    def grams(self, length: int) -> np.ndarray:
        """uint64 array of shape ``(n - length + 1,)``; empty when ``length > n``."""
        m = self.n - length + 1
        if m <= 0 or length <= 0:
            return np.zeros(0, dtype=np.uint64)
        with np.errstate(over="ignore"):
            return (self._prefix[length:] - self._prefix[:m]) * self._inv_powers[:m]


def _anchor_periods(hasher: GramHasher, max_period: int) -> list[int]:
    """Candidate periods above :data:`SMALL_PERIOD`: repeat distances of sampled k-grams (seen twice+).

    A k-gram is an anchor when its hash is 0 modulo :data:`_ANCHOR_MOD` (content-defined, so every copy of
    a unit has the same anchors). A unit of p > 32 tokens has no anchor with probability about
    ``(1 - 1/_ANCHOR_MOD) ** p`` (< 1e-4).
    """
    g = hasher.grams(_ANCHOR_K)
    picks = np.flatnonzero((g & np.uint64(_ANCHOR_MOD - 1)) == 0)
    if picks.shape[0] < 2:
        return []
    vals = g[picks]
    order = np.argsort(vals, kind="stable")
    sv, sp = vals[order], picks[order]
    same = sv[1:] == sv[:-1]
    dist = (sp[1:] - sp[:-1])[same]
    dist = dist[(dist > SMALL_PERIOD) & (dist <= max_period)]
    if dist.size == 0:
        return []
    values, counts = np.unique(dist, return_counts=True)
    return [int(v) for v in values[counts >= 2]]


def find_runs(a: np.ndarray, keep: Callable[[int, int, int], bool], *, min_repeats: int = 3,
              min_length: Callable[[int], int] | None = None) -> list[Run]:
    """Maximal periodic runs of ``a`` (1-D integer array) that ``keep(start, end, period)`` accepts.

    Only runs with at least ``min_repeats`` complete copies of a primitive unit are considered, and at
    least ``min_length(period)`` tokens when given (a cheap pre-filter; ``keep`` has the last word). Periods
    up to :data:`SMALL_PERIOD` are exhaustive; longer periods rely on anchors and are found whenever a
    copy of the unit holds an anchor 32-gram that is unique inside the unit (true of natural text). Runs
    are sorted by start, then period. Cost: one vector comparison per small period plus one sort of n/4
    anchors.
    """
    n = int(a.shape[0])
    runs: list[Run] = []
    max_period = n // min_repeats
    periods = list(range(1, min(SMALL_PERIOD, max_period) + 1))
    if max_period > SMALL_PERIOD:
        periods += _anchor_periods(GramHasher(a), max_period)
    for p in periods:
        floor = max(min_repeats * p, min_length(p) if min_length else 0)
        for s, e in _runs_for_period(a, p, floor):
            if keep(s, e, p) and _is_primitive(a[s:s + p]):
                runs.append(Run(s, e, p))
    runs.sort(key=lambda r: (r.start, r.period))
    return runs


def longest_repeated_span(a: np.ndarray, lower_bound: int = 0) -> int:
    """Length in tokens of the longest span occurring at least twice in ``a`` (occurrences may overlap).

    ``lower_bound`` is a length already known to repeat (a run of period p and length L gives L - p);
    the search gallops upward from it, so a looping text costs one or two hash passes. Exact up to 64-bit
    hash collisions. 0 for sequences without any repeated token.
    """
    n = int(a.shape[0])
    if n < 2:
        return 0
    hasher = GramHasher(a)

    def repeats(length: int) -> bool:
        g = np.sort(hasher.grams(length))
        return bool(g.shape[0] > 1 and np.any(g[1:] == g[:-1]))

    lo = max(0, min(lower_bound, n - 1))  # known to repeat (0 trivially)
    if lo and not repeats(lo):
        lo = 0
    step = 1
    hi = lo + 1
    while hi < n and repeats(hi):
        lo = hi
        step *= 2
        hi = lo + step
    hi = min(hi, n)  # lo repeats, hi does not (or is out of range)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if repeats(mid):
            lo = mid
        else:
            hi = mid
    return lo


# --- the README loop rules over these runs ------------------------------------------------------------


def _loop_rules(n_total: int, tail_end: int) -> Callable[[int, int, int], bool]:
    """The README thresholds as a ``keep(start, end, period)`` predicate for :func:`find_runs`."""

    def keep(start: int, end: int, p: int) -> bool:
        r = (end - start) // p
        if r >= ANY_UNIT_MIN_REPEATS:
            return True
        if p < MIN_UNIT_TOKENS:
            return False
        if r >= ESCAPED_MIN_REPEATS:
            return True
        return end >= tail_end and r >= TAIL_MIN_REPEATS and (n_total - start) >= TAIL_MIN_TOKENS

    return keep


def detect_loop(ids: np.ndarray, *, cut_last_token: Sequence[str] | None = None,
                allow_tail: bool = True) -> tuple[Run, str] | None:
    """The loop of an integer sequence by the README rules: ``(run, "tail" | "escaped")`` or None.

    ``cut_last_token``: the text tokens, when ``ids`` came from them; lets a last token that is a proper
    prefix of the expected one (a word cut by ``max_tokens``) count as a partial copy of the unit.
    ``allow_tail=False`` applies the escaped-loop thresholds only (for a sequence with parts left out, whose
    end is not the text's end).
    """
    n = int(ids.shape[0])
    if n == 0:
        return None
    toks = cut_last_token
    cut_ok = allow_tail and toks is not None and n >= 2

    def reaches_end(run: Run) -> bool:
        if run.end >= n:
            return True
        if cut_ok and run.end == n - 1:
            expected = toks[n - 1 - run.period]
            return expected != toks[n - 1] and expected.startswith(toks[n - 1])
        return False

    tail_end = (n - 1 if cut_ok else n) if allow_tail else n + 1
    runs = find_runs(ids, _loop_rules(n, tail_end),
                     min_length=lambda p: p * (ANY_UNIT_MIN_REPEATS if p < MIN_UNIT_TOKENS else TAIL_MIN_REPEATS))
    best: tuple[Run, str] | None = None
    for run in runs:
        r = run.repeats
        is_tail = allow_tail and reaches_end(run) and (
            r >= ANY_UNIT_MIN_REPEATS
            or (run.period >= MIN_UNIT_TOKENS and r >= TAIL_MIN_REPEATS and run.length >= TAIL_MIN_TOKENS)
        )
        is_escaped = r >= ANY_UNIT_MIN_REPEATS or (run.period >= MIN_UNIT_TOKENS and r >= ESCAPED_MIN_REPEATS)
        if is_tail:
            if run.end == n - 1:
                run = Run(run.start, n, run.period)
            if best is None or best[1] != "tail" or run.length > best[0].length:
                best = (run, "tail")
        elif is_escaped and (best is None or (best[1] != "tail" and run.length > best[0].length)):
            best = (run, "escaped")
    return best


def may_end_in_loop(ids: np.ndarray, k: int = 16) -> bool:
    """A cheap necessary condition for a tail loop: the ``k`` tokens before the last one occur earlier too.

    Any tail loop (>= 32 tokens, >= 3 copies; a cut last token allowed) repeats the window ``ids[n-1-k:n-1]``
    exactly one period earlier, so when that window occurs nowhere else there is none. Costs k vector
    comparisons on a shrinking candidate set.
    """
    n = int(ids.shape[0])
    if n < TAIL_MIN_TOKENS:
        return False
    end = n - 1 - k
    target = ids[end:n - 1]
    cand = np.flatnonzero(ids[:end] == target[0])
    for j in range(1, k):
        if cand.size == 0:
            return False
        cand = cand[ids[cand + j] == target[j]]
    return cand.size > 0
