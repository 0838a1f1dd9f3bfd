"""Every input file is read within a size bound and parsed within a depth bound, through the real CLI: ``/dev/zero``
and ten thousand nested brackets are one clear error each (exit 2), never the machine's memory or a
``RecursionError`` traceback; a YAML merge key (``<<:``) works in a playbook; ``--api-key`` given twice sends
the last, as SGLang (argparse) keeps it."""

from __future__ import annotations

import json
import textwrap
import time

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote import files
from mtp_remote.cli.main import main
from mtp_remote.config.playbook import load_playbook
from mtp_remote.errors import ConfigError
from mtp_remote.remote.commands import api_key_of, server_argv
from mtp_remote.experiment.sampling import load_samples
from tests.conftest import ROOT

DEEP = "[" * 100_000 + "]" * 100_000


def _cli(*args: str):
    r = CliRunner().invoke(main, list(args))
    assert "Traceback" not in r.output and not isinstance(r.exception, RecursionError | MemoryError), r.output
    return r


@pytest.mark.parametrize("command", ["analyze", "classify-log"])
def test_dev_zero_is_refused_at_once_with_a_clear_error(command):
    t0 = time.monotonic()
    r = _cli(command, "/dev/zero")
    assert r.exit_code == 2, r.output
    assert "/dev/zero: " in r.output and ("binary file" in r.output or "larger than 256 MiB" in r.output)
    assert time.monotonic() - t0 < 10


def test_a_file_past_the_bound_is_refused_with_the_bound_named(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 1000)
    big = tmp_path / "out.txt"
    big.write_text("x" * 2000)
    with pytest.raises(files.InputTooLarge, match="larger than 1000 bytes"):
        files.read_bounded(big, files.MAX_INPUT_BYTES)
    assert files.read_bounded(big, 2000) == b"x" * 2000


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_deeply_nested_json_to_analyze_is_a_clear_error(tmp_path, name):
    f = tmp_path / name
    f.write_text(DEEP + "\n")
    r = _cli("analyze", str(f))
    assert r.exit_code == 2, r.output
    assert "nested too deeply" in r.output


def test_deeply_nested_run_records_are_clear_errors_or_skipped(tmp_path):
    run = tmp_path / "runs" / "20261202-000000-abcd"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(DEEP)
    r = _cli("report", run.name, "--runs-dir", str(tmp_path / "runs"))
    assert r.exit_code == 2 and "nested too deeply" in r.output, r.output
    (run / "samples.jsonl").write_text(json.dumps({"profile": "p"}) + "\n" + DEEP + "\n")
    assert load_samples(run / "samples.jsonl") == [{"profile": "p"}]  # the deep line skipped, as a cut one


def test_deeply_nested_yaml_config_is_a_clear_error(tmp_path):
    f = tmp_path / "pb.yaml"
    f.write_text(DEEP)
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_playbook(f)


def test_a_yaml_merge_key_works_in_a_playbook_and_a_key_written_twice_is_still_refused(tmp_path):
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    mtp = pb["profiles"]["mtp"]
    profiles = textwrap.indent(yaml.safe_dump(pb.pop("profiles")), "  ").replace("  mtp:\n", "  mtp: &spec\n", 1)
    text = yaml.safe_dump(pb) + "profiles:\n" + profiles + "  mtp2:\n    <<: *spec\n    env: {X: '1'}\n"
    f = tmp_path / "pb.yaml"
    f.write_text(text)
    loaded = load_playbook(f)
    assert loaded.profiles["mtp2"].flags == loaded.profiles["mtp"].flags
    assert loaded.profiles["mtp2"].env == {"X": "1"} and loaded.profiles["mtp"].env == (mtp.get("env") or {})
    f.write_text(text.replace("    env: {X: '1'}\n", "    env: {X: '1'}\n    env: {X: '2'}\n", 1))
    with pytest.raises(ConfigError, match="duplicate key 'env'"):
        load_playbook(f)


def test_an_api_key_given_twice_sends_the_last_as_sglang_uses_it(tmp_path):
    from mtp_remote.config.inventory import HostConfig

    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb["base_flags"] += " --api-key first-key"
    pb["profiles"]["mtp"]["flags"] += " --api-key=second-key"
    f = tmp_path / "pb.yaml"
    f.write_text(yaml.safe_dump(pb))
    host = HostConfig(transport="local", engine="sim", model_path="/m", port=30000)
    argv = server_argv(host, load_playbook(f), "mtp")
    assert api_key_of(argv) == "second-key"
    assert api_key_of(["--api-key", "a", "--api-ke", "b"]) == "b"
