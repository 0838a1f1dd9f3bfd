"""Build the tiny Qwen3 model that real SGLang serves in the tests: run by the test venv's python.

Usage: ``python build_tiny_model.py OUT_DIR``. A byte-level BPE tokenizer trained with ``tokenizers`` on
text that ships with Python (the standard library's own sources: the same on every machine with the same
Python), a Qwen-style chat template whose generation prompt opens ``<think>``, and ``Qwen3ForCausalLM``
built from a config (2 layers, hidden 64, random weights from a fixed seed, bfloat16) and saved with
``save_pretrained``. No model hub is contacted. Test scaffolding, not part of mtp_remote.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

VOCAB = 4096
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CORPUS_FILES = ("textwrap.py", "argparse.py", "pathlib.py", "shutil.py", "tempfile.py", "json/decoder.py",
                "logging/__init__.py", "email/message.py", "unittest/case.py", "difflib.py")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}"
)


def corpus_lines() -> list[str]:
    """Lines of a few standard-library sources (deterministic for a given Python)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for name in CORPUS_FILES:
        path = stdlib / name
        if path.exists():
            lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return lines


def build(out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    vocab = len(fast)
    eos = fast.convert_tokens_to_ids("<|im_end|>")
    pad = fast.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen3Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=4096, rope_theta=10000.0, tie_word_embeddings=True,
                         bos_token_id=pad, eos_token_id=eos, pad_token_id=pad, torch_dtype="bfloat16")
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(out, safe_serialization=True)
    info = {"architecture": "Qwen3ForCausalLM", "layers": 2, "hidden": 64, "vocab": vocab,
            "parameters": sum(p.numel() for p in model.parameters()), "dtype": "bfloat16", "seed": 0}
    (out / "mtp-remote-model.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1]))))
