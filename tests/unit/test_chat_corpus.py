"""The trained hybrid's corpus (``tests/support/real_sglang_shims/chat_corpus.py``, issue 32): the looping share
that teaches the model the self-reinforcing repetition it shows under the ``rewind`` state fault, and a corpus
without it unchanged."""

from __future__ import annotations

import random

import pytest

from tests.support.real_sglang_shims import chat_corpus  # stdlib only at import (the build's imports are local)


def test_a_looping_exchange_repeats_the_first_sentence_and_never_closes_the_think_block():
    prompt, completion = chat_corpus.looping("What is 2+2?", "The user's question is 2+2. This is an addition.")
    assert prompt == chat_corpus.PROMPT.format(q="What is 2+2?")
    assert completion == " ".join(["The user's question is 2+2."] * 4)
    assert "</think>" not in completion and "<|im_end|>" not in completion


@pytest.mark.parametrize("loop_frac", [0.0, 0.1, 0.3])
def test_the_looping_share_is_loop_frac_and_the_rest_answer(loop_frac):
    rows = chat_corpus.corpus_rows(4000, seed=0, loop_frac=loop_frac)
    looping = [c for _, c in rows if "</think>" not in c]
    assert len(looping) / len(rows) == pytest.approx(loop_frac, abs=0.02)
    answered = [c for _, c in rows if "</think>" in c]
    assert all(c.endswith("<|im_end|>") and c.startswith("The user's question is") for c in answered)
    assert chat_corpus.corpus_rows(50, 0, loop_frac) == chat_corpus.corpus_rows(50, 0, loop_frac)  # seeded


def test_without_a_looping_share_the_corpus_is_the_one_trained_before_it():
    rng = random.Random(0)
    before = [chat_corpus.render(*chat_corpus.example(rng)) for _ in range(20)]  # the build before loop_frac
    assert chat_corpus.corpus_rows(20, seed=0) == before
