"""Issue 33 minor: YAML 1.1 silently changed environment values (``no`` -> "0", ``010`` -> "8", ``12:30`` ->
"750", an empty value -> "None"). An ``env`` value is now the text as written, in the inventory and in a
playbook's profiles."""

from __future__ import annotations

from mtp_remote.config.inventory import load_inventory
from mtp_remote.config.playbook import load_playbook

ENV = "      A: no\n      B: 010\n      C: 12:30\n      D:\n      E: 0.01\n      F: 'quoted'\n      G: true\n"
EXPECTED = {"A": "no", "B": "010", "C": "12:30", "D": "", "E": "0.01", "F": "quoted", "G": "true"}


def test_inventory_env_values_are_the_text_as_written(tmp_path):
    inv = tmp_path / "inventory.yaml"
    inv.write_text("default_host: h\nhosts:\n  h:\n    transport: local\n    engine: sim\n    env:\n"
                   + ENV.replace("      ", "      "))
    assert load_inventory(inv).get(None).env == EXPECTED


def test_playbook_profile_env_values_are_the_text_as_written(tmp_path):
    pb = tmp_path / "pb.yaml"
    pb.write_text("name: p\nprofiles:\n  baseline: {}\n  mtp:\n    flags: --speculative-algorithm NEXTN\n    env:\n"
                  + ENV.replace("      ", "      ") + "prompts:\n  - {id: a, text: q}\n")
    assert load_playbook(pb).profiles["mtp"].env == EXPECTED
