"""The simulated engine's HTTP API matches SGLang's routes and shapes beyond the basics.

One speculative server with an API key and metrics serves most checks; a second, slower-starting one shows
``/health`` going 503 -> 200 across the warmup.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from mtp_remote.remote.logs import classify_log
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS, READY

KEY = "sk-sim"
PROMPT = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"


@pytest.fixture
def spec_server(sim):
    s = sim(FIELD_FLAGS + MTP_FLAGS + ["--api-key", KEY, "--enable-metrics", "--decode-log-interval", "10"])
    with s.client(headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield s, c


def gen(c, temperature=0.7, seed=5, **extra):
    body = {"text": PROMPT, "sampling_params": {"temperature": temperature, "max_new_tokens": 400,
                                                "sampling_seed": seed}, **extra}
    r = c.post("/generate", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_health_is_503_during_warmup_then_200(sim):
    codes: list[int] = []
    s = sim(["--model-path", "/models/Qwen3.5-4B", "--disable-cuda-graph"], wait=False,
            extra_env={"SGLANG_SIM_TIME_SCALE": "0.1"})

    def poll():
        with httpx.Client(timeout=1, trust_env=False) as c:
            while READY not in s.log and s.proc.poll() is None:
                try:
                    codes.append(c.get(f"{s.url}/health").status_code)
                except httpx.TransportError:
                    pass
                time.sleep(0.002)

    t = threading.Thread(target=poll)
    t.start()
    assert s.wait_line(READY, 30)
    t.join(5)
    with s.client() as c:
        assert c.get("/health").status_code == 200
    assert 503 in codes
    # 503 while warming up, then 200 for good (it may turn 200 a moment before the test reads the ready line)
    first_ok = codes.index(200) if 200 in codes else len(codes)
    assert set(codes[:first_ok]) == {503} and set(codes[first_ok:]) <= {200}


def test_api_key_guards_everything_but_health_and_metrics(spec_server):
    s, _ = spec_server
    with s.client() as anon:
        assert anon.post("/generate", json={"text": "hi"}).status_code == 401
        assert anon.post("/generate", json={"text": "hi"}).json() == {"error": "Unauthorized"}
        assert anon.get("/server_info").status_code == 401
        assert anon.get("/health").status_code == 200
        assert anon.get("/health_generate").status_code == 200
        assert anon.get("/metrics").status_code == 200


def test_server_info_reports_eagle_48_and_acceptance_that_flush_cache_resets(sim):
    s = sim(["--model-path", "/models/Qwen3.6-27B", "--tp", "2", "--speculative-algo", "NEXTN",
             "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8",
             "--decode-log-interval", "10"])
    assert "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1" in s.log
    with s.client() as c:
        for seed in range(3):
            gen(c, seed=seed)
        for path in ("/server_info", "/get_server_info"):
            info = c.get(path).json()
            assert info["speculative_algorithm"] == "EAGLE" and info["speculative_num_draft_tokens"] == 4
            assert info["max_running_requests"] == 48 and info["tp_size"] == 2
            assert 2.5 <= info["internal_states"][0]["avg_spec_accept_length"] <= 3.8
        assert c.post("/flush_cache").status_code == 200
        assert "avg_spec_accept_length" not in c.get("/server_info").json()["internal_states"][0]


def test_model_info_models_and_metrics(spec_server):
    _, c = spec_server
    for path in ("/model_info", "/get_model_info"):
        info = c.get(path).json()
        assert info["model_path"] == "/models/Qwen3.6-27B" and info["is_generation"] is True
    models = c.get("/v1/models").json()
    assert models["data"][0]["id"] == "/models/Qwen3.6-27B" and models["data"][0]["max_model_len"] == 32768
    for seed in range(3):
        gen(c, seed=seed)
    text = c.get("/metrics").text
    values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("sglang:")}
    assert values["sglang:generation_tokens_total"] > 0 and values["sglang:gen_throughput"] > 0
    assert 2.5 <= values["sglang:spec_accept_length"] <= 3.8


def test_unknown_routes_and_methods_answer_fastapis_json_errors_and_are_logged(spec_server):
    s, c = spec_server
    r = c.get("/no_such_route")
    assert (r.status_code, r.json()) == (404, {"detail": "Not Found"})
    r = c.get("/generate")
    assert (r.status_code, r.json()) == (405, {"detail": "Method Not Allowed"})
    assert set(r.headers["allow"].split(", ")) == {"POST", "PUT"}  # (Starlette lists a set: either order)
    assert s.wait_line('"GET /no_such_route HTTP/1.1" 404 Not Found', 5)
    assert s.wait_line('"GET /generate HTTP/1.1" 405 Method Not Allowed', 5)


def test_same_seed_same_output_and_generate_meta_info_shape(spec_server):
    _, c = spec_server
    a, b, other = gen(c, seed=11), gen(c, seed=11), gen(c, seed=12)
    assert a["text"] == b["text"] and a["output_ids"] == b["output_ids"]
    assert a["text"] != other["text"]
    meta = a["meta_info"]
    assert {"id", "finish_reason", "prompt_tokens", "completion_tokens", "e2e_latency", "spec_verify_ct",
            "spec_accept_length", "spec_accept_rate", "spec_accept_histogram"} <= set(meta)
    assert sum(meta["spec_accept_histogram"]) == meta["spec_verify_ct"]
    assert 0 < meta["spec_accept_rate"] <= 1


def test_streaming_generate_and_chat_end_with_the_same_text_as_non_streaming(spec_server):
    _, c = spec_server
    full = gen(c, seed=3)
    events = [ln[6:] for ln in c.post("/generate", json={
        "text": PROMPT, "stream": True,
        "sampling_params": {"temperature": 0.7, "max_new_tokens": 400, "sampling_seed": 3}}).text.splitlines()
        if ln.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) > 3
    assert json.loads(events[-2])["text"] == full["text"]
    msg = {"messages": [{"role": "user", "content": "What is 2+2?"}], "temperature": 0.7, "seed": 9,
           "max_tokens": 600}
    whole = c.post("/v1/chat/completions", json=msg).json()["choices"][0]["message"]
    chunks = [json.loads(ln[6:]) for ln in c.post("/v1/chat/completions", json={**msg, "stream": True}).text
              .splitlines() if ln.startswith("data: {")]
    reasoning = "".join(ch["choices"][0]["delta"].get("reasoning_content") or "" for ch in chunks)
    content = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks)
    assert reasoning == whole["reasoning_content"] and content == whole["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(("faults", "match"), [("", True), ("state_leak", False)])
def test_decode_logprobs_match_prefill_scoring_only_on_a_healthy_server(sim, faults, match):
    s = sim(FIELD_FLAGS + MTP_FLAGS, faults=faults)
    with s.client() as c:
        out = gen(c, seed=21, return_logprob=True)
        prompt_ids = c.post("/generate", json={"text": PROMPT, "sampling_params": {"max_new_tokens": 0}}).json()
        n_prompt = out["meta_info"]["prompt_tokens"]
        assert prompt_ids["meta_info"]["prompt_tokens"] == n_prompt
        ids = [t for _, t, _ in gen(c, seed=21, return_logprob=True, logprob_start_len=0)
               ["meta_info"]["input_token_logprobs"]]
        scored = c.post("/generate", json={"input_ids": ids + out["output_ids"], "return_logprob": True,
                                           "logprob_start_len": n_prompt,
                                           "sampling_params": {"max_new_tokens": 0}}).json()
    decode_lp = [lp for lp, _, _ in out["meta_info"]["output_token_logprobs"]]
    prefill_lp = [lp for lp, _, _ in scored["meta_info"]["input_token_logprobs"]]
    assert len(decode_lp) == len(prefill_lp)
    assert all(abs(a - b) < 1e-6 for a, b in zip(decode_lp, prefill_lp)) is match


def test_decode_batch_lines_carry_acceptance_as_sglang_prints_it(spec_server):
    s, c = spec_server
    for seed in range(4):
        gen(c, seed=seed)
    decode = classify_log(s.log).decode
    spec_lines = [d for d in decode if d.accept_len is not None]
    assert spec_lines and all(1.0 <= d.accept_len <= 4.0 for d in spec_lines)
    assert all(abs(d.accept_rate - d.accept_len / 4) < 0.011 for d in spec_lines)


def test_chat_with_tools_answers_with_a_tool_call_streamed_or_not_and_refuses_past_the_context(spec_server):
    _, c = spec_server
    tools = [{"type": "function", "function": {"name": "reply", "parameters": {"type": "object"}}}]
    msg = {"messages": [{"role": "system", "content": "Agent."}, {"role": "user", "content": "What is 2+2?"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "4"}],
           "tools": tools, "temperature": 0.0, "max_tokens": 600}
    r = c.post("/v1/chat/completions", json=msg).json()["choices"][0]
    (call,) = r["message"]["tool_calls"]
    assert r["finish_reason"] == "tool_calls" and r["message"]["content"] is None
    assert call["function"]["name"] == "reply" and json.loads(call["function"]["arguments"])["answer"]
    chunks = [json.loads(ln[6:]) for ln in c.post("/v1/chat/completions", json={**msg, "stream": True}).text
              .splitlines() if ln.startswith("data: {")]
    args = "".join(tc["function"].get("arguments") or "" for ch in chunks for tc in
                   (ch["choices"][0]["delta"].get("tool_calls") or []) if ch["choices"])
    assert args == call["function"]["arguments"] and chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    no_think = c.post("/v1/chat/completions", json={**msg, "tool_choice": "none",
                                                    "chat_template_kwargs": {"enable_thinking": False}}).json()
    assert no_think["choices"][0]["message"]["reasoning_content"] is None  # the template closed the think block
    assert no_think["choices"][0]["message"]["content"]
    long = c.post("/v1/chat/completions", json={**msg, "max_tokens": 32760})
    assert long.status_code == 400 and "maximum context length of 32768 tokens" in long.json()["message"]
