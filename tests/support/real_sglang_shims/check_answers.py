"""Greedy answers of the trained tiny hybrid with transformers, checked against the known answers before the build
stamps it (and the reference for SGLang's baseline arm): test scaffolding run by the real venv's python.

Usage: ``python check_answers.py MODEL_DIR PROMPTS_JSON MIN_RIGHT [MAX_NEW_TOKENS]``. ``PROMPTS_JSON``: a list of
``[id, question, expected]`` (``chat_corpus.EVAL``; expected None: any answer after ``</think>`` will do). Prints
one JSON line per prompt (text, answer, right) and a last one ``{"right": k, "of": n, "known": m, "min_right":
MIN_RIGHT}``; exits 1 when fewer than ``MIN_RIGHT`` of the prompts are right (the build then fails, unstamped).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer, Qwen3NextForCausalLM

TEMPLATE = "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n<think>\n"


def answer_of(text: str) -> str | None:
    """What follows ``</think>`` (stripped); None when the think block never closed."""
    return text.split("</think>", 1)[1].strip() if "</think>" in text else None


def main() -> int:
    torch.set_num_threads(1)
    model_dir, prompts = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    min_right = int(sys.argv[3])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 96
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = Qwen3NextForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    right = 0
    for pid, q, expected in prompts:
        ids = tok(TEMPLATE.format(q=q), return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=tok.eos_token_id,
                                 pad_token_id=tok.pad_token_id)
        text = tok.decode(out[0, ids.shape[1]:].tolist(), skip_special_tokens=True)  # <think> tags are kept
        ans = answer_of(text)
        ok = (ans == expected) if expected is not None else bool(ans)
        right += ok
        print(json.dumps({"id": pid, "text": text, "answer": ans, "expected": expected, "right": ok}), flush=True)
    known = sum(e is not None for _, _, e in prompts)
    print(json.dumps({"right": right, "of": len(prompts), "known": known, "min_right": min_right}))
    return 0 if right >= min_right else 1


if __name__ == "__main__":
    sys.exit(main())
