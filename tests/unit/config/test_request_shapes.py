"""Request shapes in playbooks: multi-turn messages with tools, chat template kwargs, long prompts from files and
prompts replayed from a JSONL file of recorded chat requests; each checked at load with an error that names the
file, the field (or line) and what is allowed."""

from __future__ import annotations

import json

import pytest
import yaml

from mtp_remote.responses import chat_request
from mtp_remote.config.playbook import Playbook, load_playbook
from mtp_remote.errors import ConfigError
from mtp_remote.experiment.plan import plan_requests

AGENT = [{"role": "system", "content": "You are a coding agent."},
         {"role": "user", "content": "List the files."},
         {"role": "assistant", "content": None,
          "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"},
         {"role": "user", "content": "Which one holds main()?"}]
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def _write(tmp_path, **over) -> str:
    pb = {"name": "shapes", "api": "chat", "profiles": {"baseline": {}},
          "prompts": [{"id": "plain", "text": "What is 2+2?"}]}
    pb.update(over)
    path = tmp_path / "pb.yaml"
    path.write_text(yaml.safe_dump(pb))
    return str(path)


def test_a_multi_turn_tools_prompt_is_sent_as_written_with_the_grid_sampling(tmp_path):
    pb = load_playbook(_write(tmp_path, prompts=[{
        "id": "agent", "messages": AGENT, "tools": TOOLS, "chat_template_kwargs": {"enable_thinking": True},
        "separate_reasoning": False, "extra_body": {"tool_choice": "auto", "top_k": 20}}], temperatures=[0.6]))
    (p,) = pb.prompts
    assert p.user_text == "Which one holds main()?" and p.is_shaped
    (req, *_) = plan_requests(pb, "baseline")
    body = chat_request(req.prompt, temperature=0.6, max_tokens=64, seed=req.seed, fields=req.chat)["body"]
    assert body["messages"] == AGENT and body["tools"] == TOOLS
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["separate_reasoning"] is False
    assert body["tool_choice"] == "auto" and body["top_k"] == 20
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.6, 64, 1234)


def test_a_plain_prompt_sends_one_user_message_and_dumps_as_before(tmp_path):
    pb = load_playbook(_write(tmp_path))
    (req,) = plan_requests(pb, "baseline")[:1]
    assert req.chat is None
    assert chat_request(req.prompt, temperature=0.0, max_tokens=8)["body"]["messages"] == [
        {"role": "user", "content": "What is 2+2?"}]
    assert pb.model_dump()["prompts"] == [{"id": "plain", "text": "What is 2+2?", "expected": None}]


def test_a_prompt_file_is_read_relative_to_the_playbook(tmp_path):
    (tmp_path / "long.txt").write_text("Summarise this. " * 500)
    pb = load_playbook(_write(tmp_path, prompts=[{"id": "long", "file": "long.txt"}]))
    assert pb.prompts[0].text == "Summarise this. " * 500 and pb.prompts[0].file == "long.txt"
    again = Playbook.model_validate(pb.model_dump())  # a dump re-validates without reading the file again
    assert again.prompts[0].text == pb.prompts[0].text


def test_recorded_requests_are_replayed_with_their_fields_and_the_grid_sampling(tmp_path):
    rows = [{"model": "qwen", "messages": AGENT, "tools": TOOLS, "temperature": 0.6, "max_tokens": 32768,
             "stream": True, "tool_choice": "auto", "chat_template_kwargs": {"enable_thinking": True}},
            {"request": {"endpoint": "/v1/chat/completions",
                         "body": {"messages": [{"role": "user", "content": "Hi"}], "temperature": 0.0}}}]
    (tmp_path / "prod.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    pb = load_playbook(_write(tmp_path, prompts=[], replay=[{"path": "prod.jsonl"}]))
    a, b = pb.prompts
    assert (a.id, b.id) == ("prod-1", "prod-2")
    assert a.messages == AGENT and a.tools == TOOLS and a.extra_body == {"tool_choice": "auto"}
    assert a.source == "prod.jsonl#1 (recorded temperature=0.6, max_tokens=32768)"
    assert b.user_text == "Hi" and b.source == "prod.jsonl#2 (recorded temperature=0.0)"
    assert len(Playbook.model_validate(pb.model_dump()).prompts) == 2  # replayed once, not again from the dump
    one = load_playbook(_write(tmp_path, prompts=[], replay=[{"path": "prod.jsonl", "id_prefix": "p", "limit": 1}]))
    assert [p.id for p in one.prompts] == ["p-1"]


@pytest.mark.parametrize("over,needle", [
    ({"prompts": [{"id": "a", "messages": [{"role": "robot", "content": "x"}]}]},
     "messages[0].role 'robot' is not one of system, developer, user, assistant, tool"),
    ({"prompts": [{"id": "a", "messages": [{"role": "tool", "content": "x"}]}]}, "needs tool_call_id"),
    ({"prompts": [{"id": "a", "text": "x", "extra_body": {"temperature": 1}}]}, "must not set ['temperature']"),
    ({"prompts": [{"id": "a", "text": "x", "messages": [{"role": "user", "content": "y"}]}]},
     "give exactly one of text, file or messages"),
    ({"prompts": [{"id": "a", "file": "missing.txt"}]}, "missing.txt: file not found"),
    ({"api": "generate", "prompts": [{"id": "a", "text": "x", "tools": TOOLS}]}, "they need api: chat"),
    ({"prompts": []}, "give at least one prompt"),
    ({"prompts": [], "replay": [{"path": "bad.jsonl"}]}, "bad.jsonl line 2: no chat request"),
    ({"prompts": [], "replay": [{"path": "badrole.jsonl"}]}, "replay badrole.jsonl#1: messages[0].role 'robot'"),
])
def test_bad_request_shapes_are_refused_naming_the_problem(tmp_path, over, needle):
    (tmp_path / "bad.jsonl").write_text('{"messages": [{"role": "user", "content": "x"}]}\n{"prompt": "x"}\n')
    (tmp_path / "badrole.jsonl").write_text('{"messages": [{"role": "robot", "content": "x"}]}\n')
    path = _write(tmp_path, **over)
    with pytest.raises(ConfigError) as e:
        load_playbook(path)
    assert needle in str(e.value) and "pb.yaml" in str(e.value)


def test_an_attached_profile_names_a_url_or_a_host_port_and_has_no_launch_flags(tmp_path):
    pb = load_playbook(_write(tmp_path, profiles={
        "baseline": {"attach": {"url": "http://10.0.0.6:30000/"}},
        "mtp": {"attach": {"port": 30001, "api_key_env": "MTP_KEY"}}}))
    assert pb.attached["baseline"].url == "http://10.0.0.6:30000" and pb.attached["mtp"].where == "host port 30001"
    assert (pb.load.concurrency, pb.load.request_rate) == (2, 2.0)  # gentle defaults for production
    assert "attach" not in load_playbook(_write(tmp_path)).model_dump()["profiles"]["baseline"]  # dumps as before


@pytest.mark.parametrize("attach,needle", [
    ({"url": "ftp://x:1"}, "the scheme must be one of http, https"),
    ({"url": "http://u:p@x:1"}, "no credentials in the URL"),
    ({"url": "http://x:1", "port": 30001}, "give url (reached directly) or port"),
    ({}, "give url (reached directly) or port"),
    ({"port": 30001, "api_key_env": "1BAD"}, "attach.api_key_env '1BAD'"),
])
def test_bad_attach_settings_are_refused(tmp_path, attach, needle):
    with pytest.raises(ConfigError) as e:
        load_playbook(_write(tmp_path, profiles={"baseline": {}, "mtp": {"attach": attach}}))
    assert needle in str(e.value)


def test_an_attached_profile_with_launch_flags_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="an attached profile has no flags or env"):
        load_playbook(_write(tmp_path, profiles={"baseline": {}, "mtp": {
            "attach": {"port": 30001}, "flags": "--speculative-algorithm NEXTN"}}))
