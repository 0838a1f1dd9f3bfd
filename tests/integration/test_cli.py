"""The command lines as a user meets them: `mtp-remote` (click) and `fab -l`, errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.conftest import ROOT

FIELDS = {"file", "loop", "loop_unit_tokens", "loop_repeats", "loop_start_char", "seq_rep_4",
          "compression_ratio", "think_closed"}


def test_analyze_json_classifies_every_corpus_text_as_labelled(corpus):
    labels = json.loads((corpus / "texts" / "labels.json").read_text())
    files = [str(corpus / "texts" / f"{name}.txt") for name in sorted(labels)]
    r = CliRunner().invoke(main, ["analyze", "--json", *files])
    assert r.exit_code == 1, r.output  # some texts loop
    rows = [json.loads(ln) for ln in r.output.splitlines()]
    assert len(rows) == len(labels)
    for row in rows:
        name = row["file"].rsplit("/", 1)[1][:-4]
        assert FIELDS <= set(row)
        assert (row["loop"], row["think_closed"]) == (labels[name]["loop"], labels[name]["think_closed"]), name
        if not row["loop"]:
            assert row["loop_start_char"] is None and row["loop_unit_tokens"] is None


def test_analyze_reads_a_chat_response_body_from_standard_input():
    body = {"choices": [{"message": {"reasoning_content": "The user's question is 2+2. " * 40, "content": None},
                         "finish_reason": "length"}]}
    r = CliRunner().invoke(main, ["analyze", "--json", "-"], input=json.dumps(body))
    (row,) = [json.loads(ln) for ln in r.output.splitlines()]
    assert row["file"] == "<stdin>" and row["loop"] is True and row["think_closed"] is False
    # The | user | ' | s | question | is | 2 | + | 2 | . = 10 tokens by the corpus rule
    assert row["loop_unit_tokens"] == 10 and row["loop_repeats"] >= 39


def test_analyze_reads_samples_jsonl_one_row_per_sample(tmp_path):
    f = tmp_path / "samples.jsonl"
    f.write_text("\n".join(json.dumps({"profile": "mtp", "temperature": 0.7, "prompt_id": "p", "sample_index": i,
                                       "text": "Fine. All good, nothing repeats here at all."}) for i in range(3)))
    r = CliRunner().invoke(main, ["analyze", "--json", str(f)])
    assert r.exit_code == 0
    assert [json.loads(ln)["file"].split(":", 1)[1] for ln in r.output.splitlines()] == [
        "mtp/T=0.7/p/0", "mtp/T=0.7/p/1", "mtp/T=0.7/p/2"]


def test_a_missing_file_is_one_clear_line_and_exit_2():
    r = CliRunner().invoke(main, ["analyze", "/nonexistent/out.txt"])
    assert r.exit_code == 2 and "/nonexistent/out.txt: no such file" in r.output
    assert "Traceback" not in r.output


def test_a_bad_inventory_names_file_and_field_without_a_traceback(tmp_path):
    inv = tmp_path / "inventory.yaml"
    inv.write_text("default_host: a\nhosts:\n  a:\n    transport: local\n    engine: vllm\n")
    r = CliRunner().invoke(main, ["diagnose", "-i", str(inv), "-p", str(ROOT / "playbooks" / "diagnose-mtp.yaml")])
    assert r.exit_code == 2
    assert str(inv) in r.output and "hosts.a.engine" in r.output and "'sglang'" in r.output and "'sim'" in r.output
    assert "Traceback" not in r.output


def test_help_lists_every_command():
    r = CliRunner().invoke(main, ["--help"])
    for cmd in ("diagnose", "analyze", "classify-log", "preflight", "status", "stop", "launch", "logs", "smoke",
                "nightly", "history", "hosts", "report", "compare"):
        assert f"  {cmd} " in r.output, cmd
    assert "130 interrupted" in r.output and "_MTP_REMOTE_COMPLETE=bash_source" in r.output


def test_fab_launch_help_shows_the_task_options_and_launch_without_profile_names_the_choices():
    r = subprocess.run([sys.executable, "-m", "fabric", "launch", "--help"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 0 and "--profile=STRING" in r.stdout and "unknown profile" not in r.stdout + r.stderr
    # from a subdirectory: fab finds fabfile.py upward, the tasks find inventory.yaml and playbooks/ upward
    env = {k: v for k, v in os.environ.items() if k != "MTP_REMOTE_INVENTORY"}
    r = subprocess.run([sys.executable, "-m", "fabric", "launch"], cwd=ROOT / "docs" / "runbooks",
                       capture_output=True, text=True, timeout=60, env=env, check=False)
    assert r.returncode == 2 and "--profile: required; choose one of: baseline, mtp" in r.stderr


def test_shell_completion_script_is_generated():
    script = os.path.join(os.path.dirname(sys.executable), "mtp-remote")  # the installed entry point
    r = subprocess.run([script], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "_MTP_REMOTE_COMPLETE": "bash_source"}, check=False)
    assert "complete" in r.stdout and "_MTP_REMOTE_COMPLETE=bash_complete" in r.stdout


def test_hosts_lists_the_inventory_found_from_a_subdirectory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mtp_remote.cli", "hosts", "--json"], cwd=ROOT / "docs",
                       capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "MTP_REMOTE_INVENTORY"}, check=False)
    data = json.loads(r.stdout)
    assert data["inventory"] == str(ROOT / "inventory.yaml") and data["default_host"] == "sim-local"
    assert {h["name"]: h["faults"] for h in data["hosts"]}["sim-local"] == "state_leak"


def test_fab_lists_the_tasks_with_one_line_docs():
    out = subprocess.run([sys.executable, "-m", "fabric", "-l"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=False).stdout
    for task in ("diagnose", "preflight", "status", "stop", "launch", "logs", "smoke"):
        assert f"  {task} " in out, out


def test_analyze_of_many_samples_prints_a_summary_and_rows_only_when_asked(tmp_path):
    f = tmp_path / "samples.jsonl"
    texts = ["Fine. All good, nothing repeats here at all."] * 24 + ["The user's question is 2+2. " * 40] * 6
    f.write_text("\n".join(json.dumps({"profile": "mtp", "temperature": 0.7, "prompt_id": "p", "sample_index": i,
                                       "text": t}) for i, t in enumerate(texts)))
    r = CliRunner().invoke(main, ["analyze", str(f)])
    assert r.exit_code == 1
    assert "30 texts: 6 loop (20.0%)" in r.output
    assert r.output.count("loops: ") == 6 and "mtp/T=0.7/p/24" in r.output and "mtp/T=0.7/p/0 " not in r.output
    rows = CliRunner().invoke(main, ["analyze", "--rows", str(f)])
    assert "mtp/T=0.7/p/0 " in rows.output and "texts:" not in rows.output
