"""Command builders: every value quoted, secrets masked."""

from __future__ import annotations

import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.remote.commands import mask_argv, server_argv, server_env


def _playbook(**kw) -> Playbook:
    data = dict(name="t", base_flags="--tp-size 2 --api-key s3cr3t-key", profiles={
        "baseline": {"flags": ""}, "mtp": {"flags": "--speculative-algorithm NEXTN --speculative-num-steps 3"}},
        prompts=[{"id": "a", "text": "What is 2+2?"}])
    data.update(kw)
    return Playbook.model_validate(data)


def test_server_argv_binds_loopback_and_takes_model_and_port_from_the_host():
    host = HostConfig(name="h", address="gpu", model_path="/models/Qwen3.6-27B", port=30123)
    argv = server_argv(host, _playbook(), "mtp")
    assert argv[:2] == ["--model-path", "/models/Qwen3.6-27B"]
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "30123"]
    assert "--speculative-algorithm" in argv and "NEXTN" in argv


def test_masking_covers_both_flag_spellings():
    assert mask_argv(["--api-key", "k1", "--api-key=k2", "--port", "1"]) == [
        "--api-key", "***", "--api-key=***", "--port", "1"]


def test_sim_hosts_get_their_own_gpu_state_directory():
    host = HostConfig(name="s", transport="local", engine="sim", env={"SGLANG_SIM_FAULTS": "state_leak"})
    env = server_env(host, _playbook(), "mtp", "/home/u/.mtp-remote/hosts/s")
    assert env == {"SGLANG_SIM_STATE_DIR": "/home/u/.mtp-remote/hosts/s/sim-gpus", "SGLANG_SIM_FAULTS": "state_leak"}


@pytest.mark.parametrize("argv,masked,secret", [
    (["--api-ke", "k1"], ["--api-ke", "***"], "k1"),
    (["--api-k=k2"], ["--api-k=***"], "k2"),
    (["--admin-api-key", "k3", "--tp", "2"], ["--admin-api-key", "***", "--tp", "2"], "k3"),
    (["--api-", "k4"], ["--api-", "***"], "k4"),
])
def test_masking_covers_prefixes_argparse_expands(argv, masked, secret):
    from mtp_remote.remote.commands import api_key_of, secrets_of

    assert mask_argv(argv) == masked
    assert secrets_of(argv, {}) == [secret]
    if argv[0].startswith("--api-"):
        assert api_key_of(argv) == secret


def test_every_env_value_but_harmless_ones_counts_as_a_secret():
    from mtp_remote.remote.commands import secrets_of

    assert sorted(secrets_of([], {"DB_PASSWD": "hunter22", "MY_THING": "opaque-value", "CUDA_VISIBLE_DEVICES": "0",
                                  "N": "16"})) == ["hunter22", "opaque-value"]
