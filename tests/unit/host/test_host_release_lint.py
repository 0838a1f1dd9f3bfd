"""Everything that lints for a host lints with that host's SGLang release: ``preflight`` on a sim host reads
the release the sim imitates (0.5.9 unless its ``SGLANG_SIM_VERSION`` says otherwise), so the release's own
notes appear (0.5.9 turns the radix cache off by itself for speculation on Qwen3.5-family models) and the
lint row names the table it used. Before, a sim host's preflight linted with the newest table (0.5.23)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mtp_remote.cli.main import main
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


def test_preflight_lists_each_foreign_process_on_its_own_line_with_whole_arguments_and_its_port(tmp_path):
    from tests.support.fake_server import spawn_fake_server

    port = free_port()
    long_args = ("--model-path", "/models/" + "qwen3-next-80b-a3b-instruct-" * 4, "--tp-size", "4",
                 *[w for i in range(12) for w in (f"--flag-number-{i}", str(i))])
    p = spawn_fake_server(port, args=long_args)
    try:
        r = CliRunner().invoke(main, ["preflight", "-i", str(_inventory(tmp_path, None)), "--json"])
    finally:
        p.kill()
        p.wait()
    detail = next(ch for ch in json.loads(r.stdout) if ch["name"] == "foreign-processes")["detail"]
    lines = detail.split("\n")
    assert all(ln.startswith("PID ") for ln in lines), lines  # one process a line, not one "; "-joined blob
    mine = next(ln for ln in lines if ln.startswith(f"PID {p.pid} "))
    assert f"--port {port}" in mine and "--model-path /models/qwen3" in mine and "more argument" in mine
