"""From samples to documents and renderings, without a server: diagnosis, summary.json, report.md,
report.html, junit.xml, metrics.prom, the SQLite history and regressions."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from xml.etree import ElementTree as ET

import pytest

from mtp_remote.analysis.diagnosis import diagnose
from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.experiment.runner import ProfileRun
from mtp_remote.report import history as store
from mtp_remote.report.ci import render_junit, render_prometheus
from mtp_remote.report.document import build_summary, load_summary, save_summary
from mtp_remote.report.html import render_html
from mtp_remote.report.markdown import render_markdown

HEALTHY = ("<think>\nThe user asks for 2+2. Adding two and two gives four. I will answer briefly.\n</think>\n\n"
           "2 + 2 = 4.")
LOOP = "<think>\nThe user asks for 2+2. " + "The user's question is 2+2. " * 60


def sample(profile, i, text, *, spec, t=0.7):
    n = len(text.split())
    return {"profile": profile, "speculative": spec, "temperature": t, "prompt_id": f"p{i % 4}",
            "sample_index": i // 4, "seed": 1234 + i // 4, "text": text, "finish_reason": "length" if "60" else "stop",
            "completion_tokens": n, "latency_s": n / (80.0 if spec else 40.0), "spec_verify_ct": n // 3 if spec else None,
            "output_ids": None, "error": None,
            "metrics": {"loop": text is LOOP, "loop_start_token": 8 if text is LOOP else None,
                        "loop_fraction": 0.95 if text is LOOP else None}}


@pytest.fixture
def run(tmp_path):
    pb = Playbook.model_validate(dict(name="field", profiles={"baseline": {}, "mtp": {
        "flags": "--speculative-algorithm NEXTN"}}, prompts=[{"id": f"p{i}", "text": "q"} for i in range(4)],
        temperatures=[0.7], samples=4))
    host = HostConfig(name="sim-local", transport="local", engine="sim", env={"SGLANG_SIM_FAULTS": "state_leak"})
    samples = ([sample("baseline", i, HEALTHY, spec=False) for i in range(16)]
               + [sample("mtp", i, LOOP if i < 14 else HEALTHY, spec=True) for i in range(16)])
    diag = diagnose(baseline="baseline", profiles={"baseline": False, "mtp": True}, samples=samples)
    prs = [ProfileRun("baseline", False, ["--tp-size", "2"], outcome={"kind": "ready"}),
           ProfileRun("mtp", True, ["--api-key", "***"], outcome={"kind": "ready"})]
    doc = build_summary(run_id="r1", host=host, playbook=pb, profile_runs=prs, diagnosis=diag, exit_code=1,
                        started_at=datetime.now(timezone.utc), n_samples=len(samples))
    return doc, samples, tmp_path


def test_the_diagnosis_of_a_looping_spec_arm_is_spec_corrupts_output(run):
    doc, _, _ = run
    (v,) = doc["verdicts"]
    assert v["profile"] == "mtp" and v["kind"] == "spec-corrupts-output"
    assert "14/16" in v["evidence"] and "0/16" in v["evidence"]
    cells = {c["profile"]: c for c in doc["cells"]}
    assert cells["mtp"]["loops"] == 14 and cells["baseline"]["loops"] == 0
    assert doc["simulated"] is True and doc["host"]["faults"] == "state_leak"
    assert doc["sampling"] == {"early_stop": False, "budget": 32, "used": 32, "saved": 0, "used_fraction": 1.0}


def test_the_summary_round_trips_and_a_newer_schema_is_refused(run):
    from mtp_remote.errors import ConfigError

    doc, _, tmp = run
    save_summary(doc, tmp)
    assert load_summary(tmp)["verdicts"] == json.loads(json.dumps(doc.to_dict()["verdicts"]))
    (tmp / "summary.json").write_text(json.dumps({**doc.to_dict(), "schema_version": 99}))
    with pytest.raises(ConfigError, match="schema_version 99"):
        load_summary(tmp)


def test_the_markdown_report_says_simulated_and_shows_verdict_and_worst_sample(run):
    doc, samples, _ = run
    md = render_markdown(doc, samples)
    assert "**Simulated host.**" in md and "`state_leak`" in md
    assert "| mtp | **spec-corrupts-output** |" in md
    assert "The user's question is 2+2." in md  # the worst sample's excerpt


def test_the_html_report_is_self_contained_with_its_plots(run):
    doc, samples, _ = run
    html = render_html(doc, samples)
    assert html.count("data:image/png;base64,") == 3  # loop rate, speed, loop onset
    assert 'id="simulated"' in html and "spec-corrupts-output" in html
    assert "http://" not in html and "https://" not in html


def test_junit_fails_the_corrupt_profile_and_prometheus_exports_its_loop_rate(run):
    doc, _, _ = run
    suite = ET.fromstring(render_junit(doc).split("?>", 1)[1])
    assert suite.get("failures") == "1"
    assert suite.find("testcase/failure").get("message") == "spec-corrupts-output"
    prom = render_prometheus(doc)
    assert 'mtp_remote_loop_rate{host="sim-local",playbook="field",profile="mtp",temperature="0.7"} 0.875' in prom
    assert 'mtp_remote_spec_corrupts{host="sim-local",playbook="field",profile="mtp",verdict="spec-corrupts-output"} 1' in prom


def test_history_flags_a_profile_that_turned_corrupt(run):
    doc, _, tmp = run
    db = tmp / "h.sqlite"
    earlier = json.loads(json.dumps(doc.to_dict()))
    earlier.update(run_id="r0", started_at="2026-01-01T00:00:00+00:00")
    earlier["verdicts"][0]["kind"] = "healthy"
    store.record_run(db, earlier, tmp)
    store.record_run(db, doc, tmp)
    prev = store.previous_verdicts(db, host="sim-local", playbook="field", before_run="r1")
    assert prev == {"mtp": "healthy"}
    assert store.regressions(prev, {"mtp": "spec-corrupts-output"}) == ["mtp"]
    assert [r["run_id"] for r in store.history(db)] == ["r1", "r0"]


def test_plot_labels_stay_readable_with_six_profiles():
    """Six profiles x two temperatures: x labels rotated with room between them (no overlap), legend outside."""
    import itertools
    import math

    from mtp_remote.report.html import loop_rate_figure, speed_figure

    names = ["baseline", "mtp", "mtp-steps2", "mtp-topk4", "eagle3-steps5", "mtp-no-radix-cache"]
    cells = [{"profile": p, "temperature": t, "loop_rate": 0.2, "loop_ci": [0.1, 0.3],
              "accept_length": None if p == "baseline" else 2.5, "accept_length_nonloop": 2.0,
              "tokens_per_s": 100.0, "tokens_per_s_nonloop": 90.0} for p in names for t in (0.0, 0.7)]
    fig = speed_figure(cells)
    fig.canvas.draw()
    for ax in fig.axes:
        labels = ax.get_xticklabels()
        assert len(labels) == 12 and labels[0].get_rotation() == 30
        xs = [ax.transData.transform((x, 0))[0] for x in ax.get_xticks()]
        gap = min(b - a for a, b in itertools.pairwise(xs))
        text_height = labels[0].get_fontsize() * fig.dpi / 72
        assert gap * math.sin(math.radians(30)) > text_height  # rotated labels do not touch
    fig = loop_rate_figure(cells)
    assert fig.axes[0].get_legend().get_bbox_to_anchor().x0 > fig.axes[0].get_window_extent().x1 - 1


def test_smoke_prints_the_output_from_its_start():
    from rich.console import Console

    from mtp_remote.report.console import print_smoke

    text = "<think>\nThe user asks for 2+2. " + "The user's question is 2+2. " * 200
    res = {"verdict": "loops", "completion_tokens": 1400, "finish_reason": "length", "latency_s": 2.0,
           "accept_length": 3.9, "text": text, "text_tail": text[-400:],
           "metrics": {"loop": True, "loop_unit_tokens": 8, "loop_repeats": 199, "seq_rep_4": 0.97}}
    console = Console(record=True, width=100, soft_wrap=True)
    print_smoke(console, res)
    out = console.export_text()
    assert out.splitlines()[1] == "<think>" and "The user asks for 2+2." in out
    assert f"[… {len(text) - 1600} characters …]" in out and out.rstrip().endswith("is 2+2.")


def test_prometheus_exports_non_looping_speed_and_acceptance_beside_the_all_sample_figures(run):
    doc, _, _ = run
    prom = render_prometheus(doc)
    mtp = next(c for c in doc["cells"] if c["profile"] == "mtp")
    who = 'host="sim-local",playbook="field",profile="mtp",temperature="0.7"'
    # 14 of 16 mtp samples loop: the two clean ones (22 tokens, 7 verify steps each) give 22/7
    assert mtp["accept_length_nonloop"] == pytest.approx(22 / 7) and mtp["accept_length"] != mtp["accept_length_nonloop"]
    for metric, key in (("accept_length", "accept_length"), ("accept_length_nonloop", "accept_length_nonloop"),
                        ("tokens_per_second", "tokens_per_s"), ("tokens_per_second_nonloop", "tokens_per_s_nonloop")):
        assert f"mtp_remote_{metric}{{{who}}} {mtp[key]}" in prom, metric
    assert prom.count("# TYPE mtp_remote_accept_length_nonloop gauge") == 1
    assert 'mtp_remote_accept_length_nonloop{host="sim-local",playbook="field",profile="baseline"' not in prom


def test_the_fleet_metrics_carry_the_non_looping_figures_of_every_host(run):
    from mtp_remote.report.fleet_ci import render_fleet_prometheus

    doc, _, _ = run
    other = json.loads(json.dumps(doc.to_dict()))
    other["host"]["name"] = "gpu-2"
    fleet = {"group": "rack", "hosts": [{"host": "sim-local"}, {"host": "gpu-2"}], "could_not_run": [],
             "corrupt_hosts": ["sim-local", "gpu-2"], "disagreements": [], "exit_code": 1,
             "finished_at": "2026-12-03T07:00:00+00:00"}
    prom = render_fleet_prometheus(fleet, {"sim-local": doc, "gpu-2": other})
    mtp = next(c for c in doc["cells"] if c["profile"] == "mtp")
    for host in ("sim-local", "gpu-2"):
        assert (f'mtp_remote_tokens_per_second_nonloop{{group="rack",host="{host}",playbook="field",profile="mtp",'
                f'temperature="0.7"}} {mtp["tokens_per_s_nonloop"]}') in prom
    assert prom.count("# TYPE mtp_remote_tokens_per_second_nonloop gauge") == 1
