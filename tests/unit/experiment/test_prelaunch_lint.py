"""A misspelled SGLang flag in a playbook is refused before anything is launched (it used to fail only at the
speculative profile's startup, after the whole baseline), and only a near miss of a known flag is refused: a
flag no table knows without one may belong to a newer release."""

from __future__ import annotations

import sys

import pytest
import yaml

from mtp_remote.errors import ConfigError
from mtp_remote.experiment import diagnose as api
from mtp_remote.lint.lint import misspelled_flags
from tests.conftest import ROOT


@pytest.mark.parametrize("flags,expected", [
    (["--speculative-num-stepz", "3"], [("--speculative-num-stepz", "--speculative-num-steps")]),
    (["--mem-fraction-statc", "0.8"], [("--mem-fraction-statc", "--mem-fraction-static")]),
    (["--speculative-num-steps", "3", "--tp", "2"], []),  # a real flag and a unique prefix
    (["--brand-new-flag", "1"], []),  # unknown, but no near spelling: maybe a newer release's
    (["--cuda-graph-max-bs", "8"], []),  # a flag in 0.5.10, an ambiguous prefix in 0.5.23: not a typo
])
def test_only_near_misses_of_a_known_flag_are_misspellings(flags, expected):
    found = misspelled_flags(["--model-path", "/models/m", *flags])
    assert [(f["flag"], f["suggestion"]) for f in found] == expected


@pytest.mark.parametrize("where,field", [("mtp", "profiles.mtp.flags"), ("base", "base_flags")])
def test_diagnose_refuses_a_misspelled_flag_before_any_launch(tmp_path, where, field):
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    if where == "base":
        pb["base_flags"] = pb["base_flags"] + " --mem-fraction-statc 0.8"
    else:
        pb["profiles"]["mtp"]["flags"] = pb["profiles"]["mtp"]["flags"].replace("--speculative-num-steps",
                                                                                 "--speculative-num-stepz")
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    inv = {"default_host": "sim", "hosts": {"sim": {"transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"),
                             "port": 1, "python": sys.executable}}}
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    with pytest.raises(ConfigError) as e:
        api.diagnose(inventory=str(tmp_path / "inv.yaml"), playbook=str(tmp_path / "pb.yaml"),
                     runs_dir=tmp_path / "runs")
    assert e.value.field == field and e.value.file == str(tmp_path / "pb.yaml")
    assert "did you mean" in e.value.message
    assert not (tmp_path / "runs").exists() and not (tmp_path / "wd").exists(), "nothing was started or written"
