"""The host commands of ``mtp-remote``: ``preflight``, ``status``, ``stop``, ``launch``, ``logs``, ``smoke`` (click
adapters over :mod:`mtp_remote.commands.host`, run and rendered by :mod:`mtp_remote.cli.render`); ``-H a,b,c``
runs preflight/status/stop on every host at once."""

from __future__ import annotations

import shlex
import sys

import click

from ..commands.args import DEFAULT_TERM_S, LaunchArgs, LogsArgs, PreflightArgs, SmokeArgs, StatusArgs, StopArgs
from . import lazy
from .options import handle_errors, host_opt, inventory_opt, one_host_opt, playbook_opt


@click.command()
@inventory_opt
@host_opt
@playbook_opt
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@handle_errors
def preflight(inventory, host, playbook, as_json):
    """Read-only checks: SSH, python/SGLang/torch, GPUs, model, disk, port, foreign processes, flag lint."""
    sys.exit(lazy.render().run("preflight", PreflightArgs(inventory=inventory, host=host, playbook=playbook), as_json=as_json))


@click.command()
@inventory_opt
@host_opt
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handle_errors
def status(inventory, host, as_json):
    """Our server (if any), the port, GPU memory and SGLang processes we did not start."""
    sys.exit(lazy.render().run("status", StatusArgs(inventory=inventory, host=host), as_json=as_json))


@click.command()
@inventory_opt
@host_opt
@click.option("--force", is_flag=True, help="Also stop the SGLang processes we did not start that hold this host's GPU memory or port, each by PID, after listing them (others are listed and left alone).")
@click.option("--term-timeout", type=click.FloatRange(min=1), default=DEFAULT_TERM_S, show_default=True,
              help="Seconds after SIGTERM before SIGKILL (as a run's timeouts.drain_s; SGLang's drain with a request "
                   "in flight never ends, so longer only waits).")
@handle_errors
def stop(inventory, host, force, term_timeout):
    """Stop the server we started (SIGTERM, then SIGKILL) and wait for its GPU memory to be released."""
    sys.exit(lazy.render().run("stop", StopArgs(inventory=inventory, host=host, force=force, term_s=term_timeout)))


@click.command()
@inventory_opt
@one_host_opt
@playbook_opt
@click.option("--profile", required=True, help="Profile of the playbook to launch.")
@handle_errors
def launch(inventory, host, playbook, profile):
    """Launch one profile's server detached and wait until it is ready (it keeps running)."""
    sys.exit(lazy.render().run("launch", LaunchArgs(profile, inventory=inventory, host=host, playbook=playbook)))


@click.command()
@inventory_opt
@one_host_opt
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=50, show_default=True, help="Lines of tail to show.")
@handle_errors
def logs(inventory, host, follow, lines):
    """Show the log of our server (or the newest one), optionally following it."""
    lazy.render().logs(LogsArgs(inventory=inventory, host=host, follow=follow, lines=lines))


@click.command()
@inventory_opt
@one_host_opt
@playbook_opt
@click.option("--prompt", default=None, help="Prompt to send (default: the playbook's first).")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=1), default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def smoke(inventory, host, playbook, prompt, temperature, max_tokens, as_json):
    """Send one prompt to the running server and say whether its output loops (exit 1 if it does)."""
    inv = f" -i {shlex.quote(str(inventory))}" if inventory else ""
    args = SmokeArgs(f"`mtp-remote launch -H {{host}}{inv} --profile NAME`", inventory=inventory, host=host,
                     playbook=playbook, prompt=prompt, temperature=temperature, max_tokens=max_tokens)
    sys.exit(lazy.render().smoke(args, as_json=as_json))
