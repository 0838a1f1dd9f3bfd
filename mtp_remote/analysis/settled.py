"""When a streaming output's loop label is settled: the escaped-loop rule on a prefix, and its check schedule.

A sample counts as looping as soon as the *escaped-loop* rule of ``corpus/README.md`` holds on what it has
generated so far (a unit of ``n >= 3`` tokens repeated ``r >= 10`` times, or ``r >= 50`` for any ``n``; the
thresholds are :mod:`~mtp_remote.analysis.loops`' ``MIN_UNIT_TOKENS``, ``ESCAPED_MIN_REPEATS`` and
``ANY_UNIT_MIN_REPEATS``): no later token can undo it, so the runner may stop the request there and the
sample's ``loop`` label (:func:`~mtp_remote.analysis.degeneracy.analyze_text` on the whole output) is the
same as if it had run to ``max_tokens``. Why later tokens cannot undo it, given how ``analyze_text`` decides:

- the repeated stretch stays in the sequence; a longer output only extends it (same smallest period, at least
  as many copies), so the full output has a loop (tail or escaped) on the same tokens;
- structured content (code fences, rule lines) is left out before the escaped check; on *complete* lines it is
  fixed by the text before them (fences pair in order), so the prefix is judged on its complete lines only when
  its last line could still become structure (it starts with punctuation: ``---`` or a fence in the making),
  and otherwise without its last token (a word cut mid-way may still grow);
- with token ids the full output is judged on the ids first, then (escaped, with structure) on the text: the
  prefix must hold on both.

Near loops (a counter hiding a loop) are a *tail* property that later tokens can undo: no settled rule, such
outputs run on. Pure: text and ids in, a :class:`SettledLoop` or None out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .degeneracy import escaped_outside_structure, text_token_ids, token_offsets, structured_spans
from .tokens import split_tokens
from .loops import detect_loop

#: Our finish reason for a request stopped once its loop was settled (the server's are "stop" and "length").
LOOP_STOP = "loop-stop"
#: The first look, in tokens: an escaped loop needs at least 3 x 10 tokens.
FIRST_LOOK_TOKENS = 30


@dataclass(frozen=True)
class SettledLoop:
    """The settled loop of a prefix: ``unit_tokens`` n, ``repeats`` r, ``start_token`` (in the unit it was
    found on: ids when given, else text tokens), and ``tokens`` (the prefix's length in that unit)."""

    unit_tokens: int
    repeats: int
    start_token: int
    tokens: int

    def to_dict(self) -> dict:
        return {"rule": "escaped-loop", "unit_tokens": self.unit_tokens, "repeats": self.repeats,
                "start_token": self.start_token}


def _stable_text(text: str) -> str:
    """The part of a growing text no later character can re-tokenize or turn into structure (module doc)."""
    cut = text.rfind("\n") + 1
    last_line = text[cut:]
    head = last_line.lstrip()
    if head and not head[0].isalnum():
        return text[:cut]
    return text


def settled_loop(text: str, token_ids: Sequence[int] | None = None) -> SettledLoop | None:
    """The escaped loop of a *prefix* of an output that no continuation can undo, or None (module docstring).

    ``text``: the output so far, as :func:`~mtp_remote.analysis.degeneracy.analyze_text` will see it;
    ``token_ids``: its ids when the server streams them (then the rule must hold on the ids and on the text).
    Cost: one loop search, ~0.4 µs per token."""
    stable = _stable_text(text)
    raw, toks = split_tokens(stable)
    if stable is text and toks:  # the last token may still grow: leave it out
        raw, toks = raw[:-1], toks[:-1]
    if len(toks) < FIRST_LOOK_TOKENS:
        return None
    text_ids = text_token_ids(toks)
    spans = structured_spans(stable)
    if spans:
        run = escaped_outside_structure(text_ids, token_offsets(raw, toks), spans)
    else:
        found = detect_loop(text_ids, allow_tail=False)
        run = found[0] if found else None
    if run is None:
        return None
    if token_ids is None:
        return SettledLoop(run.period, run.repeats, run.start, len(toks))
    ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
    found = detect_loop(ids, allow_tail=False)
    if found is None:
        return None
    return SettledLoop(found[0].period, found[0].repeats, found[0].start, int(ids.shape[0]))


class LoopWatch:
    """Looks at a growing output on a geometric schedule and says when its loop is settled.

    ``look(text, token_ids)`` returns the :class:`SettledLoop` once :func:`settled_loop` holds, else None. The
    rule is checked when the output grew by ``max(step_tokens, size / 16)`` since the last look (size: ids
    when given, else characters / 4), so a 32k-token output costs ~50 looks, not one per chunk; a loop is
    stopped at most ~6 % of its length after it settled."""

    def __init__(self, step_tokens: int = 32):
        self.step = step_tokens
        self._next = FIRST_LOOK_TOKENS
        self.looks = 0

    def look(self, text: str, token_ids: Sequence[int] | None = None) -> SettledLoop | None:
        size = len(token_ids) if token_ids is not None else len(text) // 4
        if size < self._next:
            return None
        self._next = size + max(self.step, size // 16)
        self.looks += 1
        return settled_loop(text, token_ids)
