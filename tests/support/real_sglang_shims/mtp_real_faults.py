"""Real faults injected into real SGLang 0.5.9, for the real-engine tests: test scaffolding in the cached venv.

``tests/support/real_hybrid.py`` copies this file into the venv's site-packages and appends one call to the end
of two SGLang modules (``install_leak`` to ``layers/attention/hybrid_linear_attn_backend.py``,
``install_accept_all`` to ``speculative/eagle_info.py``; the build step of the state faults copies it again and
appends ``install_prefill_record``, see :data:`STATE_FAULTS`). Each wraps one real SGLang function; the wrapper
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

The state faults (the commit of the recurrent state after a NEXTN verify gone wrong in one of the ways a real
implementation can get it wrong; all wrap ``HybridLinearAttnBackend.update_mamba_state_after_mtp_verify``,
SGLang 0.5.9 ``layers/attention/hybrid_linear_attn_backend.py:1695``, called once per verify by
``speculative/eagle_worker.py:855``). During a verify the GDN layers run every draft token with
``disable_state_update=True`` (``hybrid_linear_attn_backend.py:1017-1027``): the live SSM state stays the
pre-verify one and the state after each draft step goes to the intermediate caches; the conv kernel
(``causal_conv1d_update``, ``:961``) writes the window in place. The commit (``:1723-1739``) then copies the step
``accepted_steps`` (= accept length - 1, ``eagle_worker.py:832``) of both caches into the request's slot. Tokens,
the full-attention KV cache and the MTP draft stay right in every one of them: only the recurrent state is wrong.

- ``stale_state`` — the commit is skipped (``accepted_steps`` all -1: ``valid_mask`` at ``:1723`` empty). In the
  field: the commit's destination indices are another cache line than the request's (a padded or idle batch
  slot), or an accept length of 0 is passed where 1 was meant. The SSM state misses every accepted token and the
  conv window keeps the last draft's.
- ``commit_late`` — off by one, high: the state after one more step than accepted (``accepted_steps + 1``, capped at
  the last draft): one rejected draft token leaks into the state. In the field: the accept length counted with or
  without the bonus token on the two sides of the call (``accepted_length - 1`` at ``eagle_worker.py:832``).
- ``conv_leak`` — the SSM state is committed right but the conv window is not rolled back (``:1736`` dropped): it
  keeps what the verify kernel wrote in place, the window after the last draft. In the field: a backend whose
  conv kernel has no intermediate-window buffer, or a commit written for the SSM cache alone.
- ``rewind`` — after the commit the request's SSM and conv state are put back to the ones its prefill left: the
  recurrent layers only ever see the prompt plus the current verify window. In the field: a slot mix-up between
  the live state and the prompt's checkpoint (``--mamba-scheduler-strategy extra_buffer`` keeps per-request track
  slots beside the live one and copies between them at ``:1745-1762``; copying the wrong way round restores the
  checkpoint). The prefill's state is recorded by a second wrapper, on ``GDNAttnBackend.forward_extend``
  (``:915``), which only reads; the fault itself is in the commit. This one loops: with the state stuck at the
  prompt, the model restates the question forever ("... plus 4 plus 4 plus 4 ...") until ``max_tokens``.
"""

from __future__ import annotations

import functools
import os

import torch

ENV = "MTP_REMOTE_REAL_FAULTS"
#: The faults of the commit after a verify (``update_mamba_state_after_mtp_verify``), one at a time.
STATE_FAULTS = ("mamba_state_leak", "stale_state", "commit_late", "conv_leak", "rewind")
KNOWN = (*STATE_FAULTS, "accept_all_drafts")
#: Fault ``rewind``: cache slot -> GDN layer id -> (SSM state, conv window) after the slot's last prefill.
PREFILL_STATE: dict[int, dict[int, tuple[torch.Tensor, torch.Tensor]]] = {}


def active(name: str) -> bool:
    """Whether fault ``name`` is switched on in this process's environment (read at each call)."""
    faults = {f.strip() for f in os.environ.get(ENV, "").split(",") if f.strip()}
    unknown = faults - set(KNOWN)
    if unknown:
        raise ValueError(f"{ENV}: unknown fault(s) {sorted(unknown)}; choose from {list(KNOWN)}")
    return name in faults


def install_leak(backend_cls) -> None:
    """Wrap ``HybridLinearAttnBackend.update_mamba_state_after_mtp_verify`` with the state faults
    (:data:`STATE_FAULTS`; the name is the first of them's, kept for the hook already appended to the venvs)."""
    original = backend_cls.update_mamba_state_after_mtp_verify
    if getattr(original, "_mtp_fault", False):
        return

    @functools.wraps(original)
    def update(self, accepted_steps, mamba_track_indices, mamba_steps_to_track, model):
        caches = self.linear_attn_backend.req_to_token_pool.get_speculative_mamba2_params_all_layers()
        last_step = caches.intermediate_ssm.shape[2] - 1  # [layers, requests, draft steps, ...]
        slots = self.linear_attn_backend.forward_metadata.mamba_cache_indices[:accepted_steps.shape[0]]
        valid = accepted_steps >= 0
        if active("mamba_state_leak"):
            accepted_steps = torch.where(valid, torch.full_like(accepted_steps, last_step), accepted_steps)
        elif active("stale_state"):
            accepted_steps = torch.full_like(accepted_steps, -1)
        elif active("commit_late"):
            accepted_steps = torch.where(valid, torch.clamp(accepted_steps + 1, max=last_step), accepted_steps)
        in_place_conv = caches.conv[0][:, slots.to(torch.int64)].clone() if active("conv_leak") else None
        out = original(self, accepted_steps, mamba_track_indices, mamba_steps_to_track, model)
        if in_place_conv is not None:
            caches.conv[0][:, slots.to(torch.int64)] = in_place_conv
        if active("rewind"):
            pool = self.linear_attn_backend.req_to_token_pool
            for slot in slots.tolist():
                for layer_id, (ssm, conv) in PREFILL_STATE.get(int(slot), {}).items():
                    layer = pool.mamba2_layer_cache(layer_id)
                    layer.temporal[slot] = ssm
                    layer.conv[0][slot] = conv
        return out

    update._mtp_fault = True
    backend_cls.update_mamba_state_after_mtp_verify = update


def install_prefill_record(gdn_cls) -> None:
    """Wrap ``GDNAttnBackend.forward_extend`` to record each slot's state after a prefill (an extend that is not a
    verify) while ``rewind`` is on; it changes nothing."""
    original = gdn_cls.forward_extend
    if getattr(original, "_mtp_fault", False):
        return

    @functools.wraps(original)
    def forward_extend(self, layer, forward_batch, *args, **kwargs):
        out = original(self, layer, forward_batch, *args, **kwargs)
        if active("rewind") and not forward_batch.forward_mode.is_target_verify():
            cache = self.req_to_token_pool.mamba2_layer_cache(layer.layer_id)
            for slot in self.forward_metadata.mamba_cache_indices.tolist():
                PREFILL_STATE.setdefault(int(slot), {})[layer.layer_id] = (cache.temporal[slot].clone(),
                                                                           cache.conv[0][slot].clone())
        return out

    forward_extend._mtp_fault = True
    gdn_cls.forward_extend = forward_extend


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
