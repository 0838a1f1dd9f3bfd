"""report.html opens in headless Chromium without errors: the page loads, every plot decodes, nothing
fails in the console, and it renders (a screenshot is taken)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.unit.report.test_reports import run  # noqa: F401  (fixture: a diagnosed run document and its samples)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (make test installs it when run as root)")
def test_the_html_report_opens_in_a_headless_browser_without_errors(run, tmp_path):  # noqa: F811
    from mtp_remote.report.html import write_html

    doc, samples, run_dir = run
    page = write_html(doc, samples, run_dir)
    profile = ["--user-data-dir=" + str(tmp_path / "chrome")]
    dom = subprocess.run([CHROMIUM, *FLAGS, *profile, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-images-ok="true"' in dom.stdout
    assert "spec-corrupts-output" in dom.stdout
    errors = [ln for ln in dom.stderr.splitlines() if re.search(r"CONSOLE|Uncaught|ERR_FILE", ln)]
    assert errors == []
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *FLAGS, *profile, "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 20_000  # a rendered page with plots, not a blank one


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (make test installs it when run as root)")
def test_the_report_shows_counts_and_p_on_the_bars_a_per_prompt_table_split_onsets_and_readable_times(run, tmp_path):  # noqa: F811
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mtp_remote.report.html import bar_p_values, loop_rate_figure, onset_figure, onset_series, write_html

    doc, samples, run_dir = run
    fig = loop_rate_figure(doc["cells"], bar_p_values(doc))
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert "0/16" in notes and any(n.startswith("14/16\np=") for n in notes), notes
    series = onset_series(samples)
    assert list(series) == ["mtp T=0.7"] and len(series["mtp T=0.7"]) == 14
    legend = [t.get_text() for t in onset_figure({**series, "baseline T=0.7": [5]}, plt).axes[0].get_legend().get_texts()]
    assert legend == ["mtp T=0.7 (n=14)", "baseline T=0.7 (n=1)"]

    page = write_html(doc, samples, run_dir)
    profile = ["--user-data-dir=" + str(tmp_path / "chrome")]
    dom = subprocess.run([CHROMIUM, *FLAGS, *profile, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-images-ok="true"' in dom
    started = re.search(r'<span id="started">([^<]*)</span>', dom).group(1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", started), started
    table = dom.split('id="per-prompt"', 1)[1].split("</table>", 1)[0]
    assert "<th>baseline T=0.7</th>" in table and "<th>mtp T=0.7</th>" in table
    assert re.findall(r"<td>(p\d)</td>", table) == ["p0", "p1", "p2", "p3"]
    assert "4/4" in table and "0/4" in table
