"""The host commands of ``mtp-remote``: ``preflight``, ``status``, ``stop``, ``launch``, ``logs``, ``smoke`` (click),
thin over :mod:`mtp_remote.host.ops`; ``-H a,b,c`` runs preflight/status/stop on every host at once."""

from __future__ import annotations

import json
import shlex
import sys

import click
from rich.markup import escape

from ..errors import EXIT_RUN_FAILED
from .lazy import hosts as _hosts
from .lazy import make_console
from .options import INTERRUPTS, _fleet, _host_opt, _inventory_opt, _playbook_opt, handle_errors


@click.command()
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@handle_errors
def preflight(inventory, host, playbook, as_json):
    """Read-only checks: SSH, python/SGLang/torch, GPUs, model, disk, port, foreign processes, flag lint."""
    from ..host.ops import preflight as run_preflight  # deferred: keeps --version/--help fast
    from ..report.console import checks_table  # deferred: keeps --version/--help fast

    if _fleet("preflight", inventory, host, playbook=playbook, as_json=as_json):
        return
    _, _, pb = _hosts().load_config(inventory, playbook, host)  # the host's own `playbook:` unless -p
    with _hosts().open_host(inventory, host) as (cfg, c, py):
        checks = run_preflight(c, cfg, pb, py)
    if as_json:
        click.echo(json.dumps([ch.to_dict() for ch in checks], indent=2))
    else:
        make_console().print(checks_table(cfg.name, checks))
    sys.exit(EXIT_RUN_FAILED if any(ch.status == "fail" for ch in checks) else 0)


@click.command()
@_inventory_opt
@_host_opt
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handle_errors
def status(inventory, host, as_json):
    """Our server (if any), the port, GPU memory and SGLang processes we did not start."""
    from ..host.ops import status as run_status  # deferred: keeps --version/--help fast
    from ..report.console import status_table  # deferred: keeps --version/--help fast

    if _fleet("status", inventory, host, as_json=as_json):
        return
    with _hosts().open_host(inventory, host) as (cfg, c, py):
        st = run_status(c, cfg, py)
    if as_json:
        click.echo(json.dumps(st.to_dict(), indent=2))
    else:
        make_console().print(status_table(st))


@click.command()
@_inventory_opt
@_host_opt
@click.option("--force", is_flag=True, help="Also stop the SGLang processes we did not start that hold this host's GPU memory or port, each by PID, after listing them (others are listed and left alone).")
@click.option("--term-timeout", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="Seconds after SIGTERM before SIGKILL (as a run's timeouts.drain_s; SGLang's drain with a request "
                   "in flight never ends, so longer only waits).")
@handle_errors
def stop(inventory, host, force, term_timeout):
    """Stop the server we started (SIGTERM, then SIGKILL) and wait for its GPU memory to be released."""
    from ..host.ops import stop as run_stop  # deferred: keeps --version/--help fast
    from ..report.console import print_stop, progress_printer  # deferred: rich renderers

    if _fleet("stop", inventory, host, force=force, term_s=term_timeout):
        return
    console = make_console()
    with _hosts().open_host(inventory, host) as (cfg, c, py):
        res = run_stop(c, cfg, py, force=force, term_s=term_timeout, on_progress=progress_printer(console))
    print_stop(console, res)


@click.command()
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--profile", required=True, help="Profile of the playbook to launch.")
@handle_errors
def launch(inventory, host, playbook, profile):
    """Launch one profile's server detached and wait until it is ready (it keeps running)."""
    from ..experiment.runner import new_run_id  # deferred: keeps --version/--help fast
    from ..host.ops import launch as run_launch  # deferred: keeps --version/--help fast
    from ..report.console import progress_printer  # deferred: rich renderers

    _, _, pb = _hosts().load_config(inventory, playbook, host)  # the host's own `playbook:` unless -p
    console = make_console()
    with _hosts().open_host(inventory, host) as (cfg, c, py):
        outcome = run_launch(c, cfg, pb, profile, py, run_id=new_run_id(), on_progress=progress_printer(console))
    if not outcome.ok:
        from ..serving.base import raise_for_outcome  # deferred: keeps --version/--help fast

        raise_for_outcome(outcome)
    console.print(f"[green]{escape(outcome.describe())}[/]; server on {escape(cfg.name)} 127.0.0.1:{cfg.port}")


@click.command()
@_inventory_opt
@_host_opt
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=50, show_default=True, help="Lines of tail to show.")
@handle_errors
def logs(inventory, host, follow, lines):
    """Show the log of our server (or the newest one), optionally following it."""
    from ..host.ops import current_log, follow_log, server_alive  # deferred: keeps --version/--help fast

    with _hosts().open_host(inventory, host) as (cfg, c, _py):
        path, pid = current_log(c, cfg)
        click.echo(f"==> {path} <==", err=True)
        if follow and pid is None:
            click.echo("(no server of ours is running: showing the log's end, not following)", err=True)
        keep = follow and pid is not None
        # INTERRUPTS.check(): a Ctrl-C that lands in one of the loop's short commands is swallowed by Invoke
        for chunk in follow_log(c, path, lines=lines,
                                until=lambda: INTERRUPTS.check() or not keep or not server_alive(c, pid)):
            click.echo(chunk, nl=not keep)


@click.command()
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--prompt", default=None, help="Prompt to send (default: the playbook's first).")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=1), default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def smoke(inventory, host, playbook, prompt, temperature, max_tokens, as_json):
    """Send one prompt to the running server and say whether its output loops (exit 1 if it does)."""
    from ..host.ops import running_api_key, smoke_lock  # deferred: keeps --version/--help fast
    from ..host.ops import smoke as run_smoke  # deferred: keeps --version/--help fast
    from ..remote import connect as transport  # deferred: keeps --version/--help fast
    from ..report.console import inventory_option, print_smoke  # deferred: rich renderers

    _, _, pb = _hosts().load_config(inventory, playbook, host)  # the host's own `playbook:` unless -p
    with _hosts().open_host(inventory, host) as (cfg, c, py), smoke_lock(c, cfg, py), transport.tunnel(c, cfg) as url:
        on = f" -H {shlex.quote(cfg.name)}{inventory_option(inventory)}"
        res = run_smoke(url, pb, prompt=prompt, temperature=temperature, max_tokens=max_tokens,
                        api_key=running_api_key(c, cfg, pb), launch_hint=f"`mtp-remote launch{on} --profile NAME`")
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        print_smoke(make_console(), res)
    sys.exit(1 if res["verdict"] == "loops" else 0)
