"""The host's launch form: ``python -m sglang.launch_server`` or ``sglang serve`` (``entrypoint``)."""

from __future__ import annotations

import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.errors import ConfigError


def test_each_entrypoint_gives_the_words_proc_shows_after_python():
    real = HostConfig(name="g", address="gpu", entrypoint="serve")
    assert real.entry_words("/opt/sg/bin/python3") == ["/opt/sg/bin/sglang", "serve"]
    assert real.launch_words() == "sglang serve"
    assert HostConfig(name="g", address="gpu").entry_words("python3") == ["-m", "sglang.launch_server"]
    sim = HostConfig(name="s", transport="local", engine="sim", entrypoint="serve")
    assert sim.entry_words("/usr/bin/python3") == ["-m", "mtp_remote.sim", "serve"]


def test_serve_with_a_bare_python_names_the_field_to_set():
    with pytest.raises(ConfigError, match="set `python` to a path") as e:
        HostConfig(name="g", address="gpu", entrypoint="serve").entry_words("python3")
    assert e.value.field == "python"


def test_an_unknown_entrypoint_names_the_choices():
    with pytest.raises(ValueError, match="launch_server.*serve"):
        HostConfig(name="g", address="gpu", entrypoint="sglang")
