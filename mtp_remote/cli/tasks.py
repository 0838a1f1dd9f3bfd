"""Fabric tasks (``fab -l`` lists them): adapters over :mod:`mtp_remote.commands`, run and rendered by
:func:`mtp_remote.cli.render.run` exactly as the click commands are, so both print the same.

A task turns its options (Invoke passes strings) into the command's arguments (:mod:`mtp_remote.commands.args`),
runs it and ends with its exit code. ``fab -H NAME diagnose`` reads NAME as a host of ``inventory.yaml``
(Fabric hands the task an unopened ``Connection`` whose ``.host`` is that name; mtp-remote opens its own, with
the inventory's SSH settings and host-key policy). Without ``-H`` the inventory's default host is used.
Errors end the task with one red line and the exit code (0 healthy, 1 corrupt or failed profile, 2 run could
not be done, 130 interrupted).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable

from invoke import task
from invoke.exceptions import Exit

from ..commands.args import (
    DEFAULT_TERM_S,
    BisectArgs,
    DiagnoseArgs,
    FleetArgs,
    LaunchArgs,
    LogsArgs,
    MitigateArgs,
    NightlyArgs,
    PreflightArgs,
    SmokeArgs,
    StatusArgs,
    StopArgs,
)
from ..config.paths import DEFAULT_NIGHTLY_PLAYBOOK, DEFAULT_PLAYBOOK, RUNS_DEFAULT_HELP, default_runs_dir
from ..errors import ConfigError, Interrupted
from . import lazy
from .signals import INTERRUPTS

# Start-up time: ``fab -l`` imports only invoke and the light modules above; each task reaches the workflows
# and the rich renderers through :mod:`mtp_remote.cli.lazy` when it runs.

_RUNS_DIR_HELP = f"where run directories go (default: {RUNS_DEFAULT_HELP})"
_PB_HELP = "playbook YAML (default: the host's own `playbook:` in the inventory, else playbooks/diagnose-mtp.yaml)"
_INV_HELP = "inventory YAML (default: $MTP_REMOTE_INVENTORY, else inventory.yaml here or in a parent)"


# -- how fab hands a task its host and options --------------------------------------------------------------

def host_name(c) -> str | None:
    """The inventory host named by ``fab -H``, or None for the default host. Ends the task (exit 2) when
    fab's ``-i`` was given a YAML file (:func:`refuse_inventory_as_key`)."""
    refuse_inventory_as_key(c)
    host = getattr(c, "host", None)
    return host or None


def fab_hosts_given(argv: list[str] | None = None) -> str | None:
    """fab's ``-H``/``--hosts`` value as typed (``a,b`` or a group), or None. Fabric splits it at commas and
    calls the task once per host, one after the other; the tasks that run on many hosts at once need it whole.
    Read from ``fab``'s own command line only (a task called any other way has no -H)."""
    argv = sys.argv if argv is None else argv
    if not argv or os.path.basename(argv[0]) != "fab":
        return None
    value = None
    words = argv[1:]
    for i, word in enumerate(words):
        if word in ("-H", "--hosts") and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--hosts="):
            value = word.split("=", 1)[1]
        elif word.startswith("-H") and len(word) > 2 and not word.startswith("--"):
            value = word[2:].lstrip("=")
    return value


#: :func:`hosts_of_call`'s answer for a later per-host call of ``fab -H a,b TASK``, whose host the first ran.
SKIP = "\0skip"


def hosts_of_call(c) -> str | None:
    """The ``-H`` this call of a task that runs on many hosts at once (diagnose, mitigate, preflight, status,
    stop, nightly) passes to its command: fab's ``-H a,b``/``-H GROUP`` whole on the first of Fabric's per-host
    calls (the command runs every host in parallel, as ``mtp-remote CMD -H a,b`` does), :data:`SKIP` on the
    later calls, the call's own host otherwise."""
    spec, host = fab_hosts_given(), host_name(c)
    if not spec or host is None:
        return host
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if len(parts) < 2:
        return spec  # one host or a group: Fabric calls the task once
    return spec if host == parts[0] else SKIP


def refuse_inventory_as_key(c) -> None:
    """fab's own ``-i`` is its SSH key file, a core option taken after the task name too: ``fab diagnose -i
    my-inventory.yaml`` would otherwise run on the default inventory's hosts without a word. A ``.yaml``/``.yml``
    key file is refused, naming ``--inventory``."""
    kwargs = getattr(getattr(c, "config", None), "connect_kwargs", None) or {}
    keys = kwargs.get("key_filename") or []
    yaml_keys = [str(k) for k in ([keys] if isinstance(keys, str) else keys) if str(k).endswith((".yaml", ".yml"))]
    if yaml_keys:
        lazy.output().report_error(ConfigError(
            f"fab's -i is its SSH key file, not the inventory; give the inventory as --inventory {yaml_keys[0]} "
            f"(or set $MTP_REMOTE_INVENTORY)", field=f"-i {yaml_keys[0]}"))
        raise Exit(code=2)


def whole(value, field: str) -> int | None:
    """A fab option that must be a whole number >= 1 (Invoke passes a string), or None. Raises ConfigError
    naming the option."""
    if value is None:
        return None
    if not str(value).isdigit() or int(value) < 1:
        raise ConfigError(f"must be a whole number >= 1, not {value!r}", field=field)
    return int(value)


def seconds(value, field: str, *, default: float) -> float:
    """A fab option given in seconds (Invoke passes it as a string): a number >= 1, else ConfigError naming it."""
    if value is None:
        return default
    try:
        secs = float(value)
    except ValueError:
        secs = float("nan")
    if not secs >= 1:  # NaN included
        raise ConfigError(f"must be a number of seconds >= 1, not {value!r}", field=field)
    return secs


def _finish(body: Callable[[], int | None]) -> None:
    """Run a task's body (options → arguments → command; returns the exit code) and end the task with that
    code; an expected error is one red line and its code, Ctrl-C exit 130, anything else a bug's traceback."""
    INTERRUPTS.install()
    try:
        code = body()
    except KeyboardInterrupt:
        INTERRUPTS.exiting()  # leaving: a second Ctrl-C must not cut the red line short
        code = lazy.output().report_error(Interrupted("interrupted"))
    except Exception as e:
        code = lazy.output().report_error(e)
        if code is None:
            raise
    if code:
        raise Exit(code=code)


def _run(name: str, args, *, as_json: bool = False) -> None:
    """Run command ``name`` (:func:`mtp_remote.cli.render.run`) and end the task with its exit code."""
    _finish(lambda: lazy.render().run(name, args, as_json=as_json))


# -- the tasks ------------------------------------------------------------------------------------------

@task(auto_shortflags=False, help={"playbook": "playbook YAML (default playbooks/diagnose-mtp.yaml)",
            "inventory": _INV_HELP,
            "profile": "only this speculative profile (baseline always runs)",
            "samples": "override samples per prompt at T > 0",
            "max_tokens": "override max tokens per request",
            "resume": "continue run RUN_ID without re-requesting stored samples",
            "runs_dir": _RUNS_DIR_HELP,
            "json": "print summary.json to stdout (progress goes to stderr)",
            "stop_on_loop": "--no-stop-on-loop runs every request to its end (default: stop it once its loop is "
                            "settled)",
            "attach": "endpoints already serving, comma-separated NAME=URL (one named baseline): compared instead of "
                      "launched; never launched, signalled or stopped"})
def diagnose(c, playbook=DEFAULT_PLAYBOOK, inventory=None, profile=None, samples=None,
             max_tokens=None, resume=None, runs_dir=None, json=False, stop_on_loop=True, attach=None):
    """Run the speculative vs baseline experiment on a host and print verdicts (-H NAME from inventory)."""
    if (host := hosts_of_call(c)) == SKIP:
        return
    _finish(lambda: lazy.render_runs().run("diagnose", DiagnoseArgs(
        runs_dir or str(default_runs_dir()), inventory=inventory, host=host, playbook=playbook,
        profiles=(profile,) if profile else (), samples=whole(samples, "--samples"),
        max_tokens=whole(max_tokens, "--max-tokens"), resume=resume, stop_on_loop=None if stop_on_loop else False,
         attach=tuple(x.strip() for x in (attach or "").split(",") if x.strip())),
        as_json=json))


@task(auto_shortflags=False, help={"playbook": "playbook YAML whose profiles are linted (" + _PB_HELP + ")", "inventory": _INV_HELP,
                                   "json": "print the checks as JSON"})
def preflight(c, playbook=DEFAULT_PLAYBOOK, inventory=None, json=False):
    """Read-only checks: SSH, python/SGLang/torch, GPUs, model, disk, port, foreign processes, flag lint."""
    if (host := hosts_of_call(c)) != SKIP:
        _run("preflight", PreflightArgs(inventory=inventory, host=host, playbook=playbook), as_json=json)


@task(auto_shortflags=False, help={"inventory": _INV_HELP, "json": "print the status as JSON"})
def status(c, inventory=None, json=False):
    """Show our server, the port, GPU memory and SGLang processes we did not start."""
    if (host := hosts_of_call(c)) != SKIP:
        _run("status", StatusArgs(inventory=inventory, host=host), as_json=json)


@task(auto_shortflags=False, help={"force": "also stop the SGLang processes we did not start that hold this host's GPU memory or port, by PID, after listing them (others are left alone)",
            "term-timeout": "seconds after SIGTERM before SIGKILL (default 30, as a run's timeouts.drain_s)",
            "inventory": _INV_HELP})
def stop(c, force=False, term_timeout=None, inventory=None):
    """Stop the server we started (SIGTERM, then SIGKILL) and wait until its GPU memory is released."""
    if (host := hosts_of_call(c)) != SKIP:
        _finish(lambda: lazy.render().run("stop", StopArgs(
            inventory=inventory, host=host, force=force,
            term_s=seconds(term_timeout, "--term-timeout", default=DEFAULT_TERM_S))))


@task(auto_shortflags=False, help={"profile": "profile of the playbook to launch (required)", "playbook": _PB_HELP,
            "inventory": _INV_HELP})
def launch(c, profile=None, playbook=DEFAULT_PLAYBOOK, inventory=None):
    """Launch one profile's server detached and wait until ready (it keeps running): --profile NAME."""
    _run("launch", LaunchArgs(profile, inventory=inventory, host=host_name(c), playbook=playbook))


@task(auto_shortflags=False, help={"follow": "keep printing new lines (Ctrl-C stops)", "lines": "lines of tail (default 50)",
            "inventory": _INV_HELP})
def logs(c, follow=False, lines="50", inventory=None):
    """Show the log of our server (or the newest one); --follow keeps printing."""
    def body() -> int:
        if not str(lines).isdigit():
            raise ConfigError(f"must be a whole number, not {lines!r}", field="--lines")
        lazy.render().logs(LogsArgs(inventory=inventory, host=host_name(c), follow=follow, lines=int(lines)))
        return 0

    _finish(body)


@task(auto_shortflags=False, help={"prompt": "prompt (default: the playbook's first)", "temperature": "default 0.7",
            "playbook": _PB_HELP, "inventory": _INV_HELP, "json": "print the result as JSON"})
def smoke(c, prompt=None, temperature="0.7", playbook=DEFAULT_PLAYBOOK, inventory=None, json=False):
    """Send one prompt to the running server and say whether its output loops (exit 1 if it does)."""
    def body() -> int:
        try:
            t = float(temperature)
        except ValueError:
            raise ConfigError(f"must be a number, not {temperature!r}", field="--temperature") from None
        inv = f" --inventory {shlex.quote(str(inventory))}" if inventory else ""
        return lazy.render().smoke(SmokeArgs(f"`fab -H {{host}} launch --profile NAME{inv}`", inventory=inventory,
                                             host=host_name(c), playbook=playbook, prompt=prompt, temperature=t),
                                   as_json=json)

    _finish(body)


@task(auto_shortflags=False, help={"playbook": _PB_HELP, "inventory": "inventory YAML",
            "from_": "diagnose run to start from (its corrupting profile; its baseline samples when they match)",
            "from_run": "the same as --from (mtp-remote mitigate spells it --from too)",
            "profile": "the corrupting profile (default: from --from, else the first speculative one)",
            "candidate": "only these candidates, comma-separated", "samples": "per-prompt budget per candidate",
            "resume": "continue mitigation run RUN_ID", "runs_dir": _RUNS_DIR_HELP})
def mitigate(c, playbook=DEFAULT_PLAYBOOK, inventory=None, from_=None, from_run=None, profile=None,
             candidate=None, samples=None, resume=None, runs_dir=None):
    """Try flag changes on a corrupting profile and rank the loop-free ones by speed (-H NAME)."""
    if (host := hosts_of_call(c)) == SKIP:
        return
    _finish(lambda: lazy.render_runs().run("mitigate", MitigateArgs(
        runs_dir or str(default_runs_dir()), inventory=inventory, host=host, playbook=playbook,
        from_run=from_ or from_run, profile=profile, only=tuple(x for x in (candidate or "").split(",") if x),
        samples=whole(samples, "--samples"), resume=resume)))


@task(name="bisect", auto_shortflags=False, help={"good": "good flags: profile name or flag string (default: baseline)",
            "bad": "bad flags: profile name or flag string (default: the corrupting profile)",
            "repeats": "per-prompt sample budget of each test", "from_": "diagnose run to start from",
            "from_run": "the same as --from (mtp-remote bisect spells it --from too)",
            "playbook": _PB_HELP, "inventory": "inventory YAML", "runs_dir": _RUNS_DIR_HELP,
            "resume": "continue bisect run RUN_ID (finished tests are not launched again)"})
def bisect_task(c, good=None, bad=None, repeats=None, from_=None, from_run=None, playbook=DEFAULT_PLAYBOOK,
                inventory=None, runs_dir=None, resume=None):
    """Find the minimal flag change from a good to a bad launch line that still corrupts output (ddmin)."""
    _finish(lambda: lazy.render_runs().run("bisect", BisectArgs(
        runs_dir or str(default_runs_dir()), inventory=inventory, host=host_name(c), playbook=playbook, good=good,
        bad=bad, repeats=whole(repeats, "--repeats"), from_run=from_ or from_run, resume=resume)))


@task(auto_shortflags=False, help={"command": "diagnose, mitigate, preflight, status or stop",
            "hosts": "a,b,c or an inventory group", "playbook": _PB_HELP, "inventory": "inventory YAML",
            "samples": "override samples (diagnose, mitigate)", "workers": "hosts at once (default 8)",
            "runs_dir": _RUNS_DIR_HELP})
def fleet(c, command=None, hosts=None, playbook=DEFAULT_PLAYBOOK, inventory=None, samples=None,
          workers="8", runs_dir=None):
    """Run a command on many hosts at once; one report with per-host verdicts and the hosts that disagree.

    --command is required; --hosts defaults to fab's -H (a,b,c or a group). fab -H a,b,c TASK does the same
    for diagnose, mitigate, preflight, status and stop."""
    refuse_inventory_as_key(c)
    if not hosts and (given := fab_hosts_given()):
        if host_name(c) not in (None, given.split(",")[0].strip()):
            return  # Fabric calls a task once per -H host: the first call ran them all
        hosts = given
    _finish(lambda: lazy.render_runs().run("fleet", FleetArgs(
        command, hosts, runs_dir or str(default_runs_dir()), inventory=inventory, playbook=playbook,
        samples=whole(samples, "--samples"), workers=whole(workers, "--workers"))))


@task(auto_shortflags=False, help={"hosts": "a,b,c or an inventory group: every host at once (default: fab -H, else "
                                            "the inventory's default host)",
            "playbook": "playbook YAML (default playbooks/nightly.yaml)", "inventory": _INV_HELP,
            "runs_dir": _RUNS_DIR_HELP, "history": "SQLite history file (default RUNS_DIR/history.sqlite)",
            "metrics_file": "also write metrics.prom here, atomically (node-exporter textfile collector)",
            "workers": "with a group: hosts at once (default 8)", "json": "print summary.json to stdout"})
def nightly(c, hosts=None, playbook=DEFAULT_NIGHTLY_PLAYBOOK, inventory=None, runs_dir=None, history=None,
            metrics_file=None, workers="8", json=False):
    """Diagnose, record in the history, test for regressions against earlier good runs (cron/CI); -H GROUP: all.

    Every night leaves runs/RUN_ID/ (summary.json, junit.xml, metrics.prom) and a history row, also when it
    could not be done. With a group (fab -H GROUP nightly, or --hosts a,b,c) every host runs at once with its
    own artefacts and history row (with the group), plus runs/fleet-ID/ with one junit case per host."""
    refuse_inventory_as_key(c)  # also with --hosts given
    if not hosts and (hosts := hosts_of_call(c)) == SKIP:
        return
    _finish(lambda: lazy.render_runs().run("nightly", NightlyArgs(
        runs_dir or str(default_runs_dir()), inventory=inventory, host=hosts, playbook=playbook, history_db=history,
        metrics_file=metrics_file, workers=whole(workers, "--workers")), as_json=json))


@task(auto_shortflags=False, help={
    "urls": "endpoints, comma-separated: URL or NAME=URL (e.g. mtp=http://127.0.0.1:30000)",
    "interval": "seconds between probe rounds (default 300)", "count": "end after N rounds (default: until Ctrl-C)",
    "metrics_file": "Prometheus textfile rewritten after each round", "listen": "serve /metrics on 127.0.0.1:PORT",
    "on_alert": "shell command run on an alert ({endpoint} {url} {reasons} {probe} {detail}, shell-quoted); "
                "without it the first alert ends the watch (exit 1)",
    "playbook": "probe with this playbook's prompts and sampling (default: 2 prompts, 1 greedy + 2 sampled)",
    "api": "generate (default) or chat", "samples": "sampled requests per prompt per probe",
    "max_tokens": "max tokens per probe request", "api_key_env": "environment variable holding the API key",
    "history": "SQLite history file (default RUNS_DIR/history.sqlite)", "no_history": "do not record probes",
    "runs_dir": _RUNS_DIR_HELP, "json": "one JSON object per probe on stdout"})
def watch(c, urls=None, interval="300", count=None, metrics_file=None, listen=None, on_alert=None, playbook=None,
          api=None, samples=None, max_tokens=None, api_key_env=None, history=None, no_history=False, runs_dir=None,
          json=False):
    """Probe live endpoints every --interval seconds (loops, acceptance, greedy stability); never touches them."""
    def body() -> int:
        from ..watch.setup import plan_watch  # deferred: keeps fab -l fast
        from ..watch.watch import watch as run_watch  # deferred: keeps fab -l fast

        from ..report.console import make_console  # deferred: keeps fab -l fast

        console = make_console(stderr=True)
        endpoints, pb, opts = plan_watch(
            [u.strip() for u in (urls or "").split(",") if u.strip()], playbook=playbook, api=api,
            samples=whole(samples, "--samples"), max_tokens=whole(max_tokens, "--max-tokens"),
            interval_s=seconds(interval, "--interval", default=300.0), count=whole(count, "--count"),
            metrics_file=metrics_file, listen=listen, history=history, no_history=no_history,
            runs_dir=runs_dir or str(default_runs_dir()), on_alert=on_alert, api_key_env=api_key_env)

        def on_probe(state, alerts):
            if json:
                lazy.output().print_json({**state.to_dict(), "alerts": alerts, "detail": state.detail() or None})
            else:
                console.print(state.describe(alerts), markup=False, highlight=False)

        res = run_watch(endpoints, pb, opts, on_probe=on_probe,
                        on_listen=lambda port: console.print(f"metrics at http://127.0.0.1:{port}/metrics"))
        return res.exit_code

    _finish(body)
