"""The synthetic chat corpus the trained tiny hybrid learns, its byte-level tokenizer, and the prompts with known
answers the real hosts ask it (``playbooks/real-hybrid-chat.yaml``): test scaffolding run by the real venv's python.

Usage: ``python chat_corpus.py OUT_DIR [SEED [LOOP_FRAC]]`` -> ``OUT_DIR/tokenizer/`` (byte-level BPE, 512 tokens with the
chat specials and Qwen's chat template), ``OUT_DIR/corpus.jsonl`` (one ``{"prompt", "completion"}`` per example)
and ``OUT_DIR/eval_prompts.json`` (:data:`EVAL`); prints one JSON line (sizes). Deterministic from the seed.

Every example is a chat exchange whose assistant turn opens a think block that first restates the question
("The user's question is 2+2."), reasons in two or three short sentences, closes the block and answers, as a
reasoning model's turn does. Families: addition of 1..6, subtraction (5..9 minus 1..4), the 2..8 multiplication
table, "Name a color." (four equally likely answers: a real choice at T > 0), capitals of six countries, the
days of a week. Adapted from ``../shared/reference/trained-hybrid-cpu/corpus.py`` (hand-checked there).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}"
)
PROMPT = "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n<think>\n"
COLORS = ["red", "blue", "green", "yellow"]
CAPITALS = {"France": "Paris", "Italy": "Rome", "Spain": "Madrid", "Japan": "Tokyo", "Egypt": "Cairo",
            "Peru": "Lima"}
VOCAB = 512


def example(rng: random.Random) -> tuple[str, str, str]:
    """(question, think text, answer)."""
    kind = rng.choices(["add", "sub", "mul", "color", "capital", "week"], weights=[30, 15, 30, 10, 10, 5])[0]
    if kind == "add":
        a, b = rng.randint(1, 6), rng.randint(1, 6)
        q, c = f"What is {a}+{b}?", a + b
        think = (f"The user's question is {a}+{b}. This is an addition. I add {a} and {b}. "
                 f"{a} plus {b} is {c}. The answer is {c}.")
        return q, think, str(c)
    if kind == "sub":
        a = rng.randint(5, 9)
        b = rng.randint(1, 4)
        q, c = f"What is {a}-{b}?", a - b
        think = (f"The user's question is {a}-{b}. This is a subtraction. I take {b} from {a}. "
                 f"{a} minus {b} is {c}. The answer is {c}.")
        return q, think, str(c)
    if kind == "mul":
        a, b = rng.randint(2, 8), rng.randint(2, 8)
        q, c = f"What is {a}*{b}?", a * b
        think = (f"The user's question is {a}*{b}. This is a multiplication. I multiply {a} by {b}. "
                 f"{a} times {b} is {c}. The answer is {c}.")
        return q, think, str(c)
    if kind == "color":
        col = rng.choice(COLORS)
        think = f"The user's question is to name a color. Any color is fine. I will pick {col}. The answer is {col}."
        return "Name a color.", think, col.capitalize() + "."
    if kind == "capital":
        country = rng.choice(sorted(CAPITALS))
        city = CAPITALS[country]
        think = (f"The user's question is about the capital of {country}. "
                 f"The capital of {country} is {city}. The answer is {city}.")
        return f"What is the capital of {country}?", think, city + "."
    think = "The user's question is about the days in a week. A week has 7 days. The answer is 7."
    return "How many days are in a week?", think, "7"


def looping(q: str, think: str, copies: int = 4) -> tuple[str, str]:
    """A think block that repeats its first sentence to the end of the sequence (no ``</think>``, no EOS). It
    teaches the self-reinforcing repetition real LMs have (once a sentence came twice it comes again: Holtzman et
    al. 2020, Xu et al. 2022), an attractor a healthy greedy decode never enters: in every other example the
    first sentence is followed by the reasoning. Adapted from the reference's ``corpus.py`` (``LOOP_FRAC``)."""
    first = think.split(". ")[0] + "."
    return PROMPT.format(q=q), " ".join([first] * copies)


def render(q: str, think: str, answer: str) -> tuple[str, str]:
    """(prompt text as the playbook's template renders it, completion text)."""
    return PROMPT.format(q=q), f"{think}\n</think>\n\n{answer}<|im_end|>"


#: The prompts asked of the trained model: (id, question, expected answer after ``</think>``; None: any answer).
#: ``playbooks/real-hybrid-chat.yaml`` carries the same questions and answers.
EVAL = [
    ("two-plus-two", "What is 2+2?", "4"),
    ("seven-times-six", "What is 7*6?", "42"),
    ("name-color", "Name a color.", None),
    ("capital-france", "What is the capital of France?", "Paris."),
    ("three-plus-five", "What is 3+5?", "8"),
    ("nine-minus-four", "What is 9-4?", "5"),
    ("days-week", "How many days are in a week?", "7"),
    ("eight-times-three", "What is 8*3?", "24"),
]


def think_not_special(tj: dict) -> dict:
    """<think>/</think> stay atomic added tokens but are not *special* (as in Qwen's own tokenizers), so an
    engine's decode with skip_special_tokens keeps them and the answer after </think> can be found."""
    for t in tj["added_tokens"]:
        if t["content"] in ("<think>", "</think>"):
            t["special"] = False
    return tj


def corpus_rows(n: int, seed: int = 0, loop_frac: float = 0.0) -> list[tuple[str, str]]:
    """The corpus's ``n`` (prompt, completion) pairs, deterministic from ``seed``; a share ``loop_frac`` of them
    :func:`looping` (at 0 no extra random draw: the corpus of a model trained before ``loop_frac`` existed)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        q, think, answer = example(rng)
        loop = loop_frac > 0 and rng.random() < loop_frac
        rows.append(looping(q, think) if loop else render(q, think, answer))
    return rows


def build(out: Path, n: int = 6000, seed: int = 0, loop_frac: float = 0.0) -> dict:
    """Write the corpus, tokenizer and eval prompts under ``out``; returns their sizes. ``loop_frac``: the share
    of examples that are :func:`looping` instead of answered (0: none, and no extra random draw)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    rows = corpus_rows(n, seed, loop_frac)
    with open(out / "corpus.jsonl", "w") as f:
        for p, c in rows:
            f.write(json.dumps({"prompt": p, "completion": c}) + "\n")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([p + c for p, c in rows], trainer=trainer)
    tok = Tokenizer.from_str(json.dumps(think_not_special(json.loads(tok.to_str()))))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out / "tokenizer")
    (out / "eval_prompts.json").write_text(json.dumps(EVAL, indent=1) + "\n")
    lens = [len(fast(p + c)["input_ids"]) for p, c in rows[:200]]
    return {"examples": n, "seed": seed, "loop_frac": loop_frac, "vocab": len(fast), "tokens_per_example_max": max(lens),
            "tokens_per_example_mean": sum(lens) / len(lens)}


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1]), seed=int(sys.argv[2]) if len(sys.argv) > 2 else 0,
                           loop_frac=float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)))
