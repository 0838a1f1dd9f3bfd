"""How both entry points run a command and show its result: one path for ``mtp-remote CMD`` and ``fab CMD``.

:func:`run` builds the console and the :class:`~mtp_remote.commands.feedback.Feedback` (progress lines, bars,
Ctrl-C), calls the command of :mod:`mtp_remote.commands` and renders its result with the renderer of the same
name, which returns the exit code; the adapters (``cli/main.py``, ``host.py``; ``cli/tasks.py``) only turn
options into arguments and that code into their exit. :func:`report_error` is the one red line (plus
evidence) for an expected error. Imported through :mod:`mtp_remote.cli.lazy` (rich, the workflows).
"""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.markup import escape

from ..commands import fleet as fleet_commands
from ..commands import host as host_commands
from ..commands import run as run_commands
from ..commands.feedback import Feedback
from ..errors import Interrupted, MtpRemoteError
from ..experiment.runner import Hooks
from ..fleet.fleet import FleetReport, print_fleet, print_mitigation
from ..fleet.nightly import NightlyResult
from ..fleet.nightly_fleet import FleetNightlyResult
from ..fleet.regression import RegressionReport, describe
from ..remote.connect import as_connect_error
from ..report.console import (
    RichHooks,
    cells_table,
    checks_table,
    make_console,
    print_run_end,
    print_smoke,
    print_stop,
    status_table,
    verdict_table,
)
from .signals import INTERRUPTS

#: The command functions by name (``run`` calls them with the arguments and the feedback).
COMMANDS = {"diagnose": run_commands.diagnose, "nightly": run_commands.nightly, "mitigate": run_commands.mitigate,
            "bisect": run_commands.bisect, "preflight": host_commands.preflight, "status": host_commands.status,
            "stop": host_commands.stop, "launch": host_commands.launch, "fleet": fleet_commands.fleet}


def run(name: str, args, *, as_json: bool = False) -> int:
    """Run command ``name`` with ``args`` (its :mod:`mtp_remote.commands.args` model) and render the result:
    tables and lines on stdout, or with ``as_json`` the JSON document on stdout and progress on stderr.
    Returns the exit code; raises what the command raises (:func:`report_error` shows it)."""
    console = make_console(stderr=as_json)
    result = COMMANDS[name](args, feedback(console))
    return RENDERERS[name](console, result, args, as_json)


def feedback(console: Console) -> Feedback:
    """Progress on ``console`` (a line per event with its elapsed seconds, a bar per profile; a fleet's hosts
    as ``[host] message``) and this process's Ctrl-C handling."""
    rh = RichHooks(console)
    hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample, on_loop=rh.on_loop,
                  interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)
    return Feedback(hooks, lambda host, msg: console.print(f"[dim]\\[{host}][/] {escape(msg)}", highlight=False))


def report_error(e: BaseException) -> int | None:
    """Print an expected error as one red line on stderr (its evidence dimmed below) and return its exit code:
    an :class:`MtpRemoteError`, or an SSH failure that escaped the transport (exit 2). None for anything else
    (a bug: the caller lets its traceback through)."""
    if not isinstance(e, MtpRemoteError):
        e = as_connect_error(e)
        if e is None:
            return None
    if isinstance(e, Interrupted):  # unwound by the run: leaving
        INTERRUPTS.exiting()
    err = make_console(stderr=True)  # outside a terminal: never wrapped mid-flag
    err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
    if e.evidence:
        err.print(e.evidence, style="dim", highlight=False, markup=False)
    return e.exit_code


def print_json(data) -> None:
    """``--json``: the result as JSON on stdout (progress and errors go to stderr)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def regression_lines(rep: RegressionReport | None) -> list[str]:
    """The nightly's regression check as printed (rich markup): its verdict line, then one line per regression."""
    if rep is None:
        return []
    if rep.baseline_run is None:
        return ["regression check: no earlier good run of this host and playbook to compare with"]
    lines = describe(rep)
    return ([f"regression check against {rep.baseline_run}: "
             + ("[bold red]regressed[/]" if lines else "[green]no tested regression[/]")]
            + [f"  {escape(line)}" for line in lines])


# -- renderers: (console, result, args, as_json) -> exit code ---------------------------------------------

def render_fleet(console: Console, report: FleetReport, args, as_json: bool) -> int:
    """A command run on several hosts: the fleet table, the hosts that disagree, where the report is."""
    if as_json:
        print_json(report.to_dict())
        return report.exit_code
    return print_fleet(console, report, runs_dir=getattr(args, "runs_dir", "runs"), inventory=args.inventory)


def render_diagnose(console: Console, res, args, as_json: bool) -> int:
    if isinstance(res, FleetReport):
        return render_fleet(console, res, args, as_json)
    if as_json:
        print_json(res.summary)
    else:
        console.print(cells_table(res.summary))
        console.print(verdict_table(res.summary))
        print_run_end(console, res.summary, res.run_dir, res.exit_code, inventory=args.inventory)
    return res.exit_code


def render_nightly(console: Console, res: NightlyResult | FleetNightlyResult, args, as_json: bool) -> int:
    """The verdicts (or why the night could not be done), the regression check, the history and what next."""
    if isinstance(res, FleetNightlyResult):
        return render_nightly_fleet(console, res, args, as_json)
    if as_json:
        print_json(res.summary)
    if res.error is not None:
        report_error(res.error)
    else:
        if not as_json:
            console.print(verdict_table(res.summary))
        for line in regression_lines(res.regression):
            console.print(line, highlight=False)
    console.print(f"history {res.history_db}", highlight=False)
    print_run_end(console, res.summary, res.run_dir, res.exit_code, inventory=args.inventory)
    return res.exit_code


def render_nightly_fleet(console: Console, res: FleetNightlyResult, args, as_json: bool) -> int:
    if as_json:
        print_json(res.summary)
    print_fleet(console, res.report, runs_dir=args.runs_dir, inventory=args.inventory)
    doc = res.summary
    for h in doc["hosts"]:
        if h["regressed"]:
            console.print(f"[bold red]regressed[/] {h['host']} since {h['regression_baseline']}: "
                          f"{escape(', '.join(h['regressed']))}", highlight=False)
    console.print(f"fleet nightly {doc['fleet_id']} (group {escape(doc['group'])}): {res.fleet_dir}/summary.json, "
                  f"junit.xml, metrics.prom; history {res.history_db}", highlight=False)
    return res.exit_code


def render_mitigate(console: Console, res, args, as_json: bool) -> int:
    if isinstance(res, FleetReport):
        return render_fleet(console, res, args, as_json)
    if isinstance(res, run_commands.SpreadMitigation):
        print_mitigation(console, res.document)
        for h, why in res.document["left_out"].items():
            console.print(f"[yellow]left out {h}:[/] {escape(why)}")
        return res.exit_code
    if as_json:
        print_json(res.document)
    else:
        print_mitigation(console, res.document)
        console.print(f"report: {res.run_dir / 'mitigation.md'}  (exit code {res.exit_code})")
    return res.exit_code


def render_bisect(console: Console, res, args, as_json: bool) -> int:
    """Every test with its outcome and changes, then the minimal change and how to reproduce it."""
    doc = res.document
    for t in doc["tests"]:
        console.print(f"  {t['name']}: {t['outcome']:<10} {', '.join(t['changes'])}", highlight=False, markup=False)
    if doc.get("minimal") is None:
        console.print(f"[yellow]{escape(doc['message'])}[/]")
    else:
        print(f"minimal change ({len(doc['tests'])} tests): {', '.join(doc['minimal']) or '(none)'}", flush=True)
        print(f"reproduce with: {doc['command']}", flush=True)
    console.print(f"record: {res.run_dir / 'bisect.json'}")
    return res.exit_code


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
            print(chunk, end="" if view.following else "\n", flush=True)


RENDERERS = {"diagnose": render_diagnose, "nightly": render_nightly, "mitigate": render_mitigate,
             "bisect": render_bisect, "preflight": render_preflight, "status": render_status, "stop": render_stop,
             "launch": render_launch, "fleet": render_fleet}
