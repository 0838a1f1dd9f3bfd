"""Build the tiny hybrid Qwen3-Next model (and its accept-all variant) that real SGLang serves in the tests.

Usage: ``python build_tiny_hybrid.py TOKENIZER_DIR OUT_DIR ACCEPT_DIR [SEED]``, run by the real venv's python.
``TOKENIZER_DIR`` is the dense test model (``build_tiny_model.py``): its locally trained tokenizer and chat
template are reused, so both real hosts speak the same token ids. No model hub is contacted.

``OUT_DIR``: a random-weight ``Qwen3NextForCausalLM`` (fixed seed; output head at :data:`HEAD_STD`) with 3 Gated-DeltaNet layers and 1 full-attention
layer (``full_attention_interval`` 4), hidden 64, a small MoE (4 experts, top 2, plus a shared expert), plus
the ``mtp.*`` tensors of one MTP layer (a full-attention MoE decoder layer, ``fc`` and three norms) under the
names SGLang's ``Qwen3NextForCausalLMMTP`` loads for ``--speculative-algorithm NEXTN``. bf16 on disk (as the
field's checkpoints); the host serves it with ``--dtype float32``.

``ACCEPT_DIR``: the same weights with the target's and the MTP head's final norms at -1 (Gemma-style
``x * (1 + w)`` norms -> all-zero logits -> greedy argmax token 0 everywhere): every NEXTN draft is accepted,
acceptance length = draft length. Test scaffolding, not part of mtp_remote.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerFast, Qwen3NextConfig, Qwen3NextForCausalLM
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextDecoderLayer

HIDDEN = 64
SEED = 0
#: Standard deviation of the output head (transformers initialises it at 0.02). At 0.02 the logits of a random
#: model are nearly flat (std ~0.16 nats over 4096 tokens): every greedy choice is a near tie, so a greedy flip
#: proves nothing and decode/prefill logprobs differ by little whatever the engine does. At 1.0 the top-2 margin
#: is ~1 nat, as in a trained model's confident steps: a wrong recurrent state shows as a hard flip and a KL gap.
HEAD_STD = 1.0


def config_kwargs(vocab: int, eos: int, pad: int) -> dict:
    return dict(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=4,
                full_attention_interval=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                partial_rotary_factor=0.25, linear_conv_kernel_dim=4, linear_key_head_dim=16,
                linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                decoder_sparse_step=1, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                shared_expert_intermediate_size=64, norm_topk_prob=True, max_position_embeddings=4096,
                rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=pad, eos_token_id=eos,
                pad_token_id=pad, torch_dtype="bfloat16")


def mtp_tensors(kw: dict) -> dict[str, torch.Tensor]:
    """One MTP layer, as ``Qwen3NextForCausalLM.load_weights(is_mtp=True)`` maps ``mtp.*`` names."""
    layer = Qwen3NextDecoderLayer(Qwen3NextConfig(**{**kw, "num_hidden_layers": 1,
                                                      "layer_types": ["full_attention"]}), 0).to(torch.bfloat16)
    for p in layer.parameters():
        if p.dim() >= 2:
            torch.nn.init.normal_(p, std=0.02)
    mtp = {f"mtp.layers.0.{n}": t.contiguous() for n, t in layer.state_dict().items()}
    mtp["mtp.fc.weight"] = (torch.randn(HIDDEN, 2 * HIDDEN) * 0.02).to(torch.bfloat16)
    for n in ("mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"):
        mtp[n] = torch.zeros(HIDDEN, dtype=torch.bfloat16)  # Gemma-style (1 + w) norms: w = 0 is the identity
    return mtp


def build(tokenizer_dir: Path, out: Path, accept: Path, seed: int = SEED) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    tok = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    tok.save_pretrained(out)
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    kw = config_kwargs(len(tok), eos, pad)
    config = Qwen3NextConfig(**kw)
    config.num_nextn_predict_layers = 1
    torch.manual_seed(seed)
    model = Qwen3NextForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.normal_(std=HEAD_STD)
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(out, safe_serialization=True)
    (weights,) = sorted(out.glob("model*.safetensors"))  # one file: SGLang then needs no index
    tensors = load_file(weights)
    mtp = mtp_tensors(kw)
    tensors.update(mtp)
    save_file(tensors, weights, metadata={"format": "pt"})
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(full_attention_interval=4, num_nextn_predict_layers=1)
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    info = {"architecture": cfg["architectures"][0], "layer_types": cfg["layer_types"], "hidden": HIDDEN,
            "vocab": len(tok), "parameters": sum(t.numel() for t in tensors.values()), "mtp_tensors": len(mtp),
            "dtype": "bfloat16", "seed": seed, "head_std": HEAD_STD}
    (out / "mtp-remote-model.json").write_text(json.dumps(info, indent=1) + "\n")

    shutil.copytree(out, accept, dirs_exist_ok=True)
    accepted = load_file(accept / weights.name)
    for n in ("model.norm.weight", "mtp.norm.weight"):
        accepted[n] = torch.full_like(accepted[n], -1.0)
    save_file(accepted, accept / weights.name, metadata={"format": "pt"})
    (accept / "mtp-remote-model.json").write_text(json.dumps({**info, "variant": "accept-all"}, indent=1) + "\n")
    return info


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]),
                           int(sys.argv[4]) if len(sys.argv) > 4 else SEED)))
