"""How both entry points run a command and show its result: one path for ``mtp-remote CMD`` and ``fab CMD``.

:func:`run_command` builds the console and the :class:`~mtp_remote.commands.feedback.Feedback` (progress lines,
bars, Ctrl-C), calls a command of :mod:`mtp_remote.commands` and renders its result with a renderer that
returns the exit code; the adapters (``cli/main.py``, ``host.py``; ``cli/tasks.py``) only turn options into
arguments and that code into their exit. An expected error is one red line (:mod:`mtp_remote.cli.output`).
This module runs the host commands (:func:`run`); :mod:`mtp_remote.cli.render_runs` the ones that run
experiments (it imports the workflows: scipy, ~1 s). Both are reached through :mod:`mtp_remote.cli.lazy`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape

from ..commands import host as host_commands
from ..commands.feedback import Feedback
from ..fleet.console import print_fleet
from ..outside_text import for_terminal
from ..fleet.outcomes import FleetReport
from ..report.console import (
    RichHooks,
    checks_table,
    make_console,
    print_smoke,
    print_stop,
    status_table,
)
from .output import print_json
from .signals import INTERRUPTS


def run(name: str, args, *, as_json: bool = False) -> int:
    """Run host command ``name`` (preflight, status, stop, launch) with ``args`` and render the result: tables
    and lines on stdout, or with ``as_json`` the JSON document on stdout and progress on stderr. Returns the
    exit code; raises what the command raises (:func:`mtp_remote.cli.output.report_error` shows it)."""
    command, renderer = HOST_COMMANDS[name]
    return run_command(command, renderer, args, as_json=as_json)


def run_command(command: Callable, renderer: Callable, args, *, as_json: bool = False) -> int:
    """``renderer(console, command(args, feedback), args, as_json)``: the exit code."""
    console = make_console(stderr=as_json)
    return renderer(console, command(args, feedback(console)), args, as_json)


def feedback(console: Console) -> Feedback:
    """Progress on ``console`` (a line per event with its elapsed seconds, a bar per profile; a fleet's hosts
    as ``[host] message``) and this process's Ctrl-C handling."""
    rh = RichHooks(console)
    return Feedback(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample,
                    on_loop=rh.on_loop, interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check,
                    on_host=lambda host, msg: console.print(f"[dim]\\[{host}][/] {escape(msg)}", highlight=False))


# -- renderers: (console, result, args, as_json) -> exit code ---------------------------------------------

def render_fleet(console: Console, report: FleetReport, args, as_json: bool) -> int:
    """A command run on several hosts: the fleet table, the hosts that disagree, where the report is."""
    if as_json:
        print_json(report.to_dict())
        return report.exit_code
    return print_fleet(console, report, runs_dir=getattr(args, "runs_dir", "runs"), inventory=args.inventory)


def render_preflight(console: Console, res, args, as_json: bool) -> int:
    if isinstance(res, FleetReport):
        return render_fleet(console, res, args, as_json)
    if as_json:
        print_json([ch.to_dict() for ch in res.checks])
    else:
        make_console().print(checks_table(res.host, res.checks))
    return res.exit_code


def render_status(console: Console, res, args, as_json: bool) -> int:
    if isinstance(res, FleetReport):
        return render_fleet(console, res, args, as_json)
    if as_json:
        print_json(res.to_dict())
    else:
        make_console().print(status_table(res))
    return 0


def render_stop(console: Console, res, args, as_json: bool) -> int:
    if isinstance(res, FleetReport):
        return render_fleet(console, res, args, as_json)
    print_stop(console, res)
    return 0


def render_launch(console: Console, res: host_commands.LaunchResult, args, as_json: bool) -> int:
    console.print(f"[green]{escape(res.outcome.describe())}[/]; server on {escape(res.host.name)} "
                  f"127.0.0.1:{res.host.port}")
    return 0


HOST_COMMANDS = {"preflight": (host_commands.preflight, render_preflight),
                 "status": (host_commands.status, render_status), "stop": (host_commands.stop, render_stop),
                 "launch": (host_commands.launch, render_launch)}


def render_smoke(res: dict, *, as_json: bool) -> int:
    """The smoke verdict and the output's ends (or the JSON); exit 1 when the output loops."""
    if as_json:
        print_json(res)
    else:
        print_smoke(make_console(), res)
    return 1 if res["verdict"] == "loops" else 0


def smoke(args, *, as_json: bool = False) -> int:
    """``smoke``: run it (:func:`mtp_remote.commands.host.smoke`) and render it; returns the exit code."""
    return render_smoke(host_commands.smoke(args), as_json=as_json)


def logs(args) -> None:
    """``logs``: the log's path and a note on stderr, its text on stdout (following while our server runs)."""
    with host_commands.logs(args, INTERRUPTS.check) as view:
        print(f"==> {view.path} <==", file=sys.stderr, flush=True)
        if view.not_following:
            print("(no server of ours is running: showing the log's end, not following)", file=sys.stderr,
                  flush=True)
        for chunk in view.chunks:
            shown = for_terminal(chunk) if sys.stdout.isatty() else chunk  # a pipe: the log as is
            print(shown, end="" if view.following else "\n", flush=True)
