"""Issue 30: a resumed run's time split counted the gap between the interrupted run and the resume as the tool's
own time ("tool 13.0 s" for a 9.6 s command). The sim as a real process: a diagnose interrupted as its second
profile launches, a pause, the resume timed by the test; the resume's time split stays within the resume's
own wall time, while ``duration_s`` remains the run's, first start to finish."""

from __future__ import annotations

import time

import pytest

from mtp_remote.errors import Interrupted
from mtp_remote.experiment import diagnose as api
from tests.integration.test_bisect_resume import Recorder
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim
GAP_S = 6.0


def test_a_resumes_time_split_is_the_resumes_own_time(tmp_path):
    inv, pb = write_config(tmp_path, None, samples=2, max_tokens=128)
    runs = tmp_path / "runs"
    with pytest.raises(Interrupted):
        api.diagnose(inventory=inv, playbook=pb, runs_dir=runs, hooks=Recorder(stop_on_launch="mtp").hooks())
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    time.sleep(GAP_S)  # the operator comes back later
    t0 = time.monotonic()
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=runs, resume=run_dir.name)
    resume_s = time.monotonic() - t0
    total = res.summary["time_split"]["total"]
    assert total["command_s"] <= resume_s, (total, resume_s)
    assert total["outside_profiles_s"] + total["tool_s"] < resume_s < res.summary["duration_s"] - GAP_S, total
    # this command launched only mtp: the baseline's samples were stored before the interrupt
    assert [p["profile"] for p in res.summary["time_split"]["profiles"] if p["launch_ready_s"]] == ["mtp"]
