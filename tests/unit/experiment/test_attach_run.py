"""A run with attached endpoints, its pure parts: the playbook the --attach endpoints make, the opening line's load
bound, and what each verdict says its evidence cannot include (with the served flags that differ beyond
speculation)."""

from __future__ import annotations

import pytest

from mtp_remote.analysis.verdict import Verdict
from mtp_remote.config.endpoints import parse_endpoints
from mtp_remote.config.playbook import load_playbook
from mtp_remote.errors import ConfigError
from mtp_remote.experiment.attach import attach_line, attached_playbook, cannot_include, flag_differences
from tests.conftest import ROOT

PB = load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml")


def test_the_endpoints_replace_the_profiles_and_nothing_is_launched():
    pb = attached_playbook(PB, parse_endpoints(["baseline=http://10.0.0.6:30000", "mtp=http://10.0.0.5:30000"],
                                               need_name=True))
    assert list(pb.profiles) == ["baseline", "mtp"] and pb.attached["mtp"].url == "http://10.0.0.5:30000"
    assert pb.base_flags == [] and pb.mitigations == [] and not pb.compare.calibration
    assert pb.prompts == PB.prompts and pb.temperatures == PB.temperatures  # the experiment itself is kept
    assert attach_line(pb) == ("attached baseline=http://10.0.0.6:30000, mtp=http://10.0.0.5:30000 (never launched, "
                               "signalled or stopped; no lock); load on each at most 2 requests in flight, "
                               "2 requests/s")


def test_without_a_baseline_endpoint_the_error_names_the_one_to_give():
    with pytest.raises(ConfigError, match="no attached endpoint is named 'baseline'.*--attach baseline=URL"):
        attached_playbook(PB, parse_endpoints(["a=http://x:1", "b=http://y:1"], need_name=True))


def test_each_verdict_with_an_attached_arm_says_what_it_cannot_include():
    v = Verdict(profile="mtp", kind="spec-corrupts-output", evidence="loops 9/12 vs 0/12", p_value=0.0004,
                temperature=0.7, comparisons=[])
    argv = {"baseline": ["--model-path", "/m", "--mem-fraction-static", "0.85"],
            "mtp": ["--model-path", "/m", "--mem-fraction-static", "0.88", "--speculative-algorithm", "EAGLE"]}
    cannot_include([v], {"baseline", "mtp"}, "baseline", argv)
    assert v.evidence.startswith("loops 9/12 vs 0/12; attached, so the evidence cannot include: no A/A relaunch")
    assert v.warnings[-1] == ("cannot include: the arms' served flags also differ beyond speculation: "
                              "--mem-fraction-static 0.88 vs 0.85")
    launched = Verdict(profile="x", kind="healthy", evidence="e", p_value=None, temperature=None, comparisons=[])
    cannot_include([launched], set(), "baseline", argv)
    assert launched.evidence == "e" and launched.warnings == []


def test_flag_differences_leave_speculation_aside_and_name_unset_and_switches():
    assert flag_differences(["--a", "1", "--on"], ["--a", "1", "--speculative-num-steps", "3", "--b", "x"]) == [
        "--b x vs unset", "--on unset vs on"]
