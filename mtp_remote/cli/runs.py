"""CLI commands over the inventory and the runs on disk: ``hosts``, ``report``, ``compare`` (click adapters).

Registered by :mod:`mtp_remote.cli.main`; their bodies are in :mod:`mtp_remote.cli.views` (reached through
:mod:`mtp_remote.cli.lazy`); no network. ``--json`` prints the same data for scripts. Errors are
MtpRemoteError, turned into one red line and exit 2 by the CLI's ``handle_errors``.
"""

from __future__ import annotations

import sys

import click

from . import lazy
from .completion import complete_run_ids
from .options import inventory_opt, runs_dir_option

_runs_dir_opt = runs_dir_option()


@click.command("hosts")
@inventory_opt
@click.option("--json", "as_json", is_flag=True, help="Print the hosts as JSON.")
def hosts_cmd(inventory, as_json):
    """List the hosts of the inventory: how each is reached, engine, GPUs, port, model."""
    sys.exit(lazy.views().hosts(inventory, as_json=as_json))


@click.command("report")
@click.argument("run", required=False, default="last", metavar="[RUN_ID|last|DIR]", shell_complete=complete_run_ids)
@_runs_dir_opt
@click.option("--open", "open_it", is_flag=True, help="Open report.html in the browser.")
def report_cmd(run, runs_dir, open_it):
    """Re-render a run's report.md and report.html from its summary.json (default: the last run).

    A run that could not be done has no report: its status and cause are printed (exit 2)."""
    sys.exit(lazy.run_views().report(run, runs_dir, open_it=open_it))


@click.command("compare")
@click.argument("run_a", metavar="RUN_A", shell_complete=complete_run_ids)
@click.argument("run_b", metavar="[RUN_B]", required=False, default="last", shell_complete=complete_run_ids)
@_runs_dir_opt
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_cmd(run_a, run_b, runs_dir, as_json):
    """Compare two runs cell by cell: loop rates (Fisher), acceptance, speed (Welch, Mann-Whitney).

    RUN_A is the reference, RUN_B (default: last) the run under test; each is a run id, 'last' or a
    directory. Exit 1 when a cell of B loops significantly more than in A (one-sided p < 0.05).

    The speed tests are per sample, and a run is one launch per profile: they compare two launches, so
    launch-to-launch drift is not excluded (said under the table when a speed p is small); spec÷base, each
    arm over its own run's baseline, cancels drift of the whole host."""
    sys.exit(lazy.run_views().compare(run_a, run_b, runs_dir, as_json=as_json))
