"""Machine outputs for CI and monitoring: ``junit.xml`` (one test case per speculative profile) and
``metrics.prom`` (Prometheus text exposition, for a node-exporter textfile collector)."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET


def render_junit(doc: dict) -> str:
    """A test suite per run; a case per verdict, failed when the profile corrupts output or did not launch."""
    verdicts = doc.get("verdicts", [])
    failures = [v for v in verdicts if v["kind"] == "spec-corrupts-output" or v["kind"].startswith(("launch-failed", "crashed", "hung"))]
    suite = ET.Element("testsuite", name=f"mtp-remote.{doc['playbook']['name']}.{doc['host']['name']}",
                       tests=str(len(verdicts)), failures=str(len(failures)), errors="0",
                       time=f"{doc.get('duration_s', 0):.2f}", timestamp=doc.get("started_at", ""))
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"mtp-remote.{doc['host']['name']}", name=v["profile"])
        if v in failures:
            ET.SubElement(case, "failure", message=v["kind"]).text = v["evidence"]
        else:
            ET.SubElement(case, "system-out").text = f"{v['kind']}: {v['evidence']}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _label(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


_CELL_GAUGES = (
    ("mtp_remote_loop_rate", "loop_rate", "Share of samples that loop, per profile and temperature."),
    ("mtp_remote_accept_length", "accept_length", "Mean acceptance length (completion_tokens / spec_verify_ct)."),
    ("mtp_remote_tokens_per_second", "tokens_per_s", "Mean per-request decode tokens/s."),
)


def render_prometheus(doc: dict) -> str:
    """Gauges per cell (loop rate, acceptance length, tokens/s) and per verdict (1 = corrupt)."""
    host, pb = _label(doc["host"]["name"]), _label(doc["playbook"]["name"])
    lines = []
    for metric, key, help_text in _CELL_GAUGES:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for c in doc.get("cells", []):
            if c.get(key) is not None:
                lines.append(f'{metric}{{host="{host}",playbook="{pb}",profile="{_label(c["profile"])}",'
                             f'temperature="{c["temperature"]}"}} {c[key]}')
    lines += ["# HELP mtp_remote_spec_corrupts 1 when the profile's verdict is spec-corrupts-output or launch-failed.",
              "# TYPE mtp_remote_spec_corrupts gauge"]
    for v in doc.get("verdicts", []):
        bad = int(v["kind"] == "spec-corrupts-output" or v["kind"].startswith(("launch-failed", "crashed", "hung")))
        lines.append(f'mtp_remote_spec_corrupts{{host="{host}",playbook="{pb}",profile="{_label(v["profile"])}",'
                     f'verdict="{_label(v["kind"])}"}} {bad}')
    return "\n".join(lines) + "\n"


def write_ci_outputs(doc: dict, run_dir: Path) -> None:
    (run_dir / "junit.xml").write_text(render_junit(doc))
    (run_dir / "metrics.prom").write_text(render_prometheus(doc))
