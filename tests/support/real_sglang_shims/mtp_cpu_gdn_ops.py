"""CPU stand-ins for the five ``*_cpu`` GDN ops of SGLang 0.5.9's hybrid linear-attention backend.

Test scaffolding, copied into the cached real-SGLang venv by ``tests/support/real_hybrid.py`` (never imported by
``mtp_remote``). On a CPU, ``layers/attention/hybrid_linear_attn_backend.py`` asserts Intel AMX and imports
``sgl_kernel.mamba.causal_conv1d_fn_cpu`` / ``causal_conv1d_update_cpu`` / ``chunk_gated_delta_rule_cpu`` and
``torch.ops.sgl_kernel.fused_sigmoid_gating_delta_rule_update_cpu`` / ``fused_gdn_gating_cpu``: they exist only
in SGLang's AMX build of sgl-kernel, not in the PyPI wheel. The venv's text patch points that import here.

What runs where (``TRITON_INTERPRET=1`` must be set before triton is imported, as the host env does):

- decode (``fused_sigmoid_gating_delta_rule_update``) and gating (``fused_gdn_gating``): SGLang's own Triton
  kernels, the ones its CUDA path runs, interpreted;
- verify (``fused_recurrent_gated_delta_rule_update`` with per-step intermediate states): not an ``*_cpu`` op,
  SGLang calls its Triton kernel directly;
- prefill (``chunk_gated_delta_rule``): pure torch, token by token (fla's chunk kernels use
  ``tl.make_block_ptr``, which Triton 3.9's interpreter removed); it also returns fla's per-64-token chunk
  states ``h``, which ``--mamba-scheduler-strategy extra_buffer`` tracks;
- conv (``causal_conv1d_fn`` / ``causal_conv1d_update``): SGLang's Triton kernels on fp32 data, torch on half
  precision (the interpreter computes garbage on bf16 arithmetic).

Plus small CPU fixes made at import, each commented where it is made.
"""
import contextlib

import numpy as _np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.runtime.interpreter as _ti

import sglang.srt.layers.attention.fla.fused_recurrent as _fla_fr
import sglang.srt.layers.attention.fla.layernorm_gated as _fla_ln
import sglang.srt.layers.attention.fla.utils as _fla_utils
from sglang.srt.layers.attention.fla.fused_gdn_gating import fused_gdn_gating as fused_gdn_gating_cpu
from sglang.srt.layers.attention.fla.fused_sigmoid_gating_recurrent import (
    fused_sigmoid_gating_delta_rule_update as fused_sigmoid_gating_delta_rule_update_cpu,
)
from sglang.srt.layers.attention.mamba.causal_conv1d_triton import causal_conv1d_fn as _triton_causal_conv1d_fn
from sglang.srt.layers.attention.mamba.causal_conv1d_triton import (
    causal_conv1d_update as _triton_causal_conv1d_update,
)

# Qwen3NextForCausalLM.set_embed_and_head (NEXTN: the MTP draft shares the target's embed/head) ends with
# torch.cuda.synchronize(), which raises on a CPU-only torch build.
if not torch.cuda.is_available():
    torch.cuda.synchronize = lambda *args, **kwargs: None

# fla's @input_guard enters torch.<device>.device(index); torch.cpu has no `device` class.
if not hasattr(torch.cpu, "device"):
    _fla_utils.custom_device_ctx = lambda index: contextlib.nullcontext()
# Triton 3.9's interpreter: `(scalar_int64 < n) & bool_tensor` yields an int64 mask, which its C++ load/store
# reject ("mask has unsupported dtype"); SGLang's causal_conv1d_update kernel builds masks like that.


def _bool_mask(fn):
    def wrapped(self, ptrs, *args):
        args = list(args)
        mask = args[1] if fn.__name__ == "create_masked_store" else args[0]
        if mask.data.dtype != _np.bool_:
            mask = _ti.TensorHandle(mask.data.astype(_np.bool_), _ti.tl.int1)
            args[1 if fn.__name__ == "create_masked_store" else 0] = mask
        return fn(self, ptrs, *args)
    wrapped.__name__ = fn.__name__
    return wrapped


for _name in ("create_masked_load", "create_masked_store"):
    _f = getattr(_ti.InterpreterBuilder, _name)
    if not getattr(_f, "_mtp_bool_mask", False):
        _w = _bool_mask(_f)
        _w._mtp_bool_mask = True
        setattr(_ti.InterpreterBuilder, _name, _w)

# The interpreter swaps tl.exp & co. for numpy versions only when a kernel names them as `tl.exp`; fla
# kernels call module-level aliases (`from fla.op import exp`), which stay the compiled-only builtins
# ("Did you forget to add @triton.jit?"). Rebind those aliases to interpretable @triton.jit wrappers.


@triton.jit
def _exp(x):
    return tl.exp(x)


if _fla_fr.exp is tl.exp:
    _fla_fr.exp = _exp


# RMSNormGated's Triton path sizes its grid from torch.cuda.get_device_properties(); one "SM" on CPU.
_fla_ln._get_sm_count = lambda device: 1



def _torch_causal_conv1d_fn(x, weight, bias=None, conv_states=None, query_start_loc=None, seq_lens_cpu=None,
                         cache_indices=None, has_initial_state=None, activation="silu", pad_slot_id=-1, **_):
    """Pure-torch varlen causal conv1d (prefill), same contract as sgl-kernel's causal_conv1d_fwd: x (dim, T)
    concatenated sequences; conv_states (pool, dim, width-1) read when has_initial_state, then overwritten
    with each sequence's last width-1 inputs. (Triton's interpreter rejects the Triton version of this
    kernel: 'mask has unsupported dtype'; on CUDA SGLang runs sgl-kernel's CUDA op here anyway.)"""
    dim, _total = x.shape
    width = weight.shape[1]
    state_len = width - 1
    out = torch.empty_like(x)
    qsl = [int(v) for v in query_start_loc.tolist()]
    for b in range(len(qsl) - 1):
        s, e = qsl[b], qsl[b + 1]
        if e == s:
            continue
        ci = int(cache_indices[b]) if cache_indices is not None else b
        if ci == pad_slot_id:
            continue
        xs = x[:, s:e].float()
        if has_initial_state is not None and bool(has_initial_state[b]):
            init = conv_states[ci].float()
        else:
            init = torch.zeros(dim, state_len, dtype=torch.float32, device=x.device)
        full = torch.cat([init, xs], dim=-1)
        y = F.conv1d(full.unsqueeze(0), weight.float().unsqueeze(1), None if bias is None else bias.float(),
                     groups=dim).squeeze(0)
        if activation in ("silu", "swish", True):
            y = F.silu(y)
        out[:, s:e] = y.to(out.dtype)
        conv_states[ci] = full[:, -state_len:].to(conv_states.dtype)
    return out


CHUNK_SIZE = 64  # = sglang.srt.layers.attention.fla.chunk_delta_h.CHUNK_SIZE (FLA_CHUNK_SIZE)


def _l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def chunk_gated_delta_rule_cpu(q, k, v, g, beta, initial_state, cu_seqlens, head_first=False,
                               use_qk_l2norm_in_kernel=False, scale=None, **_):
    """Pure-torch gated delta rule over varlen sequences (prefill/extend), token by token: the exact
    recurrence that fla's chunked kernels compute blockwise. (fla's chunk kernels use tl.make_block_ptr,
    which Triton 3.9's interpreter no longer implements.) Layouts as SGLang's CPU branch passes them:
    q,k [1,T,H,K]; v [1,T,HV,V]; g,beta [1,T,HV]; initial_state [N,HV,K,V] (a gathered copy).
    Returns (o [1,T,HV,V], final_state [N,HV,K,V] float32, h [1,chunks,HV,K,V]) (sgl-kernel's CPU op returns h=None)."""
    T, H, K = q.shape[1], q.shape[2], q.shape[3]
    HV, V = v.shape[2], v.shape[3]
    rep = HV // H
    scale = K ** -0.5 if scale is None else scale
    qf, kf = q[0].float(), k[0].float()
    if use_qk_l2norm_in_kernel:
        qf, kf = _l2norm(qf), _l2norm(kf)
    qf = qf.repeat_interleave(rep, dim=1) * scale  # [T,HV,K]
    kf = kf.repeat_interleave(rep, dim=1)
    vf, gf, bf = v[0].float(), g[0].float(), beta[0].float()
    o = torch.empty(T, HV, V, dtype=torch.float32, device=q.device)
    state = initial_state.float().clone()
    qsl = [int(x) for x in cu_seqlens.tolist()]
    hs = []  # fla's `h`: per sequence, the state at the start of each 64-token chunk (mamba extra_buffer tracking)
    for n in range(len(qsl) - 1):
        S = state[n]  # [HV,K,V]: the layout fla's kernels (chunk_delta_h, fused_recurrent) use
        for t in range(qsl[n], qsl[n + 1]):
            if (t - qsl[n]) % CHUNK_SIZE == 0:
                hs.append(S.clone())
            S = S * torch.exp(gf[t])[:, None, None]
            kv_mem = torch.einsum("hkv,hk->hv", S, kf[t])
            delta = (vf[t] - kv_mem) * bf[t][:, None]
            S = S + kf[t][:, :, None] * delta[:, None, :]
            o[t] = torch.einsum("hkv,hk->hv", S, qf[t])
        state[n] = S
    h = torch.stack(hs).unsqueeze(0) if hs else None  # [1, total_chunks, HV, K, V]
    return o.unsqueeze(0).to(q.dtype), state, h


def _torch_causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                             conv_state_indices=None, num_accepted_tokens=None, intermediate_conv_window=None,
                             intermediate_state_indices=None, retrieve_next_token=None,
                             retrieve_next_sibling=None, retrieve_parent_token=None, pad_slot_id=-1, **_):
    """Pure-torch causal_conv1d_update with the contract of SGLang's Triton kernel (decode and target-verify):
    x (bs, dim) or (bs, dim, L); conv_state (pool, dim, W-1) -> after the call holds cat(old, x)[..., -(W-1):];
    in verify, intermediate_conv_window[intermediate_state_indices[b], t] (layout [seq, step, dim, W-1]) gets
    the window after draft token t, whose parent is t-1 (chain) or is read from retrieve_next_token /
    retrieve_next_sibling (tree; parents written to retrieve_parent_token). (Triton 3.9's interpreter returns
    garbage for the Triton kernel here.)"""
    assert cache_seqlens is None and num_accepted_tokens is None, "circular/accepted-token modes not ported"
    squeeze = x.dim() == 2
    xs = x.unsqueeze(-1) if squeeze else x
    bs, dim, L = xs.shape
    W = weight.shape[1]
    sl = W - 1
    wf = weight.float()
    bf = None if bias is None else bias.float()
    out = torch.empty_like(xs)
    for b in range(bs):
        ci = int(conv_state_indices[b]) if conv_state_indices is not None else b
        if ci == pad_slot_id:
            continue
        init = conv_state[ci, :, -sl:].float()
        parent = list(range(-1, L - 1))
        if retrieve_next_token is not None:
            parent = [-1] * L
            nxt, sib = retrieve_next_token[b].tolist(), retrieve_next_sibling[b].tolist()
            for i in range(L):
                c = nxt[i]
                while c != -1:
                    parent[c] = i
                    c = sib[c]
            if retrieve_parent_token is not None:
                retrieve_parent_token[b, :L] = torch.tensor(parent, dtype=retrieve_parent_token.dtype)
        windows = []
        for tk in range(L):
            prev = init if parent[tk] < 0 else windows[parent[tk]]
            full = torch.cat([prev, xs[b, :, tk:tk + 1].float()], dim=-1)  # (dim, W)
            y = (full * wf).sum(-1)
            if bf is not None:
                y = y + bf
            if activation in ("silu", "swish", True):
                y = F.silu(y)
            out[b, :, tk] = y.to(out.dtype)
            windows.append(full[:, 1:])
            if intermediate_conv_window is not None:
                ii = int(intermediate_state_indices[b])
                intermediate_conv_window[ii, tk] = full[:, 1:].to(intermediate_conv_window.dtype)
        conv_state[ci, :, -sl:] = torch.cat([conv_state[ci, :, -sl:].float(), xs[b].float()], -1)[:, -sl:].to(conv_state.dtype)
    return out.squeeze(-1) if squeeze else out


# Triton 3.9's interpreter computes garbage on bf16/fp16 data that a kernel does not first cast to fp32 (SGLang's
# conv kernels, and the Triton attention backend's kernels, e.g. extend_attention_fwd: max error ~8e8 in bf16,
# 2e-7 in fp32). So: fp32 -> SGLang's own Triton conv kernels (what its CUDA path runs for decode/verify);
# half precision -> the torch versions above.

_HALF = (torch.bfloat16, torch.float16)


def causal_conv1d_fn_cpu(x, weight, bias=None, **kw):
    fn = _torch_causal_conv1d_fn if x.dtype in _HALF else _triton_causal_conv1d_fn
    return fn(x, weight, bias, **kw)


def causal_conv1d_update_cpu(x, conv_state, weight, bias=None, activation=None, **kw):
    fn = _torch_causal_conv1d_update if x.dtype in _HALF else _triton_causal_conv1d_update
    return fn(x, conv_state, weight, bias, activation, **kw)
