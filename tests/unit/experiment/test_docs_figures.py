"""Figures the docs state about the shipped configuration are the plan's own: the demo's request count in
docs/PERFORMANCE.md is what ``fab diagnose`` on sim-local plans (its opening line's "N requests planned")."""

from __future__ import annotations

import re

from mtp_remote.config.inventory import load_inventory
from mtp_remote.config.playbook import load_playbook
from mtp_remote.experiment.plan import plan_run
from tests.conftest import ROOT


def test_the_demo_request_count_in_performance_md_is_the_planned_one():
    text = (ROOT / "docs" / "PERFORMANCE.md").read_text()
    section = text.split("## End to end (`make demo`)", 1)[1].split("\n## ", 1)[0]
    stated = int(re.search(r"= (\d+) requests", section).group(1))
    inv = load_inventory(ROOT / "inventory.yaml")
    host = inv.get(inv.default_host)
    plan = plan_run(host, load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml"), host.workdir)
    assert stated == sum(len(lp.requests) for lp in plan) == 50
