"""Train the tiny hybrid Qwen3-Next (Gated-DeltaNet + full attention, small MoE) and its MTP layer on the chat
corpus (``chat_corpus.py``), from scratch on this CPU: test scaffolding run by the real venv's python.

Usage: ``python train_tiny_hybrid.py DATA_DIR OUT_DIR [--steps N] [--hidden H] [--seed S] [--batch B] [--lr LR]
[--threads T]``; prints a JSON line every 25 steps (loss, the MTP chain's losses, an acceptance estimate) and a
last one (the model's facts, ``train_s``: training wall time in seconds), also written to
``OUT_DIR/mtp-remote-model.json``.

Target: transformers' ``Qwen3NextForCausalLM`` (GDN through its torch path, sped up by ``train_fastpath.py``),
next-token cross-entropy on the assistant turn. MTP (the ``mtp.*`` tensors SGLang's ``Qwen3NextForCausalLMMTP``
loads): h' = layer(fc([norm_e(embed(x_{t+1})); norm_h(H_t)])) -> norm -> the target's lm_head, trained as NEXTN
runs it with ``--speculative-num-steps 3``: step 1 sees the target's post-norm hidden H_t, steps 2 and 3 the MTP's
own previous output, and each step's query attends to the step-1 pairs at or before its anchor plus the chain's
earlier steps (the draft KV cache during a draft). The target's embedding and head are shared and get no gradient
from the MTP loss. OUT_DIR is an fp32 HF checkpoint with the ``mtp.*`` tensors added, ready for SGLang's
``--speculative-algorithm NEXTN``. Seeded and single-threaded (no OpenMP spin-waits on a shared CPU); across
machines the build checks the answers (``check_answers.py``), not the bits. Adapted from
``../shared/reference/trained-hybrid-cpu/train.py`` (320 steps x 32 sequences: 591 s at load 8-10 there).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import train_fastpath as fastpatch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerFast, Qwen3NextConfig, Qwen3NextForCausalLM
from transformers.models.qwen3_next.modeling_qwen3_next import (
    Qwen3NextDecoderLayer,
    Qwen3NextRMSNorm,
    Qwen3NextRotaryEmbedding,
)

STEPS = 3  # --speculative-num-steps


def config_kwargs(vocab: int, eos: int, pad: int, hidden: int) -> dict:
    return dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=4,
                full_attention_interval=4, num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4,
                partial_rotary_factor=0.25, linear_conv_kernel_dim=4, linear_key_head_dim=hidden // 4,
                linear_value_head_dim=hidden // 4, linear_num_key_heads=2, linear_num_value_heads=4,
                decoder_sparse_step=1, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=hidden,
                shared_expert_intermediate_size=hidden, norm_topk_prob=True, max_position_embeddings=4096,
                rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=pad, eos_token_id=eos,
                pad_token_id=pad, torch_dtype="float32", attn_implementation="sdpa")


class MTP(torch.nn.Module):
    def __init__(self, kw: dict):
        super().__init__()
        cfg = Qwen3NextConfig(**{**kw, "num_hidden_layers": 1, "layer_types": ["full_attention"]})
        cfg._attn_implementation = "sdpa"
        h = kw["hidden_size"]
        self.fc = torch.nn.Linear(2 * h, h, bias=False)
        self.pre_fc_norm_embedding = Qwen3NextRMSNorm(h, eps=cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = Qwen3NextRMSNorm(h, eps=cfg.rms_norm_eps)
        self.layer = Qwen3NextDecoderLayer(cfg, 0)
        self.norm = Qwen3NextRMSNorm(h, eps=cfg.rms_norm_eps)
        self.rotary = Qwen3NextRotaryEmbedding(config=cfg)
        for p in self.layer.parameters():
            if p.dim() >= 2:
                torch.nn.init.normal_(p, std=0.02)
        torch.nn.init.normal_(self.fc.weight, std=0.02)

    def inputs(self, emb: torch.Tensor, hid: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cat((self.pre_fc_norm_embedding(emb), self.pre_fc_norm_hidden(hid)), dim=-1))

    def run(self, u: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        cos_sin = self.rotary(u, pos)
        return self.norm(self.layer(u, position_embeddings=cos_sin, attention_mask=mask, position_ids=pos))

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {f"mtp.layers.0.{n}": t.detach().contiguous() for n, t in self.layer.state_dict().items()}
        out["mtp.fc.weight"] = self.fc.weight.detach().contiguous()
        out["mtp.pre_fc_norm_embedding.weight"] = self.pre_fc_norm_embedding.weight.detach().contiguous()
        out["mtp.pre_fc_norm_hidden.weight"] = self.pre_fc_norm_hidden.weight.detach().contiguous()
        out["mtp.norm.weight"] = self.norm.weight.detach().contiguous()
        return out


def chain_masks(L: int) -> list[torch.Tensor]:
    """Additive masks for the concatenated [step1 | ... | step k] sequences (k = 1..STEPS), length k*L.

    Step-1 query t sees step-1 keys j <= t. Step-s query t (anchor t, position t+s-1) sees step-1 keys j <= t
    and the chain's own steps 2..s at the same anchor t."""
    masks = []
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
    eye = torch.eye(L, dtype=torch.bool)
    for k in range(1, STEPS + 1):
        allow = torch.zeros(k * L, k * L, dtype=torch.bool)
        for s in range(k):  # query block s (0-based step)
            allow[s * L:(s + 1) * L, 0:L] = causal
            for r in range(1, s + 1):
                allow[s * L:(s + 1) * L, r * L:(r + 1) * L] = eye
        m = torch.zeros(k * L, k * L)
        m.masked_fill_(~allow, float("-inf"))
        masks.append(m[None, None])
    return masks


def mtp_losses(mtp: MTP, emb_w: torch.Tensor, head_w: torch.Tensor, ids: torch.Tensor, H: torch.Tensor,
               labels: torch.Tensor, masks: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """CE of each chain step and its per-position correctness (for the acceptance estimate).

    Pair t (t = 0..T-2) = (H_t, x_{t+1}) at position t; step s predicts x_{t+s+1}; anchors with t+s+1 < T."""
    B, T = ids.shape
    L = T - 1
    pos1 = torch.arange(L)[None].expand(B, L)
    u = [mtp.inputs(F.embedding(ids[:, 1:], emb_w), H[:, :-1])]
    losses, hits = [], []
    prev = None
    for s in range(1, STEPS + 1):
        if s > 1:
            tok = torch.cat([ids[:, s:], ids.new_full((B, s - 1), 0)], dim=1)  # x_{t+s}, padded past the end
            u.append(mtp.inputs(F.embedding(tok, emb_w), prev))
        seq = torch.cat(u, dim=1)
        pos = torch.cat([pos1 + r for r in range(s)], dim=1)
        out = mtp.run(seq, pos, masks[s - 1])[:, (s - 1) * L:]
        prev = out
        logits = F.linear(out, head_w)
        tgt = torch.cat([labels[:, s + 1:], labels.new_full((B, s), -100)], dim=1)  # x_{t+s+1}
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100))
        hits.append((logits.argmax(-1) == tgt) | (tgt == -100))
    return losses, hits


def load_data(data: Path, tok) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines()]
    seqs, labs = [], []
    for r in rows:
        p = tok(r["prompt"])["input_ids"]
        c = tok(r["completion"])["input_ids"]
        seqs.append(p + c)
        labs.append([-100] * len(p) + c)
    T = max(map(len, seqs))
    pad = tok.pad_token_id
    ids = torch.tensor([s + [pad] * (T - len(s)) for s in seqs])
    labels = torch.tensor([s + [-100] * (T - len(s)) for s in labs])
    return ids, labels


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=320)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)  # 1: no OpenMP spin-waits on a shared, loaded CPU
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tok = PreTrainedTokenizerFast.from_pretrained(args.data / "tokenizer")
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    kw = config_kwargs(len(tok), eos, pad, args.hidden)
    config = Qwen3NextConfig(**kw)
    config._attn_implementation = "sdpa"
    model = Qwen3NextForCausalLM(config)
    mtp = MTP(kw)
    ids, labels = load_data(args.data, tok)
    N, T = ids.shape
    masks = chain_masks(T - 1)
    diff = fastpatch.check(model, ids[:8])
    print(json.dumps({"fastpatch_max_abs_diff": diff, "examples": N, "seq_len": T}), flush=True)
    assert diff < 1e-4, diff
    fastpatch.install(model, mtp)
    params = list(model.parameters()) + list(mtp.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.98), weight_decay=0.0)
    warm = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(i, args.steps) / args.steps))))
    g = torch.Generator().manual_seed(args.seed)
    t0 = time.time()
    log = []
    for step in range(args.steps):
        idx = torch.randint(0, N, (args.batch,), generator=g)
        x, y = ids[idx], labels[idx]
        H = model.model(input_ids=x).last_hidden_state
        logits = model.lm_head(H)
        main_loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1),
                                    ignore_index=-100)
        m_losses, hits = mtp_losses(mtp, model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach(),
                                    x, H.detach(), y, masks)
        loss = main_loss + sum(m_losses)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % 25 == 0 or step == args.steps - 1:
            # acceptance estimate: mean over anchors of 1 + (consecutive correct chain steps)
            acc = 1 + torch.cumprod(torch.stack([h[:, :T - 1 - STEPS].float() for h in hits]), 0).sum(0)
            valid = (y[:, 2:T - STEPS + 1] != -100)
            rec = {"step": step, "s": round(time.time() - t0, 1), "loss": round(main_loss.item(), 4),
                   "mtp": [round(v.item(), 3) for v in m_losses],
                   "accept_est": round(acc[valid].mean().item(), 3)}
            log.append(rec)
            print(json.dumps(rec), flush=True)
    train_s = time.time() - t0
    fastpatch.uninstall(model, mtp)
    save(model, mtp, tok, kw, args, train_s, log)


def save(model, mtp, tok, kw, args, train_s, log) -> None:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(out)
    model.generation_config.eos_token_id = kw["eos_token_id"]
    model.generation_config.pad_token_id = kw["pad_token_id"]
    model.save_pretrained(out, safe_serialization=True)
    (weights,) = sorted(out.glob("model*.safetensors"))
    tensors = load_file(weights)
    tensors.update(mtp.tensors())
    save_file(tensors, weights, metadata={"format": "pt"})
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(full_attention_interval=4, num_nextn_predict_layers=1)
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    info = {"architecture": cfg["architectures"][0], "layer_types": cfg["layer_types"], "hidden": kw["hidden_size"],
            "vocab": kw["vocab_size"], "parameters": sum(t.numel() for t in tensors.values()),
            "mtp_parameters": sum(t.numel() for n, t in tensors.items() if n.startswith("mtp.")),
            "steps": args.steps, "batch": args.batch, "lr": args.lr, "seed": args.seed,
            "train_s": round(train_s, 1), "final": log[-1]}
    (out / "mtp-remote-model.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps(info))


if __name__ == "__main__":
    main()
