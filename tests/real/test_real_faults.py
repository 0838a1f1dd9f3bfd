"""The injected real faults (``real_sglang_shims/mtp_real_faults.py``, installed in the real venv) on hand-made
inputs, through the SGLang functions they wrap: each does its harm only when ``MTP_REMOTE_REAL_FAULTS`` names it.

Chain of 4 draft positions (topk 1). ``mamba_state_leak``: one request whose verify accepted 1 step
(``accepted_steps = 1``); the committed SSM/conv state must be the intermediate state of step 1, and with the
fault it is the one of step 3 (the last draft token). ``accept_all_drafts``: the target agrees with draft 1 only, so
greedy verification accepts 1 draft token; with the fault it accepts all 3.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

pytestmark = [pytest.mark.real, pytest.mark.timeout(1800)]  # the one run imports SGLang + torch: ~10 s quiet, minutes loaded

SCRIPT = r'''
import json, os, types, torch
import sglang.srt.layers.attention.hybrid_linear_attn_backend as hb
import sglang.srt.speculative.eagle_info as ei
from mtp_cpu_tree_ops import build_tree_kernel_efficient


def chain():
    # update_mamba_state_after_mtp_verify on a stand-in backend: 1 layer, pool of 3 slots, request in slot 2
    steps = 4
    inter_ssm = torch.arange(steps, dtype=torch.float32).view(1, 1, steps, 1, 1, 1).expand(1, 1, steps, 2, 2, 2).clone()
    inter_conv = (10 + torch.arange(steps, dtype=torch.float32)).view(1, 1, steps, 1, 1).expand(1, 1, steps, 3, 3).clone()
    ssm, conv = torch.full((1, 3, 2, 2, 2), -1.0), torch.full((1, 3, 3, 3), -1.0)
    caches = types.SimpleNamespace(conv=[conv], temporal=ssm, intermediate_ssm=inter_ssm, intermediate_conv_window=[inter_conv])
    pool = types.SimpleNamespace(get_speculative_mamba2_params_all_layers=lambda: caches)
    meta = types.SimpleNamespace(mamba_cache_indices=torch.tensor([2], dtype=torch.int32))
    backend = types.SimpleNamespace(linear_attn_backend=types.SimpleNamespace(forward_metadata=meta, req_to_token_pool=pool))
    hb.HybridLinearAttnBackend.update_mamba_state_after_mtp_verify(backend, torch.tensor([1]), None, None, None)

    # greedy verification of the chain root -> d1 -> d2 -> d3
    n, seq_len = 4, 5
    r_index, r_next, r_sib = torch.full((3, 1, n), -1, dtype=torch.long)
    build_tree_kernel_efficient(torch.tensor([[-1, 0, 1]]), torch.tensor([[0, 1, 2]]), torch.tensor([seq_len]),
                                torch.full((seq_len * n + n * n,), True), torch.empty(n, dtype=torch.long),
                                r_index, r_next, r_sib, 1, 3, n, 0)
    predicts, accept, num = torch.full((n,), -1, dtype=torch.long), torch.full((1, n), -1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    ei.verify_tree_greedy_func(predicts, accept, num, torch.tensor([[7, 11, 12, 13]]), r_index, r_next, r_sib,
                               torch.tensor([[11, 50, 60, 5]]), topk=1)
    return {"ssm": ssm[0, 2, 0, 0, 0].item(), "conv": conv[0, 2, 0, 0].item(),
            "untouched": ssm[0, :2].eq(-1).all().item(), "accept": accept.tolist(), "num": num.tolist(),
            "predicts": predicts.tolist()}
'''


@pytest.fixture(scope="module")
def runs(real_engine) -> dict:
    """Every case of this file from one process (SGLang + torch imported once, ~10 s of CPU each time: the
    wrappers read the variable at every call): ``{"chain": {fault or "none": SCRIPT's chain()}, "state":
    STATE_SCRIPT's {fault or "none": [ssm, conv]}}``."""
    env = {k: v for k, v in os.environ.items() if k != "MTP_REMOTE_REAL_FAULTS"}
    env.update(TRITON_INTERPRET="1", SGLANG_USE_CPU_ENGINE="1")
    script = SCRIPT + STATE_SCRIPT + '''
out = {"chain": {}}
for fault in ["", "mamba_state_leak", "accept_all_drafts"]:
    os.environ["MTP_REMOTE_REAL_FAULTS"] = fault
    out["chain"][fault or "none"] = chain()
out["state"] = state()
print(json.dumps(out))
'''
    proc = subprocess.run([real_engine.python, "-c", script], capture_output=True, text=True, timeout=900, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_without_the_variable_sglang_commits_the_accepted_step_and_accepts_only_what_the_target_agrees_with(runs):
    got = runs["chain"]["none"]
    assert (got["ssm"], got["conv"], got["untouched"]) == (1.0, 11.0, True)  # the state after accepted step 1
    assert got["accept"] == [[0, 1, -1, -1]] and got["num"] == [1] and got["predicts"] == [11, 50, -1, -1]


def test_each_fault_does_its_harm_only_when_named(runs):
    leak = runs["chain"]["mamba_state_leak"]
    assert (leak["ssm"], leak["conv"]) == (3.0, 13.0)  # the state after the last draft token, rejected ones in it
    assert leak["num"] == [1]  # verification itself untouched
    over = runs["chain"]["accept_all_drafts"]
    assert (over["ssm"], over["conv"]) == (1.0, 11.0)
    assert over["accept"] == [[0, 1, 2, 3]] and over["num"] == [3]  # every draft token accepted
    assert over["predicts"] == [11, 12, 13, 5]  # the drafts, then the target's own token as the bonus


#: The state faults through the real commit (``update_mamba_state_after_mtp_verify``), one SGLang import for all:
#: the wrapper reads the variable at every call. Same stand-in backend as SCRIPT (request in slot 2, 1 step
#: accepted); the in-place conv window the verify kernel left is -1, the prompt's recorded state (``rewind``) 7/17.
STATE_SCRIPT = r'''
import sglang.srt.layers.attention.hybrid_linear_attn_backend as hb
import mtp_real_faults


def state():
    steps, out = 4, {}
    for fault in ["", "stale_state", "commit_late", "conv_leak", "rewind"]:
        os.environ["MTP_REMOTE_REAL_FAULTS"] = fault
        inter_ssm = torch.arange(steps, dtype=torch.float32).view(1, 1, steps, 1, 1, 1).expand(1, 1, steps, 2, 2, 2).clone()
        inter_conv = (10 + torch.arange(steps, dtype=torch.float32)).view(1, 1, steps, 1, 1).expand(1, 1, steps, 3, 3).clone()
        ssm, conv = torch.full((1, 3, 2, 2, 2), -1.0), torch.full((1, 3, 3, 3), -1.0)
        caches = types.SimpleNamespace(conv=[conv], temporal=ssm, intermediate_ssm=inter_ssm, intermediate_conv_window=[inter_conv])
        pool = types.SimpleNamespace(get_speculative_mamba2_params_all_layers=lambda: caches,
                                     mamba2_layer_cache=lambda i: types.SimpleNamespace(temporal=ssm[i], conv=[conv[i]]))
        meta = types.SimpleNamespace(mamba_cache_indices=torch.tensor([2], dtype=torch.int32))
        backend = types.SimpleNamespace(linear_attn_backend=types.SimpleNamespace(forward_metadata=meta, req_to_token_pool=pool))
        mtp_real_faults.PREFILL_STATE.clear()
        mtp_real_faults.PREFILL_STATE[2] = {0: (torch.full((2, 2, 2), 7.0), torch.full((3, 3), 17.0))}
        hb.HybridLinearAttnBackend.update_mamba_state_after_mtp_verify(backend, torch.tensor([1]), None, None, None)
        out[fault or "none"] = [ssm[0, 2, 0, 0, 0].item(), conv[0, 2, 0, 0].item()]
    assert hb.GDNAttnBackend.forward_extend._mtp_fault  # the prefill record of rewind is installed
    return out
'''


def test_each_state_fault_commits_the_wrong_recurrent_state_through_sglangs_own_commit(runs):
    got = runs["state"]
    assert got == {
        "none": [1.0, 11.0],         # SGLang: the state after accepted step 1
        "stale_state": [-1.0, -1.0],  # nothing committed: the pre-verify state (and the in-place conv window)
        "commit_late": [2.0, 12.0],   # one rejected draft token in the state
        "conv_leak": [1.0, -1.0],     # SSM right, the conv window the verify left in place
        "rewind": [7.0, 17.0],        # the prompt's state put back after the commit
    }
