"""Training-speed stand-ins for two slow parts of transformers' Qwen3-Next on a CPU, used by
``train_tiny_hybrid.py`` (same math, checked by ``check()`` against the originals; from
``../shared/reference/trained-hybrid-cpu/fastpatch.py``):

- the gated delta rule over a whole short sequence (T <= 128, zero initial state, no final state): one chunk in
  closed form, out = ((Q K^T) * D_incl) @ (I + N)^-1 (V * beta) with N = strict_lower((K * beta) K^T * D),
  D_ij = exp(G_i - G_j), G = cumsum(g) -- the chunk algorithm of ``torch_chunk_gated_delta_rule`` with its
  63-step Python forward substitution replaced by one triangular solve;
- the sparse MoE block computed densely (every expert on every token, weighted by the top-k routing weights,
  zero elsewhere) instead of a gather/index_add per expert.

Generation and evaluation keep the originals (``install(model)`` only swaps the per-instance GDN function and
the MoE class forward; ``uninstall()`` restores the class forward).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.models.qwen3_next import modeling_qwen3_next as m

_ORIG_MOE = m.Qwen3NextSparseMoeBlock.forward
#: the closed form is exact for any length (one chunk, zero initial state); capped to keep the T x T work small
MAX_T = 128


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def fast_gated_delta_rule(query, key, value, g, beta, chunk_size=64, initial_state=None,
                          output_final_state=False, use_qk_l2norm_in_kernel=False):
    T = query.shape[1]
    if initial_state is not None or output_final_state or T > MAX_T:
        return m.torch_chunk_gated_delta_rule(query, key, value, g=g, beta=beta, chunk_size=chunk_size,
                                              initial_state=initial_state, output_final_state=output_final_state,
                                              use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    dtype = query.dtype
    if use_qk_l2norm_in_kernel:
        query, key = _l2norm(query), _l2norm(key)
    q, k, v, b, gg = (x.transpose(1, 2).contiguous().to(torch.float32) for x in (query, key, value, beta, g))
    q = q * (q.shape[-1] ** -0.5)
    G = gg.cumsum(dim=-1)
    D = (G.unsqueeze(-1) - G.unsqueeze(-2)).tril().exp().tril()
    incl = torch.ones(T, T, dtype=torch.bool).tril()
    strict = torch.ones(T, T, dtype=torch.bool).tril(-1)
    N = ((k * b.unsqueeze(-1)) @ k.transpose(-1, -2) * D).masked_fill(~strict, 0)
    A = N + torch.eye(T)
    U = torch.linalg.solve_triangular(A, v * b.unsqueeze(-1), upper=False, unitriangular=True)
    out = ((q @ k.transpose(-1, -2)) * D).masked_fill(~incl, 0) @ U
    return out.transpose(1, 2).contiguous().to(dtype), None


def _dense_moe(self, hidden_states: torch.Tensor):
    B, T, d = hidden_states.shape
    x = hidden_states.view(-1, d)
    router_logits = self.gate(x)
    w = F.softmax(router_logits, dim=1, dtype=torch.float)
    w_top, sel = torch.topk(w, self.top_k, dim=-1)
    if self.norm_topk_prob:
        w_top = w_top / w_top.sum(dim=-1, keepdim=True)
    full = torch.zeros_like(w).scatter(1, sel, w_top).to(x.dtype)
    out = sum(full[:, e:e + 1] * self.experts[e](x) for e in range(len(self.experts)))
    out = out + torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
    return out.view(B, T, d), router_logits


def install(*modules: torch.nn.Module) -> None:
    m.Qwen3NextSparseMoeBlock.forward = _dense_moe
    for mod in modules:
        for sub in mod.modules():
            if isinstance(sub, m.Qwen3NextGatedDeltaNet):
                sub.chunk_gated_delta_rule = fast_gated_delta_rule


def uninstall(*modules: torch.nn.Module) -> None:
    m.Qwen3NextSparseMoeBlock.forward = _ORIG_MOE
    for mod in modules:
        for sub in mod.modules():
            if isinstance(sub, m.Qwen3NextGatedDeltaNet):
                sub.chunk_gated_delta_rule = m.torch_chunk_gated_delta_rule


def check(model: torch.nn.Module, ids: torch.Tensor) -> float:
    """Max |difference| of the last hidden state, originals vs stand-ins, on ``ids`` (float32)."""
    with torch.no_grad():
        uninstall(model)
        ref = model.model(input_ids=ids).last_hidden_state
        install(model)
        fast = model.model(input_ids=ids).last_hidden_state
    return (ref - fast).abs().max().item()
