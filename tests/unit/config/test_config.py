"""Config loading: unknown fields and bad values name the file, the field and the valid choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtp_remote.config.inventory import load_inventory
from mtp_remote.config.playbook import load_playbook
from mtp_remote.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def test_the_shipped_inventory_and_field_playbook_load():
    inv = load_inventory(ROOT / "inventory.yaml")
    assert inv.default_host == "sim-local"
    assert inv.get(None).env["SGLANG_SIM_FAULTS"] == "state_leak"
    assert "SGLANG_SIM_FAULTS" not in inv.get("sim-healthy").env
    pb = load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml")
    assert pb.profile_order() == ["baseline", "mtp"]
    assert pb.base_flags == ["--tp-size", "2", "--mem-fraction-static", "0.88", "--context-length", "32768",
                             "--max-running-requests", "16", "--mamba-full-memory-ratio", "0.5",
                             "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder"]
    assert pb.profiles["mtp"].flags == ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                                        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    assert pb.temperatures == [0.0, 0.7]
    assert any(p.text == "What is 2+2?" for p in pb.prompts)
    assert pb.max_running_requests() == 16


def test_an_unknown_field_names_file_and_field(tmp_path):
    f = tmp_path / "inv.yaml"
    f.write_text("default_host: a\nhosts:\n  a:\n    transport: local\n    engine: sim\n    prot: 1\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(f)
    assert str(f) in str(e.value) and "hosts.a.prot" in str(e.value) and "unknown field" in str(e.value)


def test_a_bad_choice_names_the_valid_ones(tmp_path):
    f = tmp_path / "inv.yaml"
    f.write_text("default_host: a\nhosts:\n  a:\n    transport: telnet\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(f)
    assert "hosts.a.transport" in str(e.value) and "'ssh'" in str(e.value) and "'local'" in str(e.value)


def test_an_unknown_host_lists_the_hosts():
    inv = load_inventory(ROOT / "inventory.yaml")
    with pytest.raises(ConfigError, match="choose one of: real-cpu, real-hybrid, real-hybrid-leak, real-hybrid-loop, real-hybrid-overaccept, sim-container, sim-healthy, sim-image, sim-local"):
        inv.get("gpu-9")


def test_a_baseline_with_speculative_flags_is_refused(tmp_path):
    f = tmp_path / "pb.yaml"
    f.write_text("name: x\nprofiles:\n  baseline:\n    flags: --speculative-algorithm EAGLE\n"
                 "prompts:\n  - {id: a, text: hi}\n")
    with pytest.raises(ConfigError, match="must not have --speculative"):
        load_playbook(f)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_playbook(tmp_path / "nope.yaml")


# -- no shell from config (issue 13.1) -------------------------------------------------------------------

PB_HEAD = "name: x\nprompts:\n  - {id: a, text: hi}\n"


def _pb(tmp_path, body: str) -> Path:
    f = tmp_path / "pb.yaml"
    f.write_text(PB_HEAD + body)
    return f


def _inv(tmp_path, host_body: str) -> Path:
    f = tmp_path / "inv.yaml"
    f.write_text("default_host: a\nhosts:\n  a:\n    transport: local\n    engine: sim\n" + host_body)
    return f


@pytest.mark.parametrize("name", ["NAME=x; touch /tmp/pwned; Y", "A B", "1ABC", "A-B", "$(id)", "A\nB", ""])
def test_an_env_name_that_is_not_a_shell_name_is_refused_in_playbook_and_inventory(tmp_path, name):
    import json

    f = _pb(tmp_path, f"profiles:\n  baseline:\n    env: {{{json.dumps(name)}: v}}\n")
    with pytest.raises(ConfigError) as e:
        load_playbook(f)
    assert str(f) in str(e.value) and "profiles.baseline.env" in str(e.value)
    assert "must match" in str(e.value)
    g = _inv(tmp_path, f"    env: {{{json.dumps(name)}: v}}\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(g)
    assert str(g) in str(e.value) and "hosts.a.env" in str(e.value)


@pytest.mark.parametrize("flags", ["--port 1", "--port=1", "--po 1", "--host=0.0.0.0", "--ho 0.0.0.0",
                                   "--model-path /x", "--model /x", "--model-p=/x", "--config c.yaml",
                                   "--conf=c.yaml", "--tp-size 2 --port=9"])
def test_flags_the_tool_sets_itself_are_refused_in_any_spelling(tmp_path, flags):
    f = _pb(tmp_path, f"profiles:\n  baseline:\n    flags: {flags}\n")
    with pytest.raises(ConfigError) as e:
        load_playbook(f)
    assert str(f) in str(e.value) and "profiles.baseline.flags" in str(e.value)
    assert "set by mtp-remote" in str(e.value)
    g = _pb(tmp_path, f"base_flags: {flags}\nprofiles:\n  baseline: {{}}\n")
    with pytest.raises(ConfigError, match="base_flags"):
        load_playbook(g)


def test_ordinary_flags_that_merely_start_like_owned_ones_are_kept(tmp_path):
    pb = load_playbook(_pb(tmp_path, "base_flags: --model-impl sglang --hostname-x 1 --port-range 5\n"
                                     "profiles:\n  baseline: {}\n"))
    assert pb.base_flags == ["--model-impl", "sglang", "--hostname-x", "1", "--port-range", "5"]


@pytest.mark.parametrize("name", ["a;b", "../x", "-x", ".hidden", "a b", "x" * 65, "ü"])
def test_profile_and_host_names_must_be_safe_words(tmp_path, name):
    import json

    with pytest.raises(ConfigError, match="must match"):
        load_playbook(_pb(tmp_path, f"baseline: {json.dumps(name)}\nprofiles:\n  {json.dumps(name)}: {{}}\n"))
    f = tmp_path / "inv.yaml"
    f.write_text(f"default_host: {json.dumps(name)}\nhosts:\n  {json.dumps(name)}:\n    transport: local\n")
    with pytest.raises(ConfigError, match="must match"):
        load_inventory(f)


@pytest.mark.parametrize("field,value", [("workdir", "/tmp/a\nb"), ("model_path", "-rf"), ("python", "py\0x"),
                                         ("workdir", "")])
def test_paths_with_line_breaks_nul_or_a_leading_dash_are_refused(tmp_path, field, value):
    import json

    f = _inv(tmp_path, f"    {field}: {json.dumps(value)}\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(f)
    assert f"hosts.a.{field}" in str(e.value)


def test_duplicate_yaml_keys_are_refused_with_their_line(tmp_path):
    f = _pb(tmp_path, "samples: 2\nsamples: 9\nprofiles:\n  baseline: {}\n")
    with pytest.raises(ConfigError, match="duplicate key 'samples'") as e:
        load_playbook(f)
    assert str(f) in str(e.value)


@pytest.mark.parametrize("body,field", [("temperatures: [.nan]", "temperatures"), ("temperatures: [.inf]", "temperatures"),
                                        ("samples: 100000000", "samples"), ("top_p: .nan", "top_p"),
                                        ("compare: {alpha: .nan}", "compare.alpha")])
def test_non_finite_numbers_and_unbounded_samples_are_refused(tmp_path, body, field):
    f = _pb(tmp_path, body + "\nprofiles:\n  baseline: {}\n")
    with pytest.raises(ConfigError) as e:
        load_playbook(f)
    assert field in str(e.value)


def test_a_config_path_that_never_ends_is_not_read_whole(tmp_path):
    import time

    t0 = time.monotonic()
    with pytest.raises(ConfigError) as e:
        load_inventory("/dev/zero")
    assert time.monotonic() - t0 < 10 and "/dev/zero" in str(e.value)  # read whole, it never ends


def test_run_ids_are_checked_like_names():
    from mtp_remote.config.validation import check_run_id

    assert check_run_id("20261130-141850-9b44") == "20261130-141850-9b44"
    for bad in ("../x", "a;b", "", "-x", "a/b"):
        with pytest.raises(ValueError):
            check_run_id(bad)


def test_env_values_are_masked_unless_harmless():
    from mtp_remote.config.inventory import HostConfig

    h = HostConfig(name="h", transport="local", env={"DB_PASSWD": "hunter22", "GH_TOKEN_RO": "ghp_x",
                                                      "CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_SIM_FAULTS": "state_leak",
                                                      "NCCL_P2P_DISABLE": "1", "ODD": "true"})
    assert h.masked_env() == {"DB_PASSWD": "***", "GH_TOKEN_RO": "***", "CUDA_VISIBLE_DEVICES": "0,1",
                              "SGLANG_SIM_FAULTS": "state_leak", "NCCL_P2P_DISABLE": "1", "ODD": "true"}


@pytest.mark.parametrize("text, field, said", [
    ("default_host: nope\nhosts:\n  a: {transport: local, engine: sim}\n", "default_host",
     "default_host 'nope' is not a host; choose one of ['a']"),
    ("default_host: a\nhosts:\n  a: {transport: local, engine: sim}\ngroups:\n  g: [a, zz]\n", "groups.g",
     "group 'g' names unknown hosts ['zz']; choose from ['a']"),
    ("default_host: a\nhosts:\n  'a b': {transport: local, engine: sim}\n", "hosts.a b", "host name 'a b' must match"),
])
def test_a_whole_file_check_names_the_field_it_is_about(tmp_path, text, field, said):
    """These checks see the whole file (pydantic gives them no location): the error said `(file)` where the
    field was plain from the check itself."""
    f = tmp_path / "inventory.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_inventory(f)
    assert e.value.field == field and str(e.value).startswith(f"{f}: {field}: {said}"), str(e.value)


def test_a_whole_file_playbook_check_names_the_field(tmp_path):
    import yaml

    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb["baseline"] = "nope"
    f = tmp_path / "pb.yaml"
    f.write_text(yaml.safe_dump(pb))
    with pytest.raises(ConfigError) as e:
        load_playbook(f)
    assert e.value.field == "baseline" and ": baseline: baseline 'nope' is not a profile; choose one of" in str(e.value)


@pytest.mark.parametrize("body,where", [("profiles: [a\n  b: 1\n", "line 2, column 4"),
                                        ('name: "unclosed\n', "line 2, column 1"),
                                        ("name: x\n\tsamples: 2\n", "line 2, column 1")])
def test_a_broken_yaml_names_its_file_and_line_not_a_unicode_string(tmp_path, body, where):
    f = tmp_path / "broken.yaml"
    f.write_text(body)
    with pytest.raises(ConfigError) as e:
        load_playbook(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: {where}: not valid YAML: ")
    assert "<unicode string>" not in msg and "\n" not in msg
