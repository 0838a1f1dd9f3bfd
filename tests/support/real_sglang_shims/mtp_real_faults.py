"""Real faults injected into real SGLang 0.5.9, for the real-engine tests: test scaffolding in the cached venv.

``tests/support/real_hybrid.py`` copies this file into the venv's site-packages and appends one call to the end
of two SGLang modules (``install_leak`` to ``layers/attention/hybrid_linear_attn_backend.py``,
``install_accept_all`` to ``speculative/eagle_info.py``). Each wraps one real SGLang function; the wrapper
reads :data:`ENV` on every call (the scheduler process inherits the server's environment, which the inventory
host's ``env`` sets), so a venv without the variable behaves exactly as SGLang does. Nothing in ``mtp_remote``
imports or knows about this module. Faults (comma-separated in ``MTP_REMOTE_REAL_FAULTS``):

- ``mamba_state_leak`` — the field's fault. In NEXTN's verify the target runs every draft token through the
  Gated-DeltaNet layers with the state update disabled and keeps the state after each step
  (``MambaPool``'s intermediate SSM/conv caches); ``update_mamba_state_after_mtp_verify`` then commits the state
  after the *last accepted* token. With the fault it commits the state after the *last draft* token: rejected
  draft tokens leave their mark on the recurrent state, while the token stream and the KV cache of the
  full-attention layers stay correct.
- ``accept_all_drafts`` — greedy verification (``verify_tree_greedy_func``, what SGLang runs on a CPU at every
  temperature: the sampling kernel is CUDA-only) accepts every draft token, as if the target had produced
  each: the committed tokens are the draft head's, acceptance length is the draft length.
"""

from __future__ import annotations

import functools
import os

import torch

ENV = "MTP_REMOTE_REAL_FAULTS"
KNOWN = ("mamba_state_leak", "accept_all_drafts")


def active(name: str) -> bool:
    """Whether fault ``name`` is switched on in this process's environment (read at each call)."""
    faults = {f.strip() for f in os.environ.get(ENV, "").split(",") if f.strip()}
    unknown = faults - set(KNOWN)
    if unknown:
        raise ValueError(f"{ENV}: unknown fault(s) {sorted(unknown)}; choose from {list(KNOWN)}")
    return name in faults


def install_leak(backend_cls) -> None:
    """Wrap ``HybridLinearAttnBackend.update_mamba_state_after_mtp_verify`` (``mamba_state_leak``)."""
    original = backend_cls.update_mamba_state_after_mtp_verify
    if getattr(original, "_mtp_fault", False):
        return

    @functools.wraps(original)
    def update(self, accepted_steps, mamba_track_indices, mamba_steps_to_track, model):
        if active("mamba_state_leak"):
            caches = self.linear_attn_backend.req_to_token_pool.get_speculative_mamba2_params_all_layers()
            last_step = caches.intermediate_ssm.shape[2] - 1  # [layers, requests, draft steps, ...]
            accepted_steps = torch.where(accepted_steps >= 0, torch.full_like(accepted_steps, last_step),
                                         accepted_steps)
        return original(self, accepted_steps, mamba_track_indices, mamba_steps_to_track, model)

    update._mtp_fault = True
    backend_cls.update_mamba_state_after_mtp_verify = update


def install_accept_all(module) -> None:
    """Wrap ``eagle_info.verify_tree_greedy_func`` (``accept_all_drafts``): the target's prediction at each draft
    position is replaced by the next draft token, so verification accepts the whole chain (topk 1) and the
    target's own token after the last draft is the bonus token."""
    original = module.verify_tree_greedy_func
    if getattr(original, "_mtp_fault", False):
        return

    @functools.wraps(original)
    def verify(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
               retrive_next_sibling, target_predict, topk=-1):
        if active("accept_all_drafts"):
            target_predict = target_predict.clone()
            target_predict[:, :-1] = candidates[:, 1:]
        return original(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                        retrive_next_sibling, target_predict, topk=topk)

    verify._mtp_fault = True
    module.verify_tree_greedy_func = verify
