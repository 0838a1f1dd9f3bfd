"""Both real hosts against a reference: greedy output of every profile of ``real-cpu`` (dense Qwen3, STANDALONE) and
``real-hybrid`` (hybrid Qwen3-Next, NEXTN), as shipped, equals transformers' own implementation on the same
weights, token for token (fp32, three prompts, 12 tokens, no EOS stop).

Why: Triton 3.9's interpreter (how the real engine runs its Triton kernels on this CPU) computes garbage on bf16
data. Measured with bf16 and the triton attention backend: the dense model's first greedy token already differs
from transformers' (which says "\\n" for every token; SGLang bf16 said tokens 1878, 3987, ...); the hybrid model
in bf16 was wrong from token 1. A greedy divergence figure from a real host means something only once its arms
agree with a reference. ``make test-real`` runs it (four launches, a few minutes).
"""

from __future__ import annotations

import os

import pytest

from mtp_remote.config.playbook import load_playbook
from tests.real.conftest import READY_S
from tests.support.real_hosts import CHAT, generate_ids, hf_reference, local_host, serving

pytestmark = [pytest.mark.real, pytest.mark.timeout(3600),
              pytest.mark.skipif(os.environ.get("MTP_REMOTE_REAL_FULL") != "1", reason="make test-real runs it")]

PROMPTS = [CHAT.format(prompt=p) for p in ("What is 2+2?", "What is the capital of France?",
                                            "List the prime numbers below 20.")]
TOKENS = 12


@pytest.mark.parametrize("name", ["real-cpu", "real-hybrid"])
def test_every_profile_of_the_real_host_gives_transformers_greedy_output(real_engine, tmp_path, name):
    host = dict(local_host(real_engine, name, tmp_path / "wd"), name=name)
    ref = hf_reference(real_engine, host["model_path"], PROMPTS, TOKENS)
    pb = load_playbook(host["playbook"])  # the shipped one, with the test budgets
    got = {}
    for profile in pb.profile_order():
        with serving(host, pb, profile, ready_s=READY_S, run_id=f"ref-{profile}") as (url, _):
            got[profile] = [generate_ids(url, ids, TOKENS)["output_ids"] for ids in ref["prompt_ids"]]
    for profile, outputs in got.items():
        assert outputs == ref["output_ids"], f"{name} {profile}: {outputs} != transformers {ref['output_ids']}"
    print(f"{name}: {sorted(got)} = transformers on {len(PROMPTS)} prompts x {TOKENS} tokens")
