"""report.html reads like the terminal: the next step, why a looping cell shows finish=length 0 % under the
loop stop, and the worst-samples section opening with the worst speculative output (not a clean baseline one)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from mtp_remote.analysis.diagnosis import diagnose
from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.experiment.runner import ProfileRun
from mtp_remote.report.next_step import next_step
from mtp_remote.report.document import build_summary
from mtp_remote.report.html import render_html
from tests.unit.report.test_reports import HEALTHY, LOOP, sample


def _loop_stopped(s: dict) -> dict:
    return {**s, "finish_reason": "loop-stop"} if s["metrics"]["loop"] else {**s, "finish_reason": "stop"}


def test_the_html_report_names_the_next_step_explains_loop_stop_and_opens_with_the_worst_spec_sample(tmp_path):
    pb = Playbook.model_validate(dict(name="field", profiles={"baseline": {}, "mtp": {
        "flags": "--speculative-algorithm NEXTN"}}, prompts=[{"id": f"p{i}", "text": "q"} for i in range(4)],
        temperatures=[0.7], samples=4, stop_on_loop=True))
    host = HostConfig(name="sim-local", transport="local", engine="sim", env={"SGLANG_SIM_FAULTS": "state_leak"})
    samples = [_loop_stopped(s) for s in ([sample("baseline", i, HEALTHY, spec=False) for i in range(16)]
                                          + [sample("mtp", i, LOOP if i < 13 else HEALTHY, spec=True)
                                             for i in range(16)])]
    diag = diagnose(baseline="baseline", profiles={"baseline": False, "mtp": True}, samples=samples)
    prs = [ProfileRun("baseline", False, ["--tp-size", "2"], outcome={"kind": "ready"}),
           ProfileRun("mtp", True, ["--tp-size", "2"], outcome={"kind": "ready"})]
    doc = build_summary(run_id="r1", host=host, playbook=pb, profile_runs=prs, diagnosis=diag, exit_code=1,
                        started_at=datetime.now(timezone.utc), n_samples=len(samples), samples=samples)
    html = render_html(doc, samples, tmp_path / "r1")

    step = next_step(doc, tmp_path / "r1")
    assert step and f'<p id="next-step"><strong>Next:</strong> {step}</p>' in html.replace("&#39;", "'")
    cells = {c["profile"]: c for c in doc["cells"]}
    assert cells["mtp"]["loops"] == 13 and cells["mtp"]["finish_length_rate"] == 0
    row = re.search(r"<tr><td>mtp</td>.*?</tr>", html[html.index('id="cells"'):], re.S).group(0)
    assert "0 % (loop-stop 13/16)" in row
    assert 'id="loop-stop-explained"' in html and "can show finish=length 0 %" in html
    worst = html[html.index("<h2>Worst sample per cell</h2>"):]
    assert worst.index("<h3>mtp at T=0.7") < worst.index("<h3>baseline at T=0.7")
