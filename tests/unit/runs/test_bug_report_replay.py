"""``bug-report`` gives an SGLang maintainer what replays the bug: the exact request of the looping sample it
quotes (endpoint, prompt text after the template, sampling parameters with seed and max tokens, a ``curl``
line) with the output from its start; it takes a run whose speculative server crashed while sampling
(``crashed:<cause>``: a crash is a bug worth reporting); and it says where bisect started when ``--good``
was given."""

from __future__ import annotations

import json
import shlex

import pytest

from mtp_remote.runs.bugreport import write_bug_report
from mtp_remote.responses import generate_request
from mtp_remote.errors import ConfigError

TEMPLATE = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n"
PROMPT = "What is 2+2?"
LOOP = "The user's question is 2+2. " * 60
ARGV = ["--model-path", "/models/Qwen3.6-27B", "--host", "127.0.0.1", "--port", "31234",
        "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"]


def _summary(run_id, verdict, *, crashed=None):
    return {"schema_version": 1, "run_id": run_id, "status": "completed", "tool_version": "0.test",
            "host": {"name": "gpu-secret-7", "model_path": "/models/Qwen3.6-27B"}, "simulated": True,
            "playbook": {"name": "p", "baseline": "baseline", "api": "generate", "max_tokens": 2048, "top_p": 1.0,
                         "prompt_template": TEMPLATE, "prompts": [{"id": "two-plus-two", "text": PROMPT}]},
            "profiles": [{"profile": "baseline", "argv_masked": ARGV[:6]},
                         {"profile": "mtp", "argv_masked": ARGV, "server_info": {"version": "0.5.9"},
                          "crashed": crashed, "n_requests": 7}],
            "verdicts": [{"profile": "mtp", "kind": verdict, "evidence": "loops 9/12 vs 0/12", "comparisons": []}]}


def _sample(profile, text, *, loop, request=True, error=None, finish="length"):
    s = {"profile": profile, "temperature": 0.7, "prompt_id": "two-plus-two", "sample_index": 2, "seed": 1236,
         "text": text, "finish_reason": finish, "completion_tokens": 2048 if loop else 40, "error": error,
         "metrics": None if error else {"loop": loop, "loop_start_char": 120 if loop else None,
                                         "loop_unit_tokens": 9, "loop_repeats": 60},
         "think_opened_by_prompt": True}
    if request:
        s["request"] = generate_request(TEMPLATE.replace("{prompt}", PROMPT), temperature=0.7, max_new_tokens=2048,
                                        seed=1236, top2=False)
    return s


def _run(tmp_path, run_id, verdict, samples, **kw):
    d = tmp_path / run_id
    (d / "logs").mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(_summary(run_id, verdict, **kw)))
    (d / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return d


def test_the_report_holds_the_exact_replayable_request_of_the_looping_sample_and_its_output_from_the_start(tmp_path):
    start = "Okay, the user asks what 2+2 is. Let me think about it briefly before answering. "
    _run(tmp_path, "20261202-100000-aaaa", "spec-corrupts-output",
         [_sample("baseline", "4", loop=False, finish="stop"), _sample("mtp", start + LOOP, loop=True)])
    _, text = write_bug_report("20261202-100000-aaaa", runs_dir=tmp_path)
    assert "### Replay the request" in text and "`POST /generate`" in text
    assert "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n" in text
    assert '"sampling_seed": 1236' in text and '"max_new_tokens": 2048' in text and '"temperature": 0.7' in text
    curl = next(ln for ln in text.splitlines() if ln.startswith("curl "))
    assert curl.startswith("curl -s http://127.0.0.1:31234/generate ")
    body_line = next(ln for ln in text.splitlines() if ln.startswith("  -d "))
    body = json.loads(shlex.split(body_line)[1])  # the shell quoting gives back the exact JSON body
    assert body == {"text": TEMPLATE.replace("{prompt}", PROMPT),
                    "sampling_params": {"temperature": 0.7, "top_p": 1.0, "max_new_tokens": 2048,
                                        "sampling_seed": 1236}}
    assert "Output from its start (2048 tokens, finish_reason=length; the loop starts at char" in text
    assert start in text  # from its start, not from the loop
    assert "The same request to the server without speculation: 40 tokens, finish_reason=stop, does not loop" in text
    assert "gpu-secret-7" not in text


def test_a_sample_stored_before_requests_were_is_rebuilt_from_the_playbook_and_says_so(tmp_path):
    _run(tmp_path, "20261202-100000-bbbb", "spec-corrupts-output", [_sample("mtp", LOOP, loop=True, request=False)])
    _, text = write_bug_report("20261202-100000-bbbb", runs_dir=tmp_path)
    assert "rebuilt from the run playbook" in text and '"sampling_seed": 1236' in text
    assert "What is 2+2?<|im_end|>" in text


def test_a_run_whose_speculative_server_crashed_while_sampling_gets_a_report(tmp_path):
    crash = {"cause": "cuda_error", "hint": "a CUDA kernel failed (illegal memory access)",
             "fatal_line": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    d = _run(tmp_path, "20261202-100000-cccc", "crashed:cuda_error",
             [_sample("mtp", "fine", loop=False), _sample("mtp", "", loop=False, error="RemoteProtocolError: closed")],
             crashed=crash)
    (d / "logs" / "mtp.log").write_text("".join(f"[2026-12-02 10:00:{i:02d} TP0] Decode batch, #running-req: 8\n"
                                                for i in range(40)) + crash["fatal_line"] + "\n")
    _, text = write_bug_report("20261202-100000-cccc", runs_dir=tmp_path)
    assert "the `mtp` server crashed while serving (`crashed:cuda_error`)" in text
    assert crash["fatal_line"] in text and "Last 30 lines of its log" in text
    assert "This request was in flight when the server failed" in text and "curl -s http://127.0.0.1:31234" in text


def test_a_run_with_nothing_to_report_still_names_its_verdicts(tmp_path):
    _run(tmp_path, "20261202-100000-dddd", "healthy", [])
    with pytest.raises(ConfigError, match="crashed:<cause> or hung:<cause> verdict .verdicts: mtp: healthy"):
        write_bug_report("20261202-100000-dddd", runs_dir=tmp_path)


def test_bisect_from_a_good_line_other_than_the_baseline_is_not_called_from_the_baseline(tmp_path):
    _run(tmp_path, "20261202-100000-eeee", "spec-corrupts-output", [_sample("mtp", LOOP, loop=True)])
    b = tmp_path / "20261202-110000-ffff"
    b.mkdir()
    (b / "bisect.json").write_text(json.dumps({"kind": "bisect", "run_id": b.name, "from_run": "20261202-100000-eeee",
                                               "good_spec": "no-overlap", "tests": [{"name": "t1", "outcome": "fail"}, {"name": "t2", "outcome": "pass"}],
                                               "minimal": ["removed --disable-overlap-schedule"],
                                               "command": "python -m sglang.launch_server ..."}))
    _, text = write_bug_report("20261202-100000-eeee", runs_dir=tmp_path)
    assert "from the `no-overlap` profile (`--good no-overlap`)" in text and "from the baseline" not in text


def test_an_agentic_request_is_replayed_whole_with_its_turns_tool_calls_and_tools(tmp_path):
    from mtp_remote.responses import chat_request
    from tests.unit.config.test_request_shapes import AGENT, TOOLS

    s = _sample("mtp", LOOP, loop=True)
    s["request"] = chat_request("Which one holds main()?", temperature=0.7, max_tokens=2048, seed=1236, fields={
        "messages": AGENT, "tools": TOOLS, "chat_template_kwargs": {"enable_thinking": True}, "tool_choice": "auto"})
    _run(tmp_path, "20261202-100000-ffff", "spec-corrupts-output", [s])
    _, text = write_bug_report("20261202-100000-ffff", runs_dir=tmp_path)
    assert "assistant:  -> ls({})" in text and "tool: a.py b.py (answers c1)" in text
    assert "Tools (1, definitions in the curl body): read_file" in text
    assert '"chat_template_kwargs": {"enable_thinking": true}' in text and '"tool_choice": "auto"' in text
    body_line = next(ln for ln in text.splitlines() if ln.startswith("  -d "))
    assert json.loads(shlex.split(body_line)[1]) == s["request"]["body"]  # the exact body, tools included


def test_a_t_above_0_sample_says_replay_needs_deterministic_inference_and_loop_stop_is_explained(tmp_path):
    looper = _sample("mtp", LOOP, loop=True, finish="loop-stop")
    looper["request"]["body"]["stream"] = True  # as the runner sends it
    _run(tmp_path, "20261202-100000-dddd", "spec-corrupts-output",
         [_sample("baseline", "4", loop=False, finish="stop"), looper])
    _, text = write_bug_report("20261202-100000-dddd", runs_dir=tmp_path)
    assert "at T=0.7" in text and "`--enable-deterministic-inference`" in text
    assert "`loop-stop` is mtp-remote's finish reason, not SGLang's" in text
    assert "The `curl` below is non-streaming" in text and '"stream"' not in text
    assert "`mtp` loops where the same server without speculation does not" in text
