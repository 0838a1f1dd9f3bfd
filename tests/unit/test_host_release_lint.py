"""Everything that lints for a host lints with that host's SGLang release: ``preflight`` on a sim host reads
the release the sim imitates (0.5.9 unless its ``SGLANG_SIM_VERSION`` says otherwise), so the release's own
notes appear (0.5.9 turns the radix cache off by itself for speculation on Qwen3.5-family models) and the
lint row names the table it used. Before, a sim host's preflight linted with the newest table (0.5.23)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mtp_remote.cli import main
from tests.conftest import ROOT, free_port


def _inventory(tmp_path, version: str | None):
    env = f"    env:\n      SGLANG_SIM_VERSION: \"{version}\"\n" if version else ""
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"default_host: box\nhosts:\n  box:\n    transport: local\n    engine: sim\n"
                   f"    workdir: {tmp_path / 'wd'}\n    port: {free_port()}\n    model_path: /models/Qwen3.6-27B\n{env}")
    return inv


def _lint_rows(tmp_path, version):
    r = CliRunner().invoke(main, ["preflight", "-i", str(_inventory(tmp_path, version)), "-p",
                                  str(ROOT / "playbooks" / "diagnose-mtp.yaml"), "--json"])
    checks = json.loads(r.stdout)
    sglang = next(ch for ch in checks if ch["name"] == "sglang")
    return sglang, [ch for ch in checks if ch["name"].startswith("lint:")]


def test_preflight_on_a_sim_host_lints_with_the_release_it_imitates_and_shows_its_notes(tmp_path):
    sglang, rows = _lint_rows(tmp_path, None)
    assert "imitating SGLang 0.5.9" in sglang["detail"]
    notes = [r["detail"] for r in rows if r["name"] == "lint:mtp" and r["detail"].startswith("note:")]
    assert notes and "0.5.9 turns the radix cache off by itself" in notes[0]
    assert all("SGLang 0.5.9 flag table, the host's release" in r["detail"] for r in rows
               if not r["detail"].startswith("note:"))


def test_a_sim_host_that_imitates_a_newer_release_gets_that_releases_table_and_no_0_5_9_note(tmp_path):
    sglang, rows = _lint_rows(tmp_path, "0.5.23")
    assert "imitating SGLang 0.5.23" in sglang["detail"]
    assert not any("0.5.9" in r["detail"] for r in rows)
    assert any("SGLang 0.5.23 flag table, the host's release" in r["detail"] for r in rows)
