"""Degeneracy metrics of one generated text: repetition loops, n-gram repetition, compression, think block.

This is the per-sample half of the diagnosis: :func:`analyze_text` turns an output (and, when the server
returned them, its token ids) into a :class:`TextMetrics`. Loops follow the definition of
``corpus/README.md`` exactly; the other figures are standard degeneration measures (seq-rep-n of Welleck
et al. 2019, distinct-n of Li et al. 2016, zlib compression ratio). Pure and ~O(n): a 32k-token output is
analysed in a few milliseconds (see ``docs/PERFORMANCE.md``).

Loop definition (``corpus/README.md``):

- **Tokens.** Without token ids the text is split into words (runs of letters/digits), each CJK character,
  each punctuation or symbol character (emoji included) and each newline (``"\\n"``); other whitespace
  (``"\\r"`` included) only separates tokens. Combining marks (Mn/Mc/Me) and joiners (ZWJ, ZWNJ, tags)
  belong to the character before them (``"नहीं"`` is one word, ``"❤️"`` one symbol). With ids, loops are
  detected on the ids.
- **Tail loop.** The text ends in consecutive copies of a unit of ``n`` tokens (a trailing partial copy
  allowed), repeated ``r`` times, covering at least 32 tokens, with ``n >= 3 and r >= 3``, or ``r >= 50``.
  Without ids, a last token that is a proper prefix of the token the unit expects there (output cut by
  ``max_tokens`` inside a word) counts as a partial copy.
- **Escaped loop.** Anywhere, consecutive copies of a unit with ``n >= 3 and r >= 10``, or ``r >= 50``.
- **Structured content.** Before the escaped-loop check, fenced code blocks (paired as CommonMark pairs
  them: a line of 3+ backticks or tildes at any indentation opens one; only a line of the same character,
  at least as long and with nothing after it, closes it; unclosed, it runs to the end) and lines made only
  of one repeated punctuation or symbol character (at least 3, spaces between allowed: a markdown rule
  ``-----``/``=====``, a row of one emoji) are left out; unrolled code and rules are not loops. The
  tail-loop check uses every token: output that repeats to its very end is a loop whatever it is made of.
- **Near loop.** With every run of digits replaced by one placeholder (token by token, so token positions
  stay those of the text), the text has a tail loop (same thresholds) whose unit holds at least 3 distinct
  word tokens (the placeholder is not a word). A counter ("Step 12:", "Attempt #7", "(check 3)") hides an
  otherwise exact loop; counting lists and number tables (few distinct words) are not near loops, unless a
  unit with two distinct words repeats 50 times or more ("Check 7: 7+7 = 14, ok." x 150). A tail of
  **paraphrase cycling** is a near loop too: in the last 400 text tokens at least 85 % of the 4-grams
  already occurred earlier in those 400, with at least 16 distinct 4-grams and 3 distinct words among
  them (a few sentences said again in varying order, not one short unit). Reported
  with the unit's length, repeats, start token and character offset and the fraction of the text inside it;
  always computed on the text (digits are a text notion), even when token ids are given. A loop is a near
  loop too (an exact copy is the closest of near copies): ``"Hi. " * 100`` has too few distinct words for
  the counter rule, and it is still a near loop, reported with the loop's figures.
- The unit is the *smallest* period of the repeated stretch ("!!!!" has n = 1, not n = 3), and the loop
  starts where the maximal repeated stretch starts. A tail loop is reported in preference to escaped ones;
  among escaped loops, the one covering most tokens.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from .loops import (
    Run,
    detect_loop,
    longest_repeated_span,
    may_end_in_loop,
    token_hashes,
)
from .tokens import char_offset, rule_line_pattern, split_tokens, token_pattern

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"

NEAR_MIN_DISTINCT_WORDS = 3
#: A unit of two distinct words still makes a near loop when it repeats this often ("Check 7: 7+7 = 14,
#: ok." x 150); a counting list ("Step 12") has one word, a number list none.
NEAR_FEW_WORDS_MIN_REPEATS = 50
#: Paraphrase cycling: the last CYCLE_WINDOW text tokens (of at least that many) in which this share of the
#: 4-grams already occurred earlier in the window — a few sentences said again and again in varying order
#: (no period, so no loop), while reasoning that moves on repeats few 4-grams.
CYCLE_WINDOW = 400
CYCLE_MIN_REPEAT_SHARE = 0.85
CYCLE_MIN_DISTINCT = 16  # distinct 4-grams the window must hold (a few sentences, not one short unit)
_DIGITS = re.compile(r"\d+")
_DIGIT_PLACEHOLDER = "0"
_NORMALISED: dict[str, str] = {}  # token -> its digit runs as one digit (near loops), shared by all texts
_MIXED_DIGITS = re.compile(r"\d[^\W\d_]|[^\W\d_]\d")  # a digit inside a word token (``v2``, ``3rd``)
#: A fence line: any indentation (fences nest in list items), 3+ backticks or tildes, then the info string
#: (which for backticks holds no backtick: "```x```" on one line is inline code).
_FENCE = re.compile(r"^[^\S\n]*(?P<fence>`{3,}(?=[^`\n]*$)|~{3,})(?P<info>[^\n]*)$", re.MULTILINE)


@dataclass(frozen=True)
class LoopMetrics:
    """The reported loop of one text.

    ``unit_tokens``: unit length n; ``repeats``: complete copies r; ``start_token``/``end_token``: token
    span ``[start, end)`` of the repeated stretch (partial last copy included); ``start_char``: character
    offset of the start (estimated from text tokens when the loop was found on ids and the text split has
    no loop); ``fraction``: share of the text's tokens inside the loop, in [0, 1].
    """

    kind: Literal["tail", "escaped", "near"]
    unit_tokens: int
    repeats: int
    start_token: int
    start_char: int
    end_token: int
    fraction: float

    @property
    def onset(self) -> int:
        """Token index where the loop begins (same as ``start_token``)."""
        return self.start_token


@dataclass(frozen=True)
class TextMetrics:
    """Metrics of one output. Token counts are in the unit loops were detected on (ids when given).

    ``seq_rep_4``: 1 - unique 4-grams / total 4-grams (Welleck et al. 2019), 0.0 under 4 tokens.
    ``distinct_1``/``distinct_2``: unique n-grams / total n-grams *of this text* (per-sample normalisation,
    Li et al. 2016; so ``distinct_4 == 1 - seq_rep_4``), 1.0 when the text has no n-gram.
    ``compression_ratio``: UTF-8 bytes / zlib (level 6) bytes; loops give high values (> 4), prose ~2-3.
    ``think_closed``: True/False for a think block that is closed/unterminated, None without one.
    ``near``: the near loop (kind ``"near"``, units in text tokens), None without one; ``near_loop`` says
    whether there is one. ``reasoning_tokens``/``answer_tokens``: text tokens inside the think block / after it (tags excluded);
    without a think block every token is an answer token. ``longest_repeated_span``: tokens of the longest
    span occurring twice (overlaps allowed).
    """

    n_tokens: int
    loop: LoopMetrics | None
    seq_rep_4: float
    distinct_1: float
    distinct_2: float
    compression_ratio: float
    think_closed: bool | None
    reasoning_tokens: int
    answer_tokens: int
    longest_repeated_span: int
    near: LoopMetrics | None = None

    @property
    def near_loop(self) -> bool:
        """True when the text has a near loop (module docstring): an exact loop hidden by a counter, or any
        loop (a loop implies a near loop)."""
        return self.near is not None

    @property
    def is_loop(self) -> bool:
        return self.loop is not None

    @property
    def loop_onset(self) -> int | None:
        """Token index where the loop starts, None without a loop."""
        return self.loop.start_token if self.loop else None

    def to_dict(self) -> dict:
        """Flat JSON-able dict: ``loop`` (bool), ``loop_kind``, ``loop_unit_tokens``, ``loop_repeats``,
        ``loop_start_token``, ``loop_start_char``, ``loop_end_token``, ``loop_fraction`` (None without a
        loop), ``near_loop`` (bool) with ``near_loop_unit_tokens``, ``near_loop_repeats``,
        ``near_loop_start_token``, ``near_loop_start_char``, ``near_loop_end_token``, ``near_loop_fraction``,
        then every other field by name."""
        d = asdict(self)
        loop = d.pop("loop")
        near = d.pop("near")
        out: dict = {"loop": loop is not None}
        for key in ("kind", "unit_tokens", "repeats", "start_token", "start_char", "end_token", "fraction"):
            out[f"loop_{key}"] = loop[key] if loop else None
        out["near_loop"] = near is not None
        for key in ("unit_tokens", "repeats", "start_token", "start_char", "end_token", "fraction"):
            out[f"near_loop_{key}"] = near[key] if near else None
        out.update(d)
        return out


def think_block(text: str) -> tuple[bool | None, int, int]:
    """Locate the think block: ``(closed, reasoning_end, answer_start)`` as character offsets.

    ``<think>...</think>`` or, as Qwen3 chat templates emit (the generation prompt opened the block), a
    ``</think>`` without an opening tag. Returns ``(None, 0, 0)`` without any tag; an opening tag without
    a close gives ``(False, len(text), len(text))``. The first ``</think>`` after the opening decides. A tag
    inside inline code or a fenced code block is a mention, not a tag (:func:`_tag_at`).
    """
    open_at = _tag_at(text, _THINK_OPEN)
    search_from = open_at + len(_THINK_OPEN) if open_at >= 0 else 0
    close_at = _tag_at(text, _THINK_CLOSE, search_from)
    if close_at >= 0:
        return True, close_at, close_at + len(_THINK_CLOSE)
    if open_at >= 0:
        return False, len(text), len(text)
    return None, 0, 0


def _tag_at(text: str, tag: str, start: int = 0) -> int:
    """Offset of the first ``tag`` from ``start`` that is a tag, not a mention of one: a tag written inside
    inline code (an odd number of backticks before it on its line, as in "use the `</think>` tag") or inside
    a fenced code block (:func:`structured_spans`, found once and only when a tag needs it) is text about
    tags. -1 when there is none."""
    spans: list[tuple[int, int]] | None = None
    i = text.find(tag, start)
    while i >= 0:
        line_start = text.rfind("\n", 0, i) + 1
        if text.count("`", line_start, i) % 2 == 0:
            if spans is None:
                spans = structured_spans(text) if ("```" in text or "~~~" in text) else []
            if not any(a <= i < b for a, b in spans):
                return i
        i = text.find(tag, i + len(tag))
    return -1


def _count(text: str) -> int:
    return len(token_pattern(text).findall(text))


def _think_counts(text: str, n_text_tokens: int) -> tuple[bool | None, int, int]:
    """``(think_closed, reasoning_tokens, answer_tokens)``; splits only the shorter side again.

    Tags are punctuation-delimited (``<``/``>`` are tokens), so counts of the pieces add up: text before
    the body (with ``<think>``), body, ``</think>`` (4 tokens), answer.
    """
    closed, reasoning_end, answer_start = think_block(text)
    if closed is None:
        return None, 0, n_text_tokens
    open_at = _tag_at(text, _THINK_OPEN)
    body_from = open_at + len(_THINK_OPEN) if 0 <= open_at < reasoning_end else 0
    before = _count(text[:body_from]) if body_from else 0
    if not closed:
        return False, n_text_tokens - before, 0
    tag = n_text_tokens and _count(_THINK_CLOSE)
    if reasoning_end - body_from <= len(text) - answer_start:
        reasoning = _count(text[body_from:reasoning_end])
        return True, reasoning, n_text_tokens - before - tag - reasoning
    answer = _count(text[answer_start:])
    return True, n_text_tokens - before - tag - answer, answer


def _ngram_keys(h: np.ndarray, n: int) -> np.ndarray:
    """uint64 key per n-gram of the mixed token hashes ``h`` (64-bit, collisions negligible)."""
    keys = h[: h.shape[0] - n + 1].copy()
    with np.errstate(over="ignore"):
        for j in range(1, n):
            keys = keys * np.uint64(0x100000001B3) + h[j: h.shape[0] - n + 1 + j]
    return keys


def distinct_n(h: np.ndarray, n: int) -> float:
    """Unique n-grams / total n-grams of one sequence of token hashes; 1.0 when there is no n-gram."""
    total = h.shape[0] - n + 1
    if total <= 0:
        return 1.0
    keys = np.sort(_ngram_keys(h, n))
    unique = 1 + int(np.count_nonzero(keys[1:] != keys[:-1]))
    return unique / total


def compression_ratio(text: str) -> float:
    """``len(utf8) / len(zlib.compress(utf8))`` at zlib's default level; 0.0 for an empty text."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def text_token_ids(toks: list[str]) -> np.ndarray:
    """Integer ids for text tokens (Python string hashes: equal tokens, equal ids)."""
    return np.fromiter(map(hash, toks), dtype=np.int64, count=len(toks))


def structured_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of structured content: fenced code blocks (fences included; an
    unclosed fence runs to the end) and rule lines (one punctuation/symbol character repeated, >= 3).
    Sorted, non-overlapping. Example: ``structured_spans("a\\n---\\nb")`` -> ``[(2, 5)]``.

    Fences pair as CommonMark pairs them: a block opens with 3+ backticks or tildes (at any indentation:
    fences nest in list items) and closes only at a line of the same character, at least as long, with
    nothing after it; fences of another kind or shorter inside the block are its content (a ```` ````markdown````
    block may show a ```` ``` ```` block).
    """
    spans: list[tuple[int, int]] = []
    if "```" in text or "~~~" in text:
        opened = None
        for m in _FENCE.finditer(text):
            fence = m.group("fence")
            if opened is None:
                opened = (m.start(), fence)
            elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]) and not m.group("info").strip():
                spans.append((opened[0], m.end()))
                opened = None
        if opened is not None:
            spans.append((opened[0], len(text)))
    for m in rule_line_pattern(text.isascii()).finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            spans.append((m.start(), m.end()))
    spans.sort()
    return spans


def _outside(offsets: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """Indexes of the tokens (by char offset) that lie outside every span."""
    keep = np.ones(offsets.shape[0], dtype=bool)
    for a, b in spans:
        keep[(offsets >= a) & (offsets < b)] = False
    return np.flatnonzero(keep)


def token_offsets(raw: list[str], toks: list[str]) -> np.ndarray:
    """Character offset of every token (numpy, from the raw match lengths)."""
    ends = np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=len(raw)))
    lens = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
    return ends - lens


def escaped_outside_structure(text_ids: np.ndarray, offsets: np.ndarray,
                               spans: list[tuple[int, int]]) -> Run | None:
    """The escaped loop among the tokens outside structured content, as a run in text-token indexes (its
    span may hold left-out tokens: ``period`` and ``copies`` are counted on the tokens kept)."""
    keep = _outside(offsets, spans)
    found = detect_loop(text_ids[keep], allow_tail=False)
    if found is None:
        return None
    run = found[0]
    return Run(int(keep[run.start]), int(keep[run.end - 1]) + 1, run.period, copies=run.repeats)


def _is_word(token: str) -> bool:
    return token[:1].isalnum() and token != _DIGIT_PLACEHOLDER


def detect_near_loop(text: str, toks: list[str], exact: tuple[Run, str] | None = None,
                     text_ids: np.ndarray | None = None) -> Run | None:
    """The near loop of ``text`` (module docstring), as a run in its token indexes ``toks``, or None.

    Digit runs are replaced by one digit (``"0"``), which keeps every token where it was (a digit run never
    changes the token class around it), then the tail-loop rules run on the result. ``exact``: the exact
    loop already found on ``toks``, reused when the text has no digit (then nothing changes); ``text_ids``:
    the ids of ``toks``, reused when no token mixes digits and letters (then only all-digit tokens change).
    """
    if _DIGITS.search(text) is None:
        norm, found = toks, exact
    else:
        if text_ids is not None and _MIXED_DIGITS.search(text) is None:
            digits = np.fromiter(map(str.isdecimal, toks), dtype=bool, count=len(toks))
            norm_ids = text_ids.copy()
            norm_ids[digits] = hash(_DIGIT_PLACEHOLDER)
            norm = None
        else:
            # token by token (a digit run never moves a token boundary), each distinct token once per process
            if len(_NORMALISED) > 200_000:
                _NORMALISED.clear()
            for t in set(toks).difference(_NORMALISED):
                _NORMALISED[t] = _DIGITS.sub(_DIGIT_PLACEHOLDER, t)
            norm = [_NORMALISED[t] for t in toks]
            norm_ids = text_token_ids(norm)
        if norm is None:
            norm = [_DIGIT_PLACEHOLDER if t.isdecimal() else t for t in toks]
        if not may_end_in_loop(norm_ids) or not any(_is_word(t) for t in set(norm)):
            found = None  # no tail loop possible, or no word at all (e.g. every word carries digits: all "w0")
        else:
            found = detect_loop(norm_ids, cut_last_token=norm)
    if found is not None and found[1] == "tail":
        run = found[0]
        words = {t for t in norm[run.start:run.start + run.period] if _is_word(t)}
        if len(words) >= NEAR_MIN_DISTINCT_WORDS or (len(words) >= 2 and run.repeats >= NEAR_FEW_WORDS_MIN_REPEATS):
            return run
    if len(toks) < CYCLE_WINDOW or sum(1 for t in set(toks[-CYCLE_WINDOW:]) if _is_word(t)) < NEAR_MIN_DISTINCT_WORDS:
        return None
    return detect_cycling(text_ids if text_ids is not None else text_token_ids(toks))


def detect_cycling(ids: np.ndarray, window: int = CYCLE_WINDOW,
                   min_share: float = CYCLE_MIN_REPEAT_SHARE) -> Run | None:
    """Paraphrase cycling at the end of a token sequence (module docstring), as a run over the window (its
    ``period``: tokens per distinct 4-gram of the window, a rough unit), or None."""
    n = int(ids.shape[0])
    if n < window:
        return None
    tail = ids[n - window:]
    keys = _ngram_keys(token_hashes(tail), 4)
    seen: set[int] = set()
    again = 0
    for k in keys.tolist():
        if k in seen:
            again += 1
        else:
            seen.add(k)
    if again < min_share * len(keys) or len(seen) < CYCLE_MIN_DISTINCT:
        return None  # (an exact loop of a short unit has few distinct 4-grams: it is a loop, not cycling)
    return Run(n - window, n, max(1, window // max(1, len(seen))))


def _in_ids(n_ids: int, n_text: int):
    """A text-token position mapped onto the ids' scale (proportionally; within 0..``n_ids``)."""
    return lambda i: min(n_ids, round(i * n_ids / max(n_text, 1)))


def analyze_text(text: str, token_ids: Sequence[int] | None = None) -> TextMetrics:
    """All per-sample metrics of ``text`` (module docstring for the definitions).

    ``token_ids``: the output's token ids when the server returned them; loops, n-gram figures and
    ``n_tokens`` are then computed on the ids, the think block, reasoning/answer counts and the near loop on
    the text. When the text holds structured content and the ids show only an escaped loop, the escaped
    check is redone on the text tokens outside it (ids cannot be mapped to code fences). Runs in ~O(n);
    never raises on any string.
    """
    raw, toks = split_tokens(text)
    text_ids = text_token_ids(toks)
    if token_ids is not None:
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        found = detect_loop(ids)
    else:
        ids = text_ids
        found = detect_loop(ids, cut_last_token=toks)
    n = int(ids.shape[0])

    exact_on_text = found if token_ids is None else False
    in_text_tokens = token_ids is None
    if found is not None and found[1] == "escaped":
        spans = structured_spans(text)
        if spans:
            run = escaped_outside_structure(text_ids, token_offsets(raw, toks), spans)
            found = (run, "escaped") if run is not None else None
            in_text_tokens = True

    loop = None
    lower = 0
    if found is not None:
        run, kind = found
        lower = run.length - run.period if in_text_tokens == (token_ids is None) else 0
        if in_text_tokens:
            start_char = char_offset(raw, toks, run.start)
        else:
            on_text = detect_loop(text_ids, cut_last_token=toks)
            start_char = (char_offset(raw, toks, on_text[0].start) if on_text
                          else round(len(text) * run.start / max(n, 1)))
        total = len(toks) if in_text_tokens else n
        loop = LoopMetrics(kind=kind, unit_tokens=run.period, repeats=run.repeats, start_token=run.start,
                           start_char=start_char, end_token=run.end, fraction=run.length / max(total, 1))

    near = None
    if exact_on_text is False and _DIGITS.search(text) is None:  # only its tail loop is used: prefiltered
        exact_on_text = detect_loop(text_ids, cut_last_token=toks) if may_end_in_loop(text_ids) else None
    near_run = detect_near_loop(text, toks, exact_on_text or None, text_ids)
    if near_run is not None:
        # found on the text's tokens; its positions are given in n_tokens' unit (the server's ids when given:
        # fewer than the text's tokens, so a near loop ended past n_tokens, e.g. token 2052 of 2048)
        at = _in_ids(n, len(toks)) if token_ids is not None else (lambda i: i)
        near = LoopMetrics(kind="near", unit_tokens=near_run.period, repeats=near_run.repeats,
                           start_token=at(near_run.start), start_char=char_offset(raw, toks, near_run.start),
                           end_token=at(near_run.end), fraction=near_run.length / max(len(toks), 1))
    elif loop is not None:  # an exact loop is a near loop with nothing hidden
        near = LoopMetrics(kind="near", unit_tokens=loop.unit_tokens, repeats=loop.repeats,
                           start_token=loop.start_token, start_char=loop.start_char, end_token=loop.end_token,
                           fraction=loop.fraction)

    closed, reasoning_tokens, answer_tokens = _think_counts(text, len(toks))

    h = token_hashes(ids)
    return TextMetrics(
        n_tokens=n,
        loop=loop,
        seq_rep_4=1.0 - distinct_n(h, 4) if n >= 4 else 0.0,
        distinct_1=distinct_n(h, 1),
        distinct_2=distinct_n(h, 2),
        compression_ratio=compression_ratio(text),
        think_closed=closed,
        reasoning_tokens=reasoning_tokens,
        answer_tokens=answer_tokens,
        longest_repeated_span=longest_repeated_span(ids, lower),
        near=near,
    )
