"""A corruption only lossless evidence catches, end to end on the sim (a real process, ``accept_all_drafts``: every
draft accepted, no loops): diagnose calls it ``spec-corrupts-output`` on greedy divergence, and ``bug-report``
says so in its title and shows the evidence: the request, both arms' greedy outputs from the start and the
first diverging token position."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.experiment import diagnose as api
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim


def test_a_lossless_only_corruption_gets_a_bug_report_with_both_greedy_outputs_and_the_divergence(tmp_path):
    # with the A/A arm: greedy divergence is judged only against a measured floor (issue 31)
    inv, pb = write_config(tmp_path, "accept_all_drafts", samples=2, max_tokens=512, temperatures=[0.0, 0.7],
                           compare={"calibration": True})
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    (v,) = res.summary["verdicts"]
    assert v["kind"] == "spec-corrupts-output", v["evidence"]
    assert all(r["spec_loops"] == 0 == r["base_loops"] for r in v["comparisons"])
    r = CliRunner().invoke(main, ["bug-report", res.run_id, "--runs-dir", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "runs" / res.run_id / "bug-report.md").read_text()
    assert "loops where the same server without speculation does not" not in text
    assert "`mtp`'s output differs from the same server without speculation (greedy evidence; no loops" in text
    assert "- greedy: greedy output diverges" in text
    samples = [json.loads(line) for line in (tmp_path / "runs" / res.run_id / "samples.jsonl").open()]
    # the quoted request is a greedy one (replays without deterministic inference), with its prompt
    quoted = text.split("### Replay the request", 1)[1]
    prompt_id = quoted.split("Request `", 1)[1].split("`", 1)[0]
    spec, base = ([s for s in samples if s["profile"] == arm and s["temperature"] == 0 and s["prompt_id"] == prompt_id]
                  for arm in ("mtp", "baseline"))
    (spec,), (base,) = spec, base
    assert "at T=0," in quoted and "Greedy (T=0)" in quoted and "--enable-deterministic-inference" not in quoted
    assert spec["request"]["body"]["text"] in quoted
    assert "non-streaming" in quoted and '"stream"' not in quoted
    assert spec["text"][:300] in quoted and base["text"][:300] in quoted  # both arms from the start
    first = next(i for i, (a, b) in enumerate(zip(spec["output_ids"], base["output_ids"])) if a != b)
    assert (f"**First diverging token: position {first}** of the output" in quoted
            and f"speculative `{spec['output_ids'][first]}`, baseline `{base['output_ids'][first]}`" in quoted)
    assert "Top-1 minus top-2 logprob there" in quoted  # greedy samples carry the top-2 margins
