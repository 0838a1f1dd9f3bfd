"""A resume is a later look of the design its first run recorded: ``--samples`` between two looks goes to the
next one, past the last one to the last; the recorded design, not the playbook's, decides."""

from __future__ import annotations

from mtp_remote.analysis.diagnosis import design_of, record_design
from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import load_playbook
from mtp_remote.experiment.diagnose import _at_a_look
from mtp_remote.experiment.plan import plan_run
from mtp_remote.experiment.runner import Hooks
from tests.conftest import ROOT

HOST = HostConfig(name="sim-local", transport="local", engine="sim")


def resumed_to(samples: int, recorded: dict) -> tuple[int, list[str]]:
    said: list[str] = []
    pb = load_playbook(ROOT / "playbooks" / "nightly.yaml").model_copy(update={"samples": samples})
    pb, plan = _at_a_look(pb, plan_run(HOST, pb, HOST.workdir), recorded, HOST, None,
                          Hooks(on_progress=said.append))
    assert max(r.sample_index for r in plan[0].requests if r.temperature > 0) + 1 == pb.samples
    return pb.samples, said


def test_the_first_run_records_its_looks_and_a_resume_samples_to_one_of_them():
    pb = load_playbook(ROOT / "playbooks" / "nightly.yaml")
    recorded = record_design(pb, 1)
    assert recorded["looks"] == [1, 2, 4, 8, 12, 24, 48, 96] and recorded["first_rounds_by_t"] == {"0": 1, "0.7": 12}
    assert resumed_to(24, recorded) == (24, [])
    n, said = resumed_to(30, recorded)
    assert n == 48 and "not a look of this run's design" in said[0]
    assert resumed_to(500, recorded)[0] == 96
    assert resumed_to(30, {**recorded, "resumes": 0})[0] == 12  # no look left: nothing new is sampled


def test_the_recorded_design_and_not_the_playbooks_decides_a_resume():
    pb = load_playbook(ROOT / "playbooks" / "nightly.yaml")
    recorded = record_design(pb, 1)
    later = pb.model_copy(update={"samples": 24, "compare": pb.compare.model_copy(update={"resumes": 0,
                                                                                           "alpha": 0.2})})
    d = design_of(later, 1, 0.7, recorded=recorded)
    assert (d.first_rounds, d.rounds, d.resumes, d.alpha) == (12, 24, 3, 0.05)
    assert d.looks()[-1] == 24 and abs(d.alpha_bound - 0.05 * 0.2 / 3) < 1e-12
