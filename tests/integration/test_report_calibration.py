"""The A/A calibration arm in report.md and report.html, from a real diagnose against the sim (the sim as a
real process, local transport): the A/A arm's loop rate beside the baseline's, the host's floors, and each
profile's KL probe against the floor + 3 SE threshold — the numbers the summary holds, rendered."""

from __future__ import annotations

import re
import sys
from html import unescape

import pytest
import yaml

from mtp_remote.experiment import diagnose as api
from mtp_remote.report.markdown import AA_EXPLAINED
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def calibrated_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("aa")
    inv = {"default_host": "sim", "hosts": {"sim": {
        "transport": "local", "engine": "sim", "workdir": str(d / "wd"), "port": free_port(),
        "python": sys.executable,
        "env": {"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_FAULTS": "state_leak,numeric_noise=0.02"}}}}
    (d / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=2, max_tokens=512, temperatures=[0.0, 0.7], kl_probe=True,
              compare={"margin": 0.5, "calibration": True})
    pb["prompts"] = pb["prompts"][:3]
    (d / "pb.yaml").write_text(yaml.safe_dump(pb))
    res = api.diagnose(inventory=str(d / "inventory.yaml"), playbook=str(d / "pb.yaml"), runs_dir=d / "runs")
    md = (res.run_dir / "report.md").read_text()
    html = unescape(re.sub(r"<[^>]+>", " ", (res.run_dir / "report.html").read_text()))
    return res.summary, md, " ".join(html.split())


def g(x) -> str:
    return f"{x:.3g}"


def test_the_summary_names_the_aa_arm_and_measures_its_floors(calibrated_run):
    doc, _, _ = calibrated_run
    cal = doc["calibration"]
    assert cal["profile"] == "baseline-aa" and cal["baseline"] == "baseline"
    assert cal["greedy_pairs"] == 3  # one greedy sample per prompt and arm
    assert cal["kl_floor_n"] == 2 * 3 * (1 + 2)  # every probed sample of both arms: T=0 once, T=0.7 twice
    assert cal["kl_floor_mean"] > 0 and cal["speed_ratio"] > 0
    (probe,) = [v["kl_probe"] for v in doc["verdicts"]]
    assert probe["floor_source"] == "calibration" and probe["floor_n"] == cal["kl_floor_n"]
    assert probe["floor_mean"] == pytest.approx(cal["kl_floor_mean"])
    assert probe["threshold"] >= 2e-4  # the absolute bound: max(2e-4, 2 x the floor's token-weighted mean)
    assert probe["flagged"] == (probe["mean"] > probe["threshold"] and probe["p"] < 0.05)
    v = doc["verdicts"][0]  # state_leak: lossless evidence in the verdict when the probe flags it
    assert not probe["flagged"] or (v["kind"] == "spec-corrupts-output" and "decode vs prefill" in v["evidence"])


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_both_reports_show_the_aa_arm_its_floors_and_the_kl_flag(calibrated_run, fmt):
    doc, md, html = calibrated_run
    text = md if fmt == "md" else html
    cal = doc["calibration"]
    assert "Calibration (A/A arm" in text and "baseline-aa" in text and AA_EXPLAINED in text
    cells = {(c["profile"], c["temperature"]): c for c in doc["cells"]}
    sep = " | " if fmt == "md" else " "

    def arm(c):
        lo, hi = (100 * x for x in c["loop_ci"])
        return sep.join([f"{c['loops']}/{c['n']}", f"{100 * c['loop_rate']:.0f} % [{lo:.0f} %, {hi:.0f} %]"])

    for t in (0.0, 0.7):  # the A/A arm's loop rate beside the baseline's, per temperature
        row = sep.join([str(t), arm(cells[("baseline-aa", t)]), arm(cells[("baseline", t)])])
        assert row in text, row
    assert f"{cal['greedy_diverged']} of {cal['greedy_pairs']} A/A output pairs differ" in text
    assert f"tokens/s baseline-aa / baseline: {cal['speed_ratio']:.2f}" in text
    assert f"mean k3 {g(cal['kl_floor_mean'])} ± {g(cal['kl_floor_se'])} nats/token over {cal['kl_floor_n']}" in text
    p = doc["verdicts"][0]["kl_probe"]
    flag = ("**yes**" if p["flagged"] else "no") if fmt == "md" else ("yes" if p["flagged"] else "no")
    row = sep.join(["mtp", f"{g(p['mean'])} ± {g(p['se'])} ({p['n']})",
                    f"{g(p['floor_mean'])} ± {g(p['floor_se'])} ({p['floor_n']}, calibration)", g(p["threshold"]), flag])
    assert row in text, row
