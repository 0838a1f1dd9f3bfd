"""Fabric tasks (``fab -l`` lists them). Thin wrappers over :mod:`mtp_remote.api`, like the click CLI.

``fab -H NAME diagnose`` reads NAME as a host of ``inventory.yaml`` (Fabric hands the task an unopened
``Connection`` whose ``.host`` is that name; mtp-remote opens its own, with the inventory's SSH settings and
host-key policy). Without ``-H`` the inventory's default host is used. Errors end the task with one red line
and the exit code (0 healthy, 1 corrupt or failed profile, 2 run could not be done).
"""

from __future__ import annotations

from invoke import task
from invoke.exceptions import Exit
from rich.console import Console

from . import api
from .errors import MtpRemoteError


def _host_name(c) -> str | None:
    """The inventory host named by ``fab -H``, or None for the default host."""
    host = getattr(c, "host", None)
    return host or None


def _fail(e: MtpRemoteError) -> Exit:
    console = Console(stderr=True)
    console.print(f"[bold red]error:[/] {e}", highlight=False)
    if e.evidence:
        console.print(e.evidence, style="dim", highlight=False, markup=False)
    return Exit(code=e.exit_code)


@task(help={"playbook": "playbook YAML (default playbooks/diagnose-mtp.yaml)",
            "inventory": "inventory YAML (default inventory.yaml)",
            "profile": "only this speculative profile (baseline always runs)",
            "samples": "override samples per prompt per temperature",
            "resume": "continue run RUN_ID without re-requesting stored samples",
            "runs_dir": "where run directories go (default runs/)"})
def diagnose(c, playbook=api.DEFAULT_PLAYBOOK, inventory=api.DEFAULT_INVENTORY, profile=None, samples=None,
             resume=None, runs_dir="runs"):
    """Run the speculative vs baseline experiment on a host and print verdicts (-H NAME from inventory)."""
    from .report.console import RichHooks, cells_table, verdict_table
    from .runner import Hooks

    console = Console()
    rh = RichHooks(console)
    hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample)
    try:
        res = api.diagnose(inventory=inventory, playbook=playbook, host=_host_name(c), runs_dir=runs_dir,
                           profiles=[profile] if profile else None, resume=resume, hooks=hooks,
                           overrides={"samples": int(samples)} if samples else None)
    except MtpRemoteError as e:
        raise _fail(e) from None
    console.print(cells_table(res.summary))
    console.print(verdict_table(res.summary))
    console.print(f"report: {res.run_dir / 'report.md'}  (exit code {res.exit_code})")
    if res.exit_code:
        raise Exit(code=res.exit_code)
