"""The stop a failed launch or a cut stop prints keeps the operator's own `-i INVENTORY` (issue 30: the fix lines
dropped it, so the printed stop read the default inventory: "unknown host")."""

from __future__ import annotations

import shlex

from mtp_remote.config.inventory import HostConfig
from mtp_remote.host.ops import stop_again


def test_the_printed_stop_names_the_inventory_it_was_given():
    host = HostConfig(name="gpu-b", address="10.0.0.2")
    line = stop_again(host, "/srv/ops/my inventory.yaml")
    cli, fab = (shlex.split(part) for part in line.split("`")[1::2])
    assert cli == ["mtp-remote", "stop", "-H", "gpu-b", "-i", "/srv/ops/my inventory.yaml"]
    assert fab == ["fab", "-H", "gpu-b", "stop", "--inventory", "/srv/ops/my inventory.yaml"]
    assert stop_again(host) == "`mtp-remote stop -H gpu-b` (or `fab -H gpu-b stop`)"
