"""Start-up cost of the entry points: ``--version``, ``--help`` and ``fab -l`` must not import the heavy
layers (their time is measured by ``bench/``; here the cause is pinned, which does not depend on load)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy", "numpy", "httpx", "pydantic", "jinja2", "matplotlib", "paramiko", "mtp_remote.experiment.diagnose",
         "mtp_remote.experiment.runner", "rich.progress")


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m in HEAVY)


def test_cli_help_and_version_import_no_heavy_module():
    for argv in (["--version"], ["--help"], ["analyze", "--help"], ["diagnose", "--help"]):
        mods = _modules_after(
            "from mtp_remote.cli.main import main\n"
            f"try:\n    main({argv!r}, standalone_mode=False)\nexcept SystemExit:\n    pass")
        assert _heavy(mods) == [], argv


def test_fabric_task_list_imports_no_heavy_module_beyond_fabric():
    mods = _modules_after("import mtp_remote.cli.tasks")
    assert _heavy(mods) == []
    assert "invoke" in mods


def test_deferred_api_still_exposes_the_defaults():
    from mtp_remote.cli import lazy as entry
    from mtp_remote.config import paths
    from mtp_remote.experiment import diagnose as api

    assert entry.api() is api
    assert api.DEFAULT_INVENTORY == paths.DEFAULT_INVENTORY == "inventory.yaml"
