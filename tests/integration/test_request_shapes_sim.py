"""A playbook whose prompts are an agentic conversation (system, user, assistant tool call, tool result) with tools
and template kwargs, a long prompt from a file and a replayed production request runs on the sim (local transport,
the sim as a real process): the exact bodies are stored with the samples, the tool calls' arguments reach the loop
metrics, the long prompt's tokens are checked against the server's context length, and the leak is still found."""

from __future__ import annotations

import json

import pytest
import yaml

from mtp_remote.errors import ConfigError
from mtp_remote.experiment import diagnose as api
from tests.integration.test_scenarios import write_config
from tests.unit.config.test_request_shapes import AGENT, TOOLS

pytestmark = pytest.mark.sim


def test_a_multi_turn_tools_playbook_runs_on_the_sim(tmp_path):
    (tmp_path / "long.txt").write_text("Read this report and say what it is about. " + "The pump ran. " * 300)
    (tmp_path / "prod.jsonl").write_text(json.dumps({
        "model": "qwen3.6", "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "tools": TOOLS, "tool_choice": "auto", "temperature": 0.6, "max_tokens": 30000}) + "\n")
    inv, pb_path = write_config(tmp_path, "state_leak", api="chat", samples=3, temperatures=[0.0, 0.7],
                                max_tokens=768, prompts=[
                                    {"id": "agent", "messages": AGENT, "tools": TOOLS,
                                     "chat_template_kwargs": {"enable_thinking": True}},
                                    {"id": "long", "file": "long.txt"},
                                    {"id": "two", "text": "What is 2+2?"}],
                                replay=[{"path": "prod.jsonl"}])
    res = api.diagnose(inventory=inv, playbook=pb_path, runs_dir=tmp_path / "runs")
    rows = [json.loads(x) for x in (res.run_dir / "samples.jsonl").read_text().splitlines()]
    assert {r["prompt_id"] for r in rows} == {"agent", "long", "two", "prod-1"}
    assert not [r["error"] for r in rows if r["error"]]

    agent = [r for r in rows if r["prompt_id"] == "agent"]
    body = agent[0]["request"]["body"]
    assert body["messages"] == AGENT and body["tools"] == TOOLS
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    replayed = next(r for r in rows if r["prompt_id"] == "prod-1")["request"]["body"]
    assert replayed["tool_choice"] == "auto" and replayed["max_tokens"] == 768  # the grid's, not the recorded 30000
    # the answer went into a tool call: its arguments are in the text the loop metrics read
    calls = [r for r in agent if r["tool_calls"]]
    assert calls, [r["finish_reason"] for r in agent]
    assert all(f"<tool_call>\nread_file\n{c['tool_calls'][0]['arguments']}" in c["text"] for c in calls)
    assert json.loads(calls[0]["tool_calls"][0]["arguments"])["answer"]

    profiles = {p["profile"]: p for p in res.summary["profiles"]}
    ctx = profiles["baseline"]["context"]
    assert ctx["context_length"] == 32768 and ctx["max_tokens"] == 768
    assert set(ctx["prompt_tokens"]) == {"long", "prod-1"} and ctx["prompt_tokens"]["long"] > 900
    (v,) = res.summary["verdicts"]
    assert v["kind"] == "spec-corrupts-output", v["evidence"]


@pytest.mark.parametrize("context,needle", [
    (2048, "+ max_tokens 512 = "),  # the prompt fits, its completion would not: SGLang would refuse each request
    (1024, "the server refused it: HTTP 400"),  # the prompt alone is past it
])
def test_a_prompt_past_the_context_length_is_refused_before_sampling(tmp_path, context, needle):
    (tmp_path / "long.txt").write_text("The pump ran. " * 400)
    inv, pb_path = write_config(tmp_path, None, api="chat", samples=1, temperatures=[0.0], max_tokens=512,
                                prompts=[{"id": "long", "file": "long.txt"}])
    pb = yaml.safe_load(open(pb_path))
    pb["base_flags"] = pb["base_flags"].replace("--context-length 32768", f"--context-length {context}")
    open(pb_path, "w").write(yaml.safe_dump(pb))
    with pytest.raises(ConfigError) as e:
        api.diagnose(inventory=inv, playbook=pb_path, runs_dir=tmp_path / "runs")
    msg = str(e.value)
    assert "profile baseline: prompts do not fit" in msg and "long (long.txt)" in msg and needle in msg, msg
    assert f"context length {context}" in msg or f"context length ({context} tokens)" in msg
