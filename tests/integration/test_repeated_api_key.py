"""``--api-key`` in the base flags and again in a profile: the simulated server (argparse, as SGLang) keeps the
last one, and so does every request the tool sends to it — ``smoke`` through the real CLI gets answers, not 401."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim


def test_an_api_key_given_twice_is_sent_as_the_server_takes_it_the_last(tmp_path):
    inv, pb = write_config(tmp_path, None)
    data = yaml.safe_load(open(pb))
    data["base_flags"] += " --api-key first-key"
    data["profiles"]["mtp"]["flags"] += " --api-key second-key"
    yaml.safe_dump(data, open(pb, "w"))
    try:
        r = CliRunner().invoke(main, ["launch", "-i", inv, "-p", pb, "--profile", "mtp"])
        assert r.exit_code == 0, r.output
        r = CliRunner().invoke(main, ["smoke", "-i", inv, "-p", pb, "--json", "--max-tokens", "64"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["completion_tokens"] > 0
        assert "first-key" not in r.output and "second-key" not in r.output
    finally:
        r = CliRunner().invoke(main, ["stop", "-i", inv])
    assert "stopped PID" in r.output, r.output
