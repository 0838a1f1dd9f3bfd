"""GPU memory model of the simulated engine: what weights, caches and graphs take on each TP rank.

Numbers follow the field's log (``corpus/logs/l01_ready_tp2_nextn.log``: Qwen3.6-27B, TP 2, two 48 GiB GPUs,
``--mem-fraction-static 0.88``) and SGLang's accounting (``model_runner.py``/``pool_configurator.py``):
the static budget is ``total * mem_fraction_static``; what the weights leave of it goes to the Mamba cache and
the KV pool; the rest of the GPU is for activations and CUDA graphs. The model size comes from the model path
(``27B`` -> 27e9 parameters in BF16; 8B when the path names none). Hybrid (Mamba/GDN) models are recognised by
name (Qwen3.5/3.6, Qwen3-Next, ...). All sizes in GB (GiB, as SGLang prints them) per rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mtp_remote.sim.args import ServerArgs
from mtp_remote.sim.faults import Faults

_HYBRID_RE = re.compile(r"qwen3[._-]?[56]|qwen3-next|nemotron-h|jamba|falcon-h|granite-4", re.IGNORECASE)
_DENSE_RE = re.compile(r"llama|qwen2|qwen3-\d|qwen3-coder|mistral|mixtral|gemma|deepseek|phi-|gpt-oss", re.IGNORECASE)
_TOKEN_BYTES_TP1 = 130_986  # K+V bytes per token on one rank at TP 1 (16 full-attention layers)
_MAMBA_SLOT_GB_TP1 = (0.21 * 2 / 48, 2.95 * 2 / 48)  # conv, ssm per slot at TP 1


@dataclass(frozen=True)
class MemoryPlan:
    """Per-rank memory after each startup milestone, and the failure the flags lead to (if any).

    ``failure`` is None or one of ``weights_oom``, ``kv_pool_too_small``, ``cuda_graph_oom``.
    """

    total_gb: float
    avail_start_gb: float
    init_gb: float
    weights_gb: float
    hybrid: bool
    mamba_slots: int
    mamba_conv_gb: float
    mamba_ssm_gb: float
    kv_tokens: int
    kv_gb: float
    avail_after_pool_gb: float
    cuda_graph_bs: tuple[int, ...]
    graph_gb: float
    draft_weights_gb: float
    draft_graph_gb: float
    failure: str | None

    @property
    def used_gb(self) -> float:
        """What the rank holds once ready."""
        return (self.init_gb + self.weights_gb + self.mamba_conv_gb + self.mamba_ssm_gb + self.kv_gb
                + self.graph_gb + self.draft_weights_gb + self.draft_graph_gb)


def params_billion(model_path: str) -> float:
    """Parameter count in billions read from a model path (``Qwen3.6-27B`` -> 27.0; 8.0 if none)."""
    m = re.search(r"(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", model_path)
    return float(m.group(1)) if m else 8.0


def is_hybrid(model_path: str) -> bool:
    """Whether the model has linear-attention (Mamba/GDN) layers, judged by its name.

    Known dense families (Llama, Qwen2/2.5, Qwen3 dense, Mistral, Gemma, DeepSeek, ...) are not; any other
    name is taken as hybrid, since the sim stands in for the field's hybrid model by default.
    """
    if _HYBRID_RE.search(model_path):
        return True
    return not _DENSE_RE.search(model_path)


def cuda_graph_batch_sizes(max_bs: int) -> tuple[int, ...]:
    """SGLang's capture list ``[1, 2, 4, 8, 12, 16, 24, 32, ...]`` cut at ``max_bs``."""
    sizes = [1, 2, 4, 8] + list(range(12, 33, 4)) + list(range(40, 161, 8)) + list(range(176, 513, 16))
    out = tuple(s for s in sizes if s <= max_bs)
    return out or (1,)


def plan_memory(args: ServerArgs, total_mib: int, faults: Faults) -> MemoryPlan:
    """The per-rank memory plan for these flags on a GPU of ``total_mib`` MiB (pure)."""
    tp = max(args.tp_size, 1)
    total = total_mib / 1024
    avail0 = total - 1.10
    init = 0.61 if tp > 1 else 0.35
    pb = params_billion(args.model_path)
    weights = pb * 1.8904 / tp
    hybrid = is_hybrid(args.model_path)
    spec = args.speculative
    draft_w = (0.94 * pb / 27 * 2 / tp) if spec else 0.0
    draft_g = 0.18 if spec and not args.disable_cuda_graph else 0.0
    failure = None
    if weights > avail0 - 0.5:
        failure = "weights_oom"
    avail1 = avail0 - weights
    pool = avail1 - total * (1 - args.mem_fraction_static) - draft_w
    per_slot = [g * pb / 27 / tp for g in _MAMBA_SLOT_GB_TP1]
    slots = min(3 * args.max_running_requests, int(max(pool, 0) * 0.3 / sum(per_slot))) if hybrid else 0
    conv, ssm = slots * per_slot[0], slots * per_slot[1]
    kv_gb = pool - conv - ssm
    kv_tokens = int(kv_gb * 2**30 / (_TOKEN_BYTES_TP1 / tp)) if kv_gb > 0 else 0
    if args.max_total_tokens:
        kv_tokens = min(kv_tokens, args.max_total_tokens)
        kv_gb = kv_tokens * _TOKEN_BYTES_TP1 / tp / 2**30
    if failure is None and (kv_tokens < 4096 or ("kv_pool_too_small" in faults
                                                  and args.mem_fraction_static < faults.value("kv_pool_too_small"))):
        failure = "kv_pool_too_small"
    avail2 = avail1 - max(kv_gb, 0) - conv - ssm
    bs = cuda_graph_batch_sizes(args.cuda_graph_max_bs or 16)
    graph = 0.0 if args.disable_cuda_graph else 0.44 * (max(bs) / 16) ** 0.5
    if failure is None and graph and (avail2 - draft_w - graph < 0.25 or (
            "cuda_graph_oom" in faults and args.mem_fraction_static > faults.value("cuda_graph_oom"))):
        failure = "cuda_graph_oom"
    return MemoryPlan(total, avail0, init, weights, hybrid, slots, conv, ssm, kv_tokens, max(kv_gb, 0.0),
                      avail2, bs, graph, draft_w, draft_g, failure)
