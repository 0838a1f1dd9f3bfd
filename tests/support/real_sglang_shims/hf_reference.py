"""Greedy reference output of a test model by transformers' own implementation, run by the real venv's python.

Usage: ``python hf_reference.py MODEL_DIR DTYPE MAX_NEW_TOKENS`` with a JSON list of prompt texts on stdin;
prints one JSON object: ``{"prompt_ids": [[...], ...], "output_ids": [[...], ...]}`` (greedy, no EOS stop, so
the ids compare one to one with SGLang's ``/generate`` under ``ignore_eos``). ``DTYPE``: ``float32`` or
``bfloat16``. Works for the dense ``Qwen3ForCausalLM`` and the hybrid ``Qwen3NextForCausalLM`` (its MTP tensors
are ignored by transformers). Test scaffolding, not part of mtp_remote.
"""

from __future__ import annotations

import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def reference(model_dir: str, dtype: str, max_new_tokens: int, prompts: list[str]) -> dict:
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
    prompt_ids, output_ids = [], []
    for text in prompts:
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=None,
                                 pad_token_id=tok.pad_token_id)
        prompt_ids.append(ids[0].tolist())
        output_ids.append(out[0, ids.shape[1]:].tolist())
    return {"prompt_ids": prompt_ids, "output_ids": output_ids}


if __name__ == "__main__":
    print(json.dumps(reference(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.load(sys.stdin))))
