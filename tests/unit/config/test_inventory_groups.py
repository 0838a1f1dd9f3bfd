"""Inventory groups: `-H GROUP` or `-H a,b,c` expand to host names; bad groups are refused at load."""

from __future__ import annotations

import pytest
import yaml

from mtp_remote.config.inventory import load_inventory
from mtp_remote.errors import ConfigError


def inv(tmp_path, groups):
    hosts = {n: {"transport": "local", "engine": "sim"} for n in ("a", "b", "c")}
    p = tmp_path / "inventory.yaml"
    p.write_text(yaml.safe_dump({"default_host": "a", "hosts": hosts, "groups": groups}))
    return p


def test_groups_and_comma_lists_expand_in_order_without_duplicates(tmp_path):
    i = load_inventory(inv(tmp_path, {"rack": ["c", "a"]}))
    assert i.expand("rack") == ["c", "a"]
    assert i.expand("b,rack,a") == ["b", "c", "a"]
    assert i.expand(None) == ["a"]


def test_an_unknown_name_names_the_hosts_and_groups(tmp_path):
    i = load_inventory(inv(tmp_path, {"rack": ["a"]}))
    with pytest.raises(ConfigError, match="unknown host or group 'z'; hosts: a, b, c; groups: rack"):
        i.expand("a,z")


@pytest.mark.parametrize("groups,msg", [({"rack": ["a", "x"]}, "unknown hosts"), ({"rack": []}, "is empty"),
                                        ({"a": ["b"]}, "differ from every host name")])
def test_bad_groups_are_refused_at_load(tmp_path, groups, msg):
    with pytest.raises(ConfigError, match=msg):
        load_inventory(inv(tmp_path, groups))
