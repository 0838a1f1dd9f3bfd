"""One command layer under both entry points: ``fab nightly`` and ``mtp-remote nightly`` print the same verdicts and
the same regression check (the same command and renderer run under both), and every command reads its inventory
(and its playbook) once, however many steps or hosts it has. The sim runs as a real process on its own port."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim
FAB = os.path.join(os.path.dirname(sys.executable), "fab")


def _inventory(tmp_path, names=("sim-a",)) -> str:
    """Healthy local sims (time scale 0.01), each on a free port with its own workdir; a group of them all."""
    hosts = {n: {"transport": "local", "engine": "sim", "workdir": str(tmp_path / f"wd-{n}"), "port": free_port(),
                 "python": sys.executable, "env": {"SGLANG_SIM_TIME_SCALE": "0.01"}} for n in names}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"default_host": names[0], "hosts": hosts, "groups": {"all": list(names)}}))
    return str(path)


def _playbook(tmp_path) -> str:
    """The shipped nightly cut to 2 prompts x 2 samples at T=0.7 (a night of a few seconds on the sim)."""
    shipped = yaml.safe_load((ROOT / "playbooks" / "nightly.yaml").read_text())
    small = {**shipped, "samples": 2, "max_tokens": 512, "temperatures": [0.7], "prompts": shipped["prompts"][:2]}
    (tmp_path / "nightly.yaml").write_text(yaml.safe_dump(small))
    return str(tmp_path / "nightly.yaml")


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("MTP_REMOTE_INVENTORY", "MTP_REMOTE_RUNS_DIR")}


def _verdict_and_regression_lines(out: str) -> list[str]:
    """The verdict table's (profile, verdict) cells and the regression check's first line, from a nightly's
    stdout."""
    cells = []
    for line in out.splitlines():
        parts = [p.strip() for p in re.split(r"[│┃]", line)]
        if len(parts) == 6 and parts[1] not in ("profile", ""):  # profile │ verdict │ loops │ evidence
            cells.append(f"{parts[1]}: {parts[2]}")
    return cells + [line.strip() for line in out.splitlines() if line.startswith("regression check")]


def _expected_lines(runs, first_run: str) -> list[str]:
    """The same lines as the night's own summary.json has them (its verdicts, its regression check)."""
    (night,) = [p for p in runs.iterdir() if re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", p.name) and p.name != first_run]
    doc = json.loads((night / "summary.json").read_text())
    reg = doc["regression"]
    assert reg["baseline_run"] == first_run, reg
    return ([f"{v['profile']}: {v['kind']}" for v in doc["verdicts"]]
            + [f"regression check against {first_run}: "
               + ("regressed" if reg["regressed"] else "no tested regression")])


def test_fab_nightly_and_mtp_remote_nightly_print_the_same_verdict_and_regression_lines(tmp_path, monkeypatch):
    """Both second nights are checked against the same first night; each prints exactly what its summary.json
    holds, in the same lines (the speed check may differ between two nights on a loaded machine, the printing
    may not). The first night, only what both compare with, runs in-process; the two compared ones through
    their entry points."""
    inv, pb = _inventory(tmp_path), _playbook(tmp_path)
    first = tmp_path / "runs-a"
    night = [sys.executable, "-m", "mtp_remote.cli", "nightly", "-i", inv, "-p", pb, "--runs-dir"]
    for name in ("MTP_REMOTE_INVENTORY", "MTP_REMOTE_RUNS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["nightly", "-i", inv, "-p", pb, "--runs-dir", str(first)])
    assert r.exit_code in (0, 3), (r.output, r.exception)
    first_run = next(p.name for p in first.iterdir() if re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", p.name))
    shutil.copytree(first, tmp_path / "runs-b")  # both second nights compare with the same first night

    cli = subprocess.run([*night, str(tmp_path / "runs-a")], capture_output=True, text=True, env=_env(),
                         cwd=tmp_path, timeout=600)
    fab = subprocess.run([FAB, "-r", str(ROOT), "nightly", "--inventory", inv, "--playbook", pb, "--runs-dir",
                          str(tmp_path / "runs-b")], capture_output=True, text=True, env=_env(), cwd=tmp_path,
                         timeout=600)
    assert cli.returncode in (0, 1, 3) and fab.returncode in (0, 1, 3), cli.stderr + fab.stderr
    cli_lines, fab_lines = _verdict_and_regression_lines(cli.stdout), _verdict_and_regression_lines(fab.stdout)
    assert cli_lines == _expected_lines(tmp_path / "runs-a", first_run), cli.stdout
    assert fab_lines == _expected_lines(tmp_path / "runs-b", first_run), fab.stdout  # fab printed no check before
    assert [x.split(": ")[0] for x in cli_lines] == [x.split(": ")[0] for x in fab_lines]
    assert any(x.startswith("mtp: ") for x in cli_lines), cli.stdout


class _Opens:
    """Counts the files opened under ``paths`` (an audit hook: every read of the inventory or the playbook, by
    whichever module, goes through ``open``)."""

    def __init__(self):
        self.paths: dict[str, int] = {}
        self.on = False
        sys.addaudithook(self.hook)

    def hook(self, event, args) -> None:
        if self.on and event == "open" and isinstance(args[0], (str, os.PathLike)):
            p = os.path.realpath(os.fspath(args[0]))
            if p in self.paths:
                self.paths[p] += 1

    def count(self, argv: list[str], *files: str) -> list[int]:
        self.paths = {os.path.realpath(f): 0 for f in files}
        self.on = True
        try:
            r = CliRunner().invoke(main, argv)
        finally:
            self.on = False
        assert r.exit_code in (0, 1, 3), (argv, r.output, r.exception)
        return [self.paths[os.path.realpath(f)] for f in files]


def test_each_command_reads_its_inventory_and_its_playbook_once(tmp_path, monkeypatch):
    monkeypatch.delenv("MTP_REMOTE_INVENTORY", raising=False)
    inv, pb = _inventory(tmp_path, ("sim-a", "sim-b")), _playbook(tmp_path)
    runs = str(tmp_path / "runs")
    opens = _Opens()
    try:
        assert opens.count(["status", "-i", inv], inv) == [1]
        assert opens.count(["status", "-i", inv, "-H", "all"], inv) == [1]  # two hosts, one read
        assert opens.count(["preflight", "-i", inv, "-p", pb], inv, pb) == [1, 1]
        assert opens.count(["diagnose", "-i", inv, "-p", pb, "--runs-dir", runs], inv, pb) == [1, 1]
        assert opens.count(["nightly", "-i", inv, "-p", pb, "--runs-dir", runs], inv, pb) == [1, 1]
    finally:
        CliRunner().invoke(main, ["stop", "-i", inv, "-H", "all"])
