"""Machine outputs of a fleet nightly: ``junit.xml`` with one test case per host, ``metrics.prom`` with every
host's gauges under one set of metric families.

Input: the fleet document (:func:`mtp_remote.fleet.nightly_fleet.fleet_summary`) and each host's own summary document.
A host's test case fails when the host could not run (the cause: SSH refused, lock held, baseline failed…),
when a speculative profile corrupts output or did not launch (the profiles and their evidence), or when a
regression was tested since its own last good run (named after the corrupting profiles when both hold: a new
break reads differently from a standing one); it passes otherwise, with its verdicts as output.

The metrics are the single-host ones (:func:`mtp_remote.report.ci.render_prometheus`: ``mtp_remote_up``,
``mtp_remote_run_failed``, ``mtp_remote_last_run_timestamp_seconds``, ``mtp_remote_exit_code``, per-cell and
per-verdict gauges) for every host, each sample labelled ``group="…"`` and each family's HELP/TYPE given once
(the text exposition format refuses a family declared twice), then fleet gauges: hosts planned, could not
run, corrupt, disagreeing, and the fleet's end time. Pure: documents in, text out.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from xml.etree import ElementTree as ET

from ..records.fleet import FleetHost, FleetSummary
from ..records.summary import Summary
from .ci import prom_label, render_prometheus


def _host_failure(h: FleetHost) -> tuple[str, str] | None:
    """(message, text) of a host's failing case, None when it passes."""
    if h.status != "completed":
        return f"could not run ({h.status}): {h.cause}", f"exit {h.exit_code}; cause: {h.cause}"
    regressed = f"regressed since {h.regression_baseline}: {', '.join(h.regressed)}" if h.regressed else None
    if h.corrupts:  # a corrupting host that was good last night says so: a new break, not a standing one
        bad = [v for v in h.verdicts if v.profile in h.corrupts]
        return ("; ".join([f"{v.profile}: {v.kind}" for v in bad] + ([regressed] if regressed else [])),
                "\n".join([f"{v.profile}: {v.kind}: {v.evidence}" for v in bad] + ([regressed] if regressed else [])))
    if regressed:
        return regressed, ", ".join(h.regressed)
    return None


def render_fleet_junit(doc: FleetSummary | dict) -> str:
    """One test suite for the fleet, one test case per host (classname ``mtp-remote.nightly.<group>``)."""
    doc = FleetSummary.of(doc)
    group = doc.group
    failing = {h.host: _host_failure(h) for h in doc.hosts}
    suite = ET.Element("testsuite", name=f"mtp-remote.{doc.playbook.name}.{group}",
                       tests=str(len(doc.hosts)), failures=str(sum(1 for f in failing.values() if f)),
                       errors="0", time=f"{doc.wall_s or 0:.2f}", timestamp=doc.started_at if "started_at" in doc else "")
    for h in doc.hosts:
        case = ET.SubElement(suite, "testcase", classname=f"mtp-remote.nightly.{group}", name=h.host,
                             time=f"{h.duration_s or 0:.2f}")
        f = failing[h.host]
        if f:
            ET.SubElement(case, "failure", message=f[0]).text = f[1]
        else:
            ET.SubElement(case, "system-out").text = "; ".join(f"{v.profile}: {v.kind}" for v in h.verdicts) \
                or "no verdict"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s(.*)$")


def merge_prometheus(texts: list[str], extra_labels: str) -> str:
    """Merge text expositions into one: each family's HELP/TYPE once, its samples from every text together,
    ``extra_labels`` (``group="rack"``) added to every sample. Families keep their first-seen order."""
    order: list[str] = []
    head: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for text in texts:
        for line in text.splitlines():
            if line.startswith("# "):
                parts = line.split(" ", 3)
                name = parts[2]
                if name not in head:
                    order.append(name)
                    head[name], samples[name] = [], []
                if not any(x.split(" ", 3)[1] == parts[1] for x in head[name]):
                    head[name].append(line)
                continue
            m = _SAMPLE.match(line)
            if not m:
                continue
            name, labels, value = m.groups()
            if name not in head:
                order.append(name)
                head[name], samples[name] = [], []
            inner = labels[1:-1] if labels else ""
            samples[name].append(f"{name}{{{extra_labels}{',' + inner if inner else ''}}} {value}")
    return "\n".join(line for name in order for line in head[name] + samples[name]) + "\n"


def render_fleet_prometheus(doc: FleetSummary | dict, host_docs: dict[str, Summary | dict]) -> str:
    """Every host's gauges labelled with the group, then the fleet's own gauges."""
    doc = FleetSummary.of(doc)
    g = f'group="{prom_label(doc.group)}"'
    merged = merge_prometheus([render_prometheus(host_docs[h.host]) for h in doc.hosts], g)
    ts = datetime.fromisoformat(doc.finished_at).timestamp()
    fleet = [
        ("mtp_remote_fleet_hosts", "Hosts the fleet nightly ran on.", len(doc.hosts)),
        ("mtp_remote_fleet_hosts_failed", "Hosts of the fleet whose nightly could not be done.",
         len(doc.could_not_run)),
        ("mtp_remote_fleet_hosts_corrupt", "Hosts where a speculative profile corrupts output or did not launch.",
         len(doc.corrupt_hosts)),
        ("mtp_remote_fleet_disagreements", "Verdicts on which some hosts disagree with the majority.",
         len(doc.disagreements)),
        ("mtp_remote_fleet_exit_code", "Exit code of the fleet nightly (the most severe of its hosts': 2, 1, 3, 0).",
         doc.exit_code),
        ("mtp_remote_fleet_last_run_timestamp_seconds", "End of the last fleet nightly (Unix time, seconds).",
         f"{ts:.3f}"),
    ]
    lines = [x for name, help_text, value in fleet
             for x in (f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{g}}} {value}")]
    return merged + "\n".join(lines) + "\n"


def write_fleet_ci_outputs(doc: FleetSummary | dict, host_docs: dict[str, Summary | dict], fleet_dir: Path) -> None:
    (fleet_dir / "junit.xml").write_text(render_fleet_junit(doc))
    (fleet_dir / "metrics.prom").write_text(render_fleet_prometheus(doc, host_docs))
