"""`smoke` during a diagnose: the one prompt used to join the run's experiment (its speeds) and, still in flight
when the run stopped the server, held that stop in SGLang's endless drain for timeouts.drain_s (30 s measured).
It now takes the host lock: refused, naming the run, while the run holds it; sent once it is released. The sim
as a real process (local transport, a free port, a workdir in tmp)."""

from __future__ import annotations

import sys

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli import main
from mtp_remote.config import load_inventory
from mtp_remote.ops import lifecycle
from mtp_remote.remote import connect as transport
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim


def test_smoke_is_refused_while_a_run_holds_the_host_and_sent_once_it_is_free(tmp_path):
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "sim", "hosts": {"sim": {
        "transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
        "python": sys.executable, "env": {"SGLANG_SIM_TIME_SCALE": "0.01"}}}}))
    pb = str(ROOT / "playbooks" / "diagnose-mtp.yaml")
    cli = CliRunner()
    r = cli.invoke(main, ["launch", "-i", str(inv), "-p", pb, "--profile", "baseline"])
    assert r.exit_code == 0, r.output
    try:
        host = load_inventory(inv).get("sim")
        run = lifecycle(transport.connect(host), host, sys.executable, run_id="20261201-000000-diag")
        run.acquire_lock("ops@elsewhere")  # as a diagnose holds it while it samples this server
        log = next((tmp_path / "wd" / "logs").rglob("baseline.log"))
        requests_before = log.read_text().count("POST /generate")
        refused = cli.invoke(main, ["smoke", "-i", str(inv), "-p", pb])
        assert refused.exit_code == 2, refused.output
        assert "host is locked by ops@elsewhere (run 20261201-000000-diag" in refused.stderr
        assert log.read_text().count("POST /generate") == requests_before  # nothing reached the run's server
        run.release_lock()
        sent = cli.invoke(main, ["smoke", "-i", str(inv), "-p", pb, "--max-tokens", "64"])
        assert sent.exit_code in (0, 1), sent.output  # ok or loops: the prompt was answered
        assert log.read_text().count("POST /generate") == requests_before + 1
        assert not (tmp_path / "wd" / "lock").exists()  # smoke released the lock it took
    finally:
        cli.invoke(main, ["stop", "-i", str(inv)])

