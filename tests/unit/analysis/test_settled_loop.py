"""The loop stop changes no label: on every corpus text (and our field texts), streamed in chunks, the prefix
where the escaped-loop rule settles is labelled a loop exactly as the whole text is, and a text whose label is
no loop never settles, at any prefix."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.tokens import tokenize
from mtp_remote.analysis.settled import LoopWatch, settled_loop

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[2].parent / "shared" / "corpus" / "texts"
FIELD = HERE / "field_texts"


def _texts() -> list[tuple[str, str]]:
    out = []
    for folder in (CORPUS, FIELD):
        labels = json.loads((folder / "labels.json").read_text())
        for name, label in sorted(labels.items()):
            if "file" not in label:
                out.append((name, (folder / f"{name}.txt").read_bytes().decode("utf-8")))
    return out


TEXTS = _texts()


def _stream(text: str, rng: random.Random):
    """Cumulative prefixes of ``text`` as a server streams them (chunks of 1-40 characters)."""
    i = 0
    while i < len(text):
        i = min(len(text), i + rng.randint(1, 40))
        yield text[:i]


def _degenerate(text: str) -> bool:
    m = analyze_text(text)
    return m.is_loop


def _first_settled(text: str) -> int | None:
    """The length of the shortest prefix of ``text`` on which the escaped-loop rule holds, or None when it holds
    on no prefix: not on the whole text, since once it holds no continuation undoes it (bisection, by the same
    property)."""
    if settled_loop(text) is None:
        return None
    lo, hi = 0, len(text)  # the rule does not hold on text[:lo], holds on text[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if settled_loop(text[:mid]) is None else (lo, mid)
    return hi


STEP_TOKENS = 4  # the watch's step in the test below
CHUNK_CHARS = 40  # the largest chunk _stream sends


@pytest.mark.parametrize("name,text", TEXTS, ids=[n for n, _ in TEXTS])
def test_a_stopped_stream_keeps_the_label_of_the_whole_text(name, text):
    """Each text streamed three ways. Where the escaped-loop rule holds on no prefix (a text without a loop, or
    a loop that runs to the end: a tail loop only the whole text labels), the watch never stops. Where it holds,
    the whole text is a loop and the watch stops on a prefix labelled a loop; it may miss the stop only when the
    text ends within one look of the rule holding (the schedule: a look every ``max(step, size / 16)`` tokens,
    plus one chunk)."""
    whole = analyze_text(text).is_loop
    first = _first_settled(text)
    if first is not None:
        assert whole, f"{name}: the rule holds at char {first} but the whole text is not a loop"
    for seed in range(3):
        watch = LoopWatch(step_tokens=STEP_TOKENS)
        stopped = next((p for p in _stream(text, random.Random(seed)) if watch.look(p)), None)
        if first is None:
            assert stopped is None, f"{name} (loop: {whole}): the rule holds on no prefix, yet the watch stopped"
        elif stopped is not None:
            assert analyze_text(stopped).is_loop, f"{name}: the stopped prefix is not labelled a loop"
        else:
            late = (len(text) - first) // 4
            bound = max(STEP_TOKENS, len(text) // 4 // 16) + CHUNK_CHARS // 4
            assert late <= bound, f"{name}: the rule holds at char {first}, yet {late} more tokens ran to the end"


@pytest.mark.parametrize("name,text", [(n, t) for n, t in TEXTS if not analyze_text(t).is_loop],
                         ids=[n for n, t in TEXTS if not analyze_text(t).is_loop])
def test_no_prefix_of_a_text_without_a_loop_ever_settles(name, text):
    ends = sorted({off + len(tok) for tok, off in tokenize(text)} | {len(text)})
    for end in ends[:: max(1, len(ends) // 400)]:
        assert settled_loop(text[:end]) is None, f"{name}: settled at char {end}"


def test_the_field_loop_settles_early_and_saves_most_of_its_tokens():
    text = (CORPUS / "t01_sentence_loop_unclosed_think.txt").read_text()
    watch = LoopWatch()
    stopped = next(p for p in _stream(text, random.Random(0)) if watch.look(p))
    assert len(stopped) < 0.5 * len(text)
    s = settled_loop(stopped)
    assert s.repeats >= 10 and s.unit_tokens >= 3


@pytest.mark.parametrize("text", [
    # the last line is becoming a markdown rule: its dashes must not count as loop copies yet
    "Intro words here.\n" + "- - - " * 12,
    # a fence opened before the repetitions leaves them out, whatever follows
    "Code:\n```\n" + "x = x + 1\n" * 20,
    # the tenth copy ends in a word cut mid-way ("gam" may yet be "gamut"): nine copies so far
    "start " + "alpha beta gamma " * 9 + "alpha beta gam",
])
def test_prefixes_that_could_still_turn_into_structure_or_grow_do_not_settle(text):
    assert settled_loop(text) is None


def test_token_ids_must_show_the_loop_too():
    text = "intro " + "one two three " * 12
    assert settled_loop(text) is not None
    assert settled_loop(text, list(range(40))) is None
    assert settled_loop(text, [1, 2, 3] * 12).repeats == 12
