"""watch's pure parts: endpoints as the command line gives them, the probe's judgement (loops, acceptance over all
and non-looping samples, greedy stability against the first probe), the alert hook's quoting and the metrics text."""

from __future__ import annotations

import shlex

import pytest

from mtp_remote.config.endpoints import Endpoint, parse_endpoint, parse_endpoints
from mtp_remote.report.watch_prom import render_watch_prometheus
from mtp_remote.watch.probe import default_probe_playbook, judge_probe, probe_requests
from mtp_remote.watch.watch import EndpointState, hook_command

EP = Endpoint("mtp", "http://127.0.0.1:30000")
CLEAN = "<think>\nTwo and two make four. I will answer.\n</think>\n\n4"
LOOP = "<think>\nThe user asks. " + "The user's question is 2+2. " * 40


def rec(prompt, t, text, *, ids=None, tokens=60, verify=20, i=0):
    return {"profile": "mtp", "temperature": t, "prompt_id": prompt, "sample_index": i, "seed": 1234 + i,
            "text": text, "output_ids": ids, "finish_reason": "length" if text is LOOP else "stop",
            "completion_tokens": tokens, "latency_s": tokens / 100, "spec_verify_ct": verify, "error": None,
            "think_opened_by_prompt": False}


def probe(n, records):
    return judge_probe(EP, n, records, started="2026-12-03T07:00:00+00:00", duration_s=1.5, speculative=True)


def test_endpoints_take_a_name_or_get_one_from_host_and_port():
    assert parse_endpoint("http://10.0.0.5:30000/") == Endpoint("10.0.0.5-30000", "http://10.0.0.5:30000")
    assert parse_endpoint("prod-mtp=https://gpu.example:8443/v1x") == Endpoint("prod-mtp", "https://gpu.example:8443/v1x")
    with pytest.raises(ValueError, match="given twice"):
        parse_endpoints(["a=http://x:1", "a=http://y:1"])
    with pytest.raises(ValueError, match="give NAME=URL"):
        parse_endpoint("http://x:1", need_name=True)
    for bad, needle in (("file:///etc/passwd", "scheme must be one of http, https"), ("http://:80", "no host"),
                        ("x=http://a:1?q=1", "no query or fragment"), ("../x=http://a:1", "endpoint name '../x'"),
                        ("a\n=http://a:1", "endpoint name"), ("http://a:99999", "out of range")):
        with pytest.raises(ValueError, match=needle.replace("?", r"\?")):
            parse_endpoint(bad)


def test_the_probe_plan_keeps_greedy_seeds_and_moves_sampled_ones_on():
    pb = default_probe_playbook()
    first, second = probe_requests(pb, "mtp", 0), probe_requests(pb, "mtp", 1)
    assert len(first) == 6 and [r.temperature for r in first].count(0.0) == 2
    assert [r.seed for r in first if r.temperature == 0] == [r.seed for r in second if r.temperature == 0]
    assert sorted(r.seed for r in second if r.temperature > 0) == [1236, 1236, 1237, 1237]


def test_a_looping_probe_alerts_and_its_acceptance_is_split_into_all_and_non_looping():
    st = EndpointState(EP)
    res = probe(0, [rec("a", 0.0, CLEAN, ids=[1, 2, 3]), rec("a", 0.7, LOOP, tokens=240, verify=40),
                    rec("b", 0.7, CLEAN, tokens=60, verify=30)])
    assert st.take(res) == ["loop"]
    d = st.to_dict()
    assert (d["loops"], d["n"], d["loop_rate"]) == (1, 3, pytest.approx(1 / 3))
    assert d["accept_length"] == pytest.approx(360 / 90) and d["accept_length_nonloop"] == pytest.approx(120 / 50)
    assert d["greedy_match_ratio"] == 1.0 and d["greedy_changed"] == 0  # the first probe is its own reference
    assert "loops 1/3 (a T=0.7)" in st.detail()


def test_a_greedy_output_that_changes_from_the_first_probe_alerts_with_where():
    st = EndpointState(EP)
    st.take(probe(0, [rec("a", 0.0, CLEAN, ids=[1, 2, 3, 4]), rec("b", 0.0, CLEAN, ids=[5, 6])]))
    assert st.take(probe(1, [rec("a", 0.0, CLEAN, ids=[1, 2, 9, 4]), rec("b", 0.0, CLEAN, ids=[5, 6])])) == [
        "greedy-changed"]
    d = st.to_dict()
    assert d["greedy_match_ratio"] == 0.5 and d["greedy_changed"] == 1 and d["alerts_total"] == 1
    assert st.detail() == "greedy output changed since the first probe: a at token 2"


def test_an_unreachable_endpoint_is_down_without_an_alert():
    st = EndpointState(EP)
    bad = {**rec("a", 0.0, ""), "error": "ConnectError: refused", "text": ""}
    assert st.take(probe(0, [bad])) == []
    d = st.to_dict()
    assert d["up"] == 0 and "loop_rate" not in d and st.reference is None
    assert "mtp probe 1: no answer (ConnectError: refused)" == st.describe([])


def test_hook_values_are_shell_quoted_and_other_braces_kept():
    cmd = hook_command("notify {endpoint} {detail} | awk '{print $1}'",
                       {"endpoint": "mtp", "detail": "loops 2/6; $(rm -rf /) 'x'"})
    assert shlex.split(cmd)[:3] == ["notify", "mtp", "loops 2/6; $(rm -rf /) 'x'"]
    assert cmd.endswith("| awk '{print $1}'")


def test_the_metrics_name_each_endpoint_and_skip_what_it_does_not_have():
    st = EndpointState(EP)
    st.take(probe(0, [rec("a", 0.7, LOOP, tokens=240, verify=40)]))
    text = render_watch_prometheus([st.to_dict(), {"endpoint": "idle", "url": "http://127.0.0.1:1", "probes": 0}])
    assert 'mtp_remote_watch_loops_total{endpoint="mtp",url="http://127.0.0.1:30000"} 1' in text
    assert 'mtp_remote_watch_alerting{endpoint="mtp",url="http://127.0.0.1:30000"} 1' in text
    assert 'mtp_remote_watch_probes_total{endpoint="idle",url="http://127.0.0.1:1"} 0' in text
    assert "mtp_remote_watch_accept_length_nonloop{" not in text  # every sample looped: no clean figure
    assert text.count("# TYPE mtp_remote_watch_up gauge") == 1
