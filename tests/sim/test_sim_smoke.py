"""The simulated engine starts like SGLang, answers in SGLang's shapes, and stops on SIGTERM (tests/sim/test_sim_real_behaviour.py)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS, READY

MILESTONES = ["server_args=ServerArgs(", "Load weight begin.", "Load weight end.", "KV Cache is allocated.",
              "Capture cuda graph end.", "max_total_num_tokens=", "Uvicorn running on http://127.0.0.1:",
              '"POST /v1/chat/completions HTTP/1.1" 200 OK', "The server is fired up and ready to roll!"]


def test_startup_prints_sglang_milestones_in_order_and_health_turns_200(sim):
    s = sim(FIELD_FLAGS + MTP_FLAGS)
    log = s.log
    positions = [log.index(m) for m in MILESTONES]
    assert positions == sorted(positions)
    assert "speculative_algorithm='EAGLE'" in log
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP1\] Load weight begin\.", log, re.MULTILINE)
    with s.client() as c:
        assert c.get("/health").status_code == 200


def test_generate_on_a_speculative_server_reports_acceptance(sim):
    s = sim(FIELD_FLAGS + MTP_FLAGS)
    with s.client() as c:
        out = c.post("/generate", json={"text": "What is 2+2?",
                                        "sampling_params": {"temperature": 0, "max_new_tokens": 512}}).json()
    meta = out["meta_info"]
    assert out["text"].startswith("<think>\nThe user's question is 2+2.")
    assert meta["finish_reason"]["type"] == "stop"
    assert meta["completion_tokens"] == len(out["output_ids"])
    assert 2.0 < meta["spec_accept_length"] <= 4.0
    assert meta["spec_accept_length"] == meta["completion_tokens"] / meta["spec_verify_ct"]


def test_chat_splits_reasoning_and_unterminated_thinking_is_length(sim):
    s = sim(FIELD_FLAGS)
    with s.client() as c:
        full = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "What is 2+2?"}],
                                                    "temperature": 0, "max_tokens": 1024}).json()
        cut = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "What is 2+2?"}],
                                                   "temperature": 0, "max_tokens": 20}).json()
    msg = full["choices"][0]["message"]
    assert msg["reasoning_content"].startswith("The user's question is 2+2.")
    assert "4" in msg["content"] and "<think>" not in msg["content"]
    assert full["choices"][0]["finish_reason"] == "stop"
    assert 0 < full["usage"]["reasoning_tokens"] < full["usage"]["completion_tokens"]
    assert cut["choices"][0]["message"]["content"] is None
    assert cut["choices"][0]["message"]["reasoning_content"]
    assert cut["choices"][0]["finish_reason"] == "length"


def _cell(s, n: int = 10) -> tuple[int, float]:
    from mtp_remote.analysis.degeneracy import analyze_text

    prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"
    with s.client() as c:
        outs = [c.post("/generate", json={"text": prompt, "sampling_params": {
            "temperature": 0.7, "max_new_tokens": 1024, "sampling_seed": 100 + i}}).json() for i in range(n)]
    loops = sum(analyze_text(o["text"]).loop is not None for o in outs)
    accept = sum(o["meta_info"]["completion_tokens"] for o in outs) / sum(o["meta_info"]["spec_verify_ct"]
                                                                          for o in outs)
    return loops, accept


def test_state_leak_server_loops_at_t07_with_higher_acceptance_than_a_healthy_one(sim):
    # four independent servers (own process, port and state dir), started together; each gets the same ten
    # requests one after the other, as before: only the four servers overlap, never two requests on one server
    servers = [sim(FIELD_FLAGS + MTP_FLAGS, wait=False),
               sim(FIELD_FLAGS + MTP_FLAGS, faults="state_leak", wait=False),
               sim(FIELD_FLAGS + MTP_FLAGS + ["--disable-overlap-schedule"], faults="state_leak", wait=False),
               sim(FIELD_FLAGS + MTP_FLAGS + ["--disable-radix-cache"], faults="state_leak", wait=False)]
    for s in servers:
        assert s.wait_line(READY, 30), f"sim did not get ready:\n{s.log[-3000:]}"
    with ThreadPoolExecutor(len(servers)) as pool:
        cells = list(pool.map(_cell, servers))
    (healthy_loops, healthy_accept), (leak_loops, leak_accept), (mitigated_loops, _), (radix_off_loops, _) = cells
    assert healthy_loops == 0 and mitigated_loops == 0
    assert leak_loops >= 6 and radix_off_loops >= 6  # no cure on 0.5.9: SGLang turns radix off itself
    assert leak_accept > healthy_accept + 0.3
