"""Machine outputs for CI and monitoring: ``junit.xml`` (one test case per speculative profile) and
``metrics.prom`` (Prometheus text exposition, for a node-exporter textfile collector).

A run that could not be done (``status`` ``failed``/``interrupted`` in the document) gives one failing test
case ``run`` carrying the cause, and ``mtp_remote_up 0`` / ``mtp_remote_run_failed 1``; every run exports
``mtp_remote_last_run_timestamp_seconds`` (end of the run, Unix seconds) and ``mtp_remote_exit_code``, so an
alert can fire on a night that failed *and* on a night that never ran (a stale timestamp). Per cell, acceptance
length and tokens/s come twice: over all samples and over the non-looping ones (``*_nonloop``): loops inflate
both, so over all samples a corrupt arm looks fastest. A nightly
regression check (the summary's ``regression``) adds one failing case per regression.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from xml.etree import ElementTree as ET

from ..records.summary import Cause, Summary


def _failed(doc: Summary) -> bool:
    return doc.status != "completed"


def _cause(doc: Summary) -> str:
    cause = doc.cause
    if isinstance(cause, Cause):
        ev = f"\n{cause.evidence}" if cause.evidence else ""
        return f"{cause.type if 'type' in cause else 'error'}: {cause.message}{ev}"
    return str(cause or "unknown")


def _corrupt_or_down(kind: str) -> bool:
    return kind == "spec-corrupts-output" or kind.startswith(("launch-failed", "crashed", "hung"))


def render_junit(doc: Summary | dict) -> str:
    """A test suite per run; a case per verdict, failed when the profile corrupts output or did not launch."""
    doc = Summary.of(doc)
    verdicts = doc.verdicts
    failures = [v for v in verdicts if _corrupt_or_down(v.kind)]
    regressions = [c for c in (doc.regression.checks if doc.regression else []) if c.regressed]
    n_tests = len(verdicts) + int(_failed(doc)) + len(regressions)
    n_fail = len(failures) + int(_failed(doc)) + len(regressions)
    host = doc.host.name
    suite = ET.Element("testsuite", name=f"mtp-remote.{doc.playbook.name}.{host}",
                       tests=str(n_tests), failures=str(n_fail), errors="0",
                       time=f"{doc.duration_s or 0:.2f}", timestamp=doc.started_at if "started_at" in doc else "")
    if _failed(doc):
        case = ET.SubElement(suite, "testcase", classname=f"mtp-remote.{host}", name="run")
        ET.SubElement(case, "failure", message=f"run {doc.status}: {_cause(doc).splitlines()[0]}"
                      ).text = _cause(doc)
    for c in regressions:
        t = "" if c.temperature is None else f" T={c.temperature:g}"
        case = ET.SubElement(suite, "testcase", classname=f"mtp-remote.{host}.regression",
                             name=f"{c.profile}{t} {c.kind}")
        ET.SubElement(case, "failure", message=f"regression since {doc.regression.baseline_run}"
                      ).text = str({k: v for k, v in c.items() if k != "regressed"})
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"mtp-remote.{host}", name=v.profile)
        if v in failures:
            ET.SubElement(case, "failure", message=v.kind).text = v.evidence
        else:
            ET.SubElement(case, "system-out").text = f"{v.kind}: {v.evidence}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def prom_label(s: str) -> str:
    """``s`` escaped as a Prometheus label value (backslash, double quote; a line break becomes a space)."""
    return str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


_CELL_GAUGES = (
    ("mtp_remote_loop_rate", "loop_rate", "Share of samples that loop, per profile and temperature."),
    ("mtp_remote_accept_length", "accept_length", "Mean acceptance length (completion_tokens / spec_verify_ct), "
                                                  "all samples (loops inflate it)."),
    ("mtp_remote_accept_length_nonloop", "accept_length_nonloop",
     "Mean acceptance length over the samples that do not loop (compare arms on this one)."),
    ("mtp_remote_tokens_per_second", "tokens_per_s", "Mean per-request decode tokens/s, all samples (loops "
                                                     "inflate it)."),
    ("mtp_remote_tokens_per_second_nonloop", "tokens_per_s_nonloop",
     "Mean per-request decode tokens/s over the samples that do not loop (compare arms on this one)."),
)


def render_prometheus(doc: Summary | dict) -> str:
    """Gauges per cell (loop rate; acceptance length and tokens/s over all samples and over the non-looping ones:
    a looping arm's all-sample figures are inflated, so a dashboard compares arms on ``*_nonloop``) and per
    verdict (1 = corrupt)."""
    doc = Summary.of(doc)
    host, pb = prom_label(doc.host.name), prom_label(doc.playbook.name)
    who = f'host="{host}",playbook="{pb}"'
    ts = doc.finished_at or doc.started_at
    ts_s = datetime.fromisoformat(ts).timestamp() if ts else 0.0
    lines = ["# HELP mtp_remote_up 1 when the last run completed (whatever its verdicts), 0 when it could not be done.",
             "# TYPE mtp_remote_up gauge", f"mtp_remote_up{{{who}}} {0 if _failed(doc) else 1}",
             "# HELP mtp_remote_run_failed 1 when the last run failed or was interrupted before completing.",
             "# TYPE mtp_remote_run_failed gauge", f"mtp_remote_run_failed{{{who}}} {1 if _failed(doc) else 0}",
             "# HELP mtp_remote_last_run_timestamp_seconds End of the last run (Unix time, seconds).",
             "# TYPE mtp_remote_last_run_timestamp_seconds gauge",
             f"mtp_remote_last_run_timestamp_seconds{{{who}}} {ts_s:.3f}",
             "# HELP mtp_remote_exit_code Exit code of the last run (0 healthy, 1 corrupt/failed profile, 2 not done, 3 inconclusive).",
             "# TYPE mtp_remote_exit_code gauge",
             f"mtp_remote_exit_code{{{who}}} {doc.exit_code if 'exit_code' in doc else 2}"]
    if doc.regression is not None:
        n_reg = sum(1 for c in doc.regression.checks if c.regressed)
        lines += ["# HELP mtp_remote_regressions Tested regressions since the last good run.",
                  "# TYPE mtp_remote_regressions gauge", f"mtp_remote_regressions{{{who}}} {n_reg}"]
    for metric, key, help_text in _CELL_GAUGES:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for c in doc.cells:
            if getattr(c, key) is not None:
                lines.append(f'{metric}{{host="{host}",playbook="{pb}",profile="{prom_label(c.profile)}",'
                             f'temperature="{c.temperature}"}} {getattr(c, key)}')
    lines += ["# HELP mtp_remote_spec_corrupts 1 when the profile's verdict is spec-corrupts-output or launch-failed.",
              "# TYPE mtp_remote_spec_corrupts gauge"]
    for v in doc.verdicts:
        lines.append(f'mtp_remote_spec_corrupts{{host="{host}",playbook="{pb}",profile="{prom_label(v.profile)}",'
                     f'verdict="{prom_label(v.kind)}"}} {int(_corrupt_or_down(v.kind))}')
    return "\n".join(lines) + "\n"


def write_ci_outputs(doc: Summary | dict, run_dir: Path) -> None:
    (run_dir / "junit.xml").write_text(render_junit(doc))
    (run_dir / "metrics.prom").write_text(render_prometheus(doc))
