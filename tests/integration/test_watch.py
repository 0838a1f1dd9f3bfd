"""``mtp-remote watch`` against two sim servers the test starts itself (one leaking its recurrent state under
speculation, one healthy): two probe rounds write metrics that name the looping endpoint, record every probe in the
history, run the alert hook with its values quoted, and leave both servers running with the same PIDs."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import yaml
import pytest

from mtp_remote.report.history import probe_history
from tests.conftest import ROOT
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS, sim, sim_env  # noqa: F401 - fixtures

pytestmark = pytest.mark.sim


@pytest.fixture
def pair(sim):  # noqa: F811 - the fixture imported above
    leak = sim(FIELD_FLAGS + MTP_FLAGS, faults="state_leak")
    healthy = sim(FIELD_FLAGS + MTP_FLAGS)
    return leak, healthy


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "mtp_remote.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _gauges(text: str, metric: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels, value = line[len(metric) + 1:].rsplit("} ", 1)
            out[labels.split('"')[1]] = float(value)
    return out


def test_two_probes_name_the_looping_endpoint_in_the_metrics_and_the_history(pair, tmp_path):
    leak, healthy = pair
    pids = (leak.proc.pid, healthy.proc.pid)
    prom, db, hook_out = tmp_path / "watch.prom", tmp_path / "h.sqlite", tmp_path / "alerts.txt"
    hook = f"printf '%s|%s|%s\\n' {{endpoint}} {{reasons}} {{detail}} >> {hook_out}"
    r = _cli("watch", f"leak={leak.url}", f"healthy={healthy.url}", "--count", "2", "--interval", "1",
             "--samples", "3", "--metrics-file", str(prom), "--history", str(db), "--on-alert", hook, "--json")
    assert r.returncode == 1, r.stderr  # an alert was seen
    probes = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(p["endpoint"], p["probes"]) for p in probes] == [("leak", 1), ("healthy", 1), ("leak", 2),
                                                              ("healthy", 2)]
    text = prom.read_text()
    assert _gauges(text, "mtp_remote_watch_probes_total") == {"leak": 2.0, "healthy": 2.0}
    loops = _gauges(text, "mtp_remote_watch_loops_total")
    assert loops["leak"] >= 2 and loops["healthy"] == 0, loops
    assert _gauges(text, "mtp_remote_watch_alerting")["healthy"] == 0
    assert _gauges(text, "mtp_remote_watch_greedy_match_ratio") == {"leak": 1.0, "healthy": 1.0}
    # loops inflate acceptance: the leaking endpoint's is above the healthy one's over all samples, and its
    # non-looping samples' (when its last probe had any) below its all-sample figure
    acc, clean = (_gauges(text, "mtp_remote_watch_accept_length"),
                  _gauges(text, "mtp_remote_watch_accept_length_nonloop"))
    assert acc["leak"] > acc["healthy"] > 1.5 and clean["healthy"] == acc["healthy"], (acc, clean)
    assert clean.get("leak", 0.0) < acc["leak"]
    assert _gauges(text, "mtp_remote_watch_probe_latency_seconds")["healthy"] > 0
    assert 'url="' + leak.url + '"' in text

    rows = probe_history(db)
    assert sorted((x["endpoint"], x["probe"]) for x in rows) == [("healthy", 0), ("healthy", 1), ("leak", 0),
                                                                 ("leak", 1)]
    assert all(x["alerts"] == [] for x in rows if x["endpoint"] == "healthy")
    assert any("loop" in x["alerts"] for x in rows if x["endpoint"] == "leak")
    lines = hook_out.read_text().splitlines()
    assert lines and all(ln.startswith("leak|loop") for ln in lines), lines
    assert "loops " in lines[0] and "T=0.7" in lines[0]  # the detail, quoted whole into one argument
    listed = _cli("history", "--probes", "--history", str(db), "-H", "leak", "--json", timeout=120)
    assert listed.returncode == 0 and [x["probe"] for x in json.loads(listed.stdout)] == [1, 0]
    table = _cli("history", "--probes", "--history", str(db), timeout=120)
    assert table.returncode == 0 and "Watch probes" in table.stdout and "healthy" in table.stdout

    for sp, pid in zip(pair, pids):  # watched, never touched
        assert sp.proc.poll() is None and sp.proc.pid == pid
        assert httpx.get(sp.url + "/health", timeout=10).status_code == 200


def test_without_a_hook_the_first_alert_ends_the_watch_and_listen_serves_metrics(pair, tmp_path):
    leak, _ = pair
    r = _cli("watch", leak.url, "--count", "5", "--interval", "1", "--samples", "3", "--no-history",
             "--listen", "0")
    assert r.returncode == 1, r.stderr
    assert "metrics at http://127.0.0.1:" in r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and "ALERT loop" in lines[0], r.stdout  # one round, then the exit


@pytest.mark.parametrize("args,needle", [
    (["ftp://127.0.0.1:1"], "the scheme must be one of http, https"),
    (["bad name=http://127.0.0.1:1"], "endpoint name 'bad name'"),
    (["http://u:p@127.0.0.1:1"], "no credentials in the URL"),
    (["http://127.0.0.1:1", "--interval", "0.1"], "at least 1 s between probes"),
    (["http://127.0.0.1:1", "--listen", "0.0.0.0:9100"], "binds 127.0.0.1 only"),
    ([], "give at least one endpoint"),
])
def test_bad_watch_input_is_one_error_line_and_exit_2(args, needle):
    r = _cli("watch", *args, "--no-history", timeout=60)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_fab_watch_probes_the_same_way(pair, tmp_path):
    leak, healthy = pair
    r = subprocess.run([sys.executable, "-m", "fabric", "watch", "--urls", f"leak={leak.url},healthy={healthy.url}",
                        "--count", "1", "--interval", "1", "--samples", "3", "--no-history",
                        "--metrics-file", str(tmp_path / "w.prom"), "--on-alert", "true"],
                       capture_output=True, text=True, timeout=600, check=False, cwd=str(ROOT))
    assert r.returncode == 1, r.stderr
    assert "leak probe 1: loops" in r.stderr and "ALERT loop" in r.stderr and "healthy probe 1: loops 0/8" in r.stderr
    assert _gauges((tmp_path / "w.prom").read_text(), "mtp_remote_watch_alerting") == {"leak": 1.0, "healthy": 0.0}


def test_the_listener_serves_each_rounds_metrics_on_loopback(pair, tmp_path):
    from mtp_remote.config.endpoints import Endpoint
    from mtp_remote.watch.probe import default_probe_playbook
    from mtp_remote.watch.watch import WatchOptions, watch

    leak, healthy = pair
    ports, served = [], []

    def between_rounds(seconds: float) -> None:  # the watch's sleep: read what the listener serves now
        served.append(httpx.get(f"http://127.0.0.1:{ports[0]}/metrics", timeout=10).text)
        assert httpx.get(f"http://127.0.0.1:{ports[0]}/other", timeout=10).status_code == 404

    res = watch([Endpoint("leak", leak.url), Endpoint("healthy", healthy.url)], default_probe_playbook(samples=1),
                WatchOptions(interval_s=1.0, count=2, listen=0, on_alert="true"),
                sleep=between_rounds, on_listen=ports.append)
    assert res.exit_code == 1 and res.rounds == 2 and len(served) == 1
    assert _gauges(served[0], "mtp_remote_watch_probes_total") == {"leak": 1.0, "healthy": 1.0}
    assert _gauges(served[0], "mtp_remote_watch_alerting")["healthy"] == 0.0
    with pytest.raises(httpx.ConnectError):  # closed with the watch
        httpx.get(f"http://127.0.0.1:{ports[0]}/metrics", timeout=5)


def test_a_playbook_of_agentic_requests_is_the_probe_set(sim, tmp_path):  # noqa: F811
    from tests.unit.config.test_request_shapes import AGENT, TOOLS

    healthy = sim(FIELD_FLAGS + MTP_FLAGS)
    pb = {"name": "agent-probe", "api": "chat", "profiles": {"baseline": {}}, "temperatures": [0.0, 0.6],
          "samples": 1, "max_tokens": 512, "prompts": [{"id": "agent", "messages": AGENT, "tools": TOOLS}]}
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    r = _cli("watch", healthy.url, "-p", str(tmp_path / "pb.yaml"), "--count", "1", "--no-history", "--json")
    assert r.returncode == 0, r.stderr
    (probe,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert (probe["n"], probe["loops"], probe["alerts"]) == (2, 0, [])
    assert probe["accept_length"] is None  # chat responses carry no verify steps: acceptance is /server_info's
    assert probe["server_accept_length"] > 1.5
    assert "2 requests per probe, 1 at a time, max_tokens 512 (chat)" in r.stderr
