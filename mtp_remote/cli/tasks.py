"""Fabric tasks (``fab -l`` lists them). Thin wrappers over :mod:`mtp_remote.experiment.diagnose`, like the click CLI.

``fab -H NAME diagnose`` reads NAME as a host of ``inventory.yaml`` (Fabric hands the task an unopened
``Connection`` whose ``.host`` is that name; mtp-remote opens its own, with the inventory's SSH settings and
host-key policy). Without ``-H`` the inventory's default host is used. Errors end the task with one red line
and the exit code (0 healthy, 1 corrupt or failed profile, 2 run could not be done).
"""

from __future__ import annotations

import json
import shlex
import sys

from invoke import task
from invoke.exceptions import Exit
from rich.markup import escape

from ..config.paths import DEFAULT_PLAYBOOK, RUNS_DEFAULT_HELP, default_runs_dir
from ..errors import ConfigError, Interrupted, MtpRemoteError
from ..interrupts import Interrupts
from .lazy import api as _api
from .lazy import hosts as _hosts
from .lazy import make_console

_RUNS_DIR_HELP = f"where run directories go (default: {RUNS_DEFAULT_HELP})"

# Start-up time: ``fab -l`` imports only invoke and the light modules above. The api layer (scipy, numpy,
# httpx, pydantic, jinja2: ~1 s) and the rich renderers are imported inside the task that uses them (cli/lazy.py).


_PB_HELP = "playbook YAML (default: the host's own `playbook:` in the inventory, else playbooks/diagnose-mtp.yaml)"
_INV_HELP = "inventory YAML (default: $MTP_REMOTE_INVENTORY, else inventory.yaml here or in a parent)"

#: SIGINT/SIGTERM handling for this process (entry point state: one per process).
INTERRUPTS = Interrupts()


def _host_name(c) -> str | None:
    """The inventory host named by ``fab -H``, or None for the default host. Ends the task (exit 2) when
    fab's ``-i`` was given a YAML file (:func:`_refuse_inventory_as_key`)."""
    _refuse_inventory_as_key(c)
    host = getattr(c, "host", None)
    return host or None


def _fab_hosts_given(argv: list[str] | None = None) -> str | None:
    """fab's ``-H``/``--hosts`` value as typed (``a,b`` or a group), or None. Fabric splits it at commas and
    calls the task once per host, one after the other; the tasks that run on many hosts at once need it whole.
    Read from ``fab``'s own command line only (a task called any other way has no -H)."""
    import os
    import sys

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


def _as_fleet(c, command: str, inventory, *, as_json: bool = False, **kw) -> int | None:
    """``fab -H a,b TASK`` / ``fab -H GROUP TASK`` for the tasks that run on many hosts at once (diagnose,
    mitigate, preflight, status, stop): the first of Fabric's per-host calls runs ``command`` on every host in
    parallel (as ``mtp-remote CMD -H a,b`` and ``fab fleet`` do) and prints the fleet report; the later calls,
    whose hosts that report covered, do nothing. Returns the exit code when this call was a fleet's (the
    caller returns), None for a single host (the caller goes on)."""
    spec, host = _fab_hosts_given(), _host_name(c)
    if not spec or host is None:
        return None
    from ..experiment.hosts import fleet_hosts  # deferred: keeps fab -l fast
    from ..fleet.fleet import print_fleet, run_fleet  # deferred: keeps fab -l fast

    parts = [p.strip() for p in spec.split(",") if p.strip()]
    try:
        hosts = fleet_hosts(inventory, spec)
        if len(parts) < 2 and hosts == [host]:
            return None  # one host, named as itself
    except MtpRemoteError as e:
        raise _fail(e) from None
    if host != parts[0]:
        return 0  # the first call ran the fleet with this host in it
    console = make_console(stderr=as_json)
    try:
        report = run_fleet(command, hosts, inventory=inventory, write=command in ("diagnose", "mitigate"),
                           on_progress=lambda h, m: console.print(f"[dim]\\[{h}][/] {escape(m)}", highlight=False),
                           **kw)
    except MtpRemoteError as e:
        raise _fail(e) from None
    if as_json:
        _json_out(report.to_dict())
        return report.exit_code
    return print_fleet(console, report, runs_dir=kw.get("runs_dir", "runs"), inventory=inventory)


def _whole(value, field: str) -> int | None:
    """A fab option that must be a whole number >= 1 (Invoke passes a string), or None; ends the task (exit 2)
    naming the option otherwise."""
    if value is None:
        return None
    if not str(value).isdigit() or int(value) < 1:
        raise _fail(ConfigError(f"must be a whole number >= 1, not {value!r}", field=field))
    return int(value)


def _end(code: int) -> None:
    """End a task that ran as a fleet with the fleet's exit code."""
    if code:
        raise Exit(code=code)


def _refuse_inventory_as_key(c) -> None:
    """fab's own ``-i`` is its SSH key file, a core option taken after the task name too: ``fab diagnose -i
    my-inventory.yaml`` would otherwise run on the default inventory's hosts without a word. A ``.yaml``/``.yml``
    key file is refused, naming ``--inventory``."""
    kwargs = getattr(getattr(c, "config", None), "connect_kwargs", None) or {}
    keys = kwargs.get("key_filename") or []
    yaml_keys = [str(k) for k in ([keys] if isinstance(keys, str) else keys) if str(k).endswith((".yaml", ".yml"))]
    if yaml_keys:
        make_console(stderr=True).print(
            f"[bold red]error:[/] -i {escape(yaml_keys[0])}: fab's -i is its SSH key file, not the inventory; give "
            f"the inventory as --inventory {escape(yaml_keys[0])} (or set $MTP_REMOTE_INVENTORY)", highlight=False)
        raise Exit(code=2)


def _json_out(data) -> None:
    """``--json``: the result as JSON on stdout (progress and errors go to stderr)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _seconds(value, field: str, *, default: float) -> float:
    """A fab option given in seconds (Invoke passes it as a string): a number >= 1, else ConfigError naming it."""
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds >= 1:  # NaN included
        raise ConfigError(f"must be a number of seconds >= 1, not {value!r}", field=field)
    return seconds


def _fail(e: MtpRemoteError) -> Exit:
    if isinstance(e, Interrupted):
        INTERRUPTS.exiting()
    console = make_console(stderr=True)  # outside a terminal: never wrapped mid-flag
    console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
    if e.evidence:
        console.print(e.evidence, style="dim", highlight=False, markup=False)
    return Exit(code=e.exit_code)


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
    runs_dir = runs_dir or str(default_runs_dir())
    from ..experiment.runner import Hooks  # deferred: keeps --version/--help fast
    from ..report.console import (  # deferred: keeps --version/--help fast
        RichHooks,
        cells_table,
        print_run_end,
        verdict_table,
    )

    INTERRUPTS.install()
    attached = [a.strip() for a in (attach or "").split(",") if a.strip()] or None
    if not attached and (code := _as_fleet(c, "diagnose", inventory, as_json=json, playbook=playbook,
                                           runs_dir=runs_dir, samples=_whole(samples, "--samples"))) is not None:
        _end(code)
        return
    console = make_console(stderr=json)
    rh = RichHooks(console)
    hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample, on_loop=rh.on_loop,
                  interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)
    try:
        overrides = {}
        for name, value in (("samples", samples), ("max_tokens", max_tokens)):
            if value is not None:
                if not str(value).isdigit() or int(value) < 1:
                    raise ConfigError(f"must be a whole number >= 1, not {value!r}", field=f"--{name.replace('_', '-')}")
                overrides[name] = int(value)
        if not stop_on_loop:  # fab diagnose --no-stop-on-loop
            overrides["stop_on_loop"] = False
        res = _api().diagnose(inventory=inventory, playbook=playbook, host=_host_name(c), runs_dir=runs_dir,
                           profiles=[profile] if profile else None, resume=resume, hooks=hooks,
                           overrides=overrides or None, attach=attached)
    except MtpRemoteError as e:
        raise _fail(e) from None
    except KeyboardInterrupt:
        raise _fail(Interrupted("interrupted")) from None
    if json:
        _json_out(res.summary)
    else:
        console.print(cells_table(res.summary))
        console.print(verdict_table(res.summary))
        print_run_end(console, res.summary, res.run_dir, res.exit_code, inventory=inventory)
    if res.exit_code:
        raise Exit(code=res.exit_code)


@task(auto_shortflags=False, help={"playbook": "playbook YAML whose profiles are linted (" + _PB_HELP + ")", "inventory": _INV_HELP,
                                   "json": "print the checks as JSON"})
def preflight(c, playbook=DEFAULT_PLAYBOOK, inventory=None, json=False):
    """Read-only checks: SSH, python/SGLang/torch, GPUs, model, disk, port, foreign processes, flag lint."""
    from ..host.ops import preflight as run_preflight  # deferred: keeps --version/--help fast
    from ..report.console import checks_table  # deferred: keeps --version/--help fast

    if (code := _as_fleet(c, "preflight", inventory, as_json=json, playbook=playbook)) is not None:
        _end(code)
        return
    try:
        _, _, pb = _hosts().load_config(inventory, playbook, _host_name(c))  # the host's `playbook:` unless given
        with _hosts().open_host(inventory, _host_name(c)) as (cfg, conn, py):
            checks = run_preflight(conn, cfg, pb, py)
    except MtpRemoteError as e:
        raise _fail(e) from None
    if json:
        _json_out([ch.to_dict() for ch in checks])
    else:
        make_console().print(checks_table(cfg.name, checks))
    if any(ch.status == "fail" for ch in checks):
        raise Exit(code=2)


@task(auto_shortflags=False, help={"inventory": _INV_HELP, "json": "print the status as JSON"})
def status(c, inventory=None, json=False):
    """Show our server, the port, GPU memory and SGLang processes we did not start."""
    from ..host.ops import status as run_status  # deferred: keeps --version/--help fast
    from ..report.console import status_table  # deferred: keeps --version/--help fast

    if (code := _as_fleet(c, "status", inventory, as_json=json)) is not None:
        _end(code)
        return
    try:
        with _hosts().open_host(inventory, _host_name(c)) as (cfg, conn, py):
            st = run_status(conn, cfg, py)
    except MtpRemoteError as e:
        raise _fail(e) from None
    if json:
        _json_out(st.to_dict())
    else:
        make_console().print(status_table(st))


@task(auto_shortflags=False, help={"force": "also stop the SGLang processes we did not start that hold this host's GPU memory or port, by PID, after listing them (others are left alone)",
            "term-timeout": "seconds after SIGTERM before SIGKILL (default 30, as a run's timeouts.drain_s)",
            "inventory": _INV_HELP})
def stop(c, force=False, term_timeout=None, inventory=None):
    """Stop the server we started (SIGTERM, then SIGKILL) and wait until its GPU memory is released."""
    from ..host.ops import stop as run_stop  # deferred: keeps --version/--help fast
    from ..report.console import print_stop, progress_printer  # deferred: rich renderers

    try:
        term_s = _seconds(term_timeout, "--term-timeout", default=30.0)
    except MtpRemoteError as e:
        raise _fail(e) from None
    if (code := _as_fleet(c, "stop", inventory, force=force, term_s=term_s)) is not None:
        _end(code)
        return
    console = make_console()
    try:
        with _hosts().open_host(inventory, _host_name(c)) as (cfg, conn, py):
            res = run_stop(conn, cfg, py, force=force, term_s=term_s, on_progress=progress_printer(console))
    except MtpRemoteError as e:
        raise _fail(e) from None
    print_stop(console, res)


@task(auto_shortflags=False, help={"profile": "profile of the playbook to launch (required)", "playbook": _PB_HELP,
            "inventory": _INV_HELP})
def launch(c, profile=None, playbook=DEFAULT_PLAYBOOK, inventory=None):
    """Launch one profile's server detached and wait until ready (it keeps running): --profile NAME."""
    from ..experiment.runner import new_run_id  # deferred: keeps --version/--help fast
    from ..serving.base import raise_for_outcome  # deferred: keeps --version/--help fast
    from ..host.ops import launch as run_launch  # deferred: keeps --version/--help fast
    from ..report.console import progress_printer  # deferred: rich renderers

    INTERRUPTS.install()  # SIGTERM too: the wait is interrupted and the server just started is stopped
    console = make_console()
    try:
        _, _, pb = _hosts().load_config(inventory, playbook, _host_name(c))  # the host's `playbook:` unless given
        if not profile:
            raise ConfigError(f"required; choose one of: {', '.join(pb.profile_order())}",
                              field="--profile")
        with _hosts().open_host(inventory, _host_name(c)) as (cfg, conn, py):
            outcome = run_launch(conn, cfg, pb, profile, py, run_id=new_run_id(), on_progress=progress_printer(console))
        raise_for_outcome(outcome)
    except MtpRemoteError as e:
        raise _fail(e) from None
    except KeyboardInterrupt:
        raise _fail(Interrupted("interrupted")) from None
    console.print(f"[green]{escape(outcome.describe())}[/]; server on {escape(cfg.name)} 127.0.0.1:{cfg.port}")


@task(auto_shortflags=False, help={"follow": "keep printing new lines (Ctrl-C stops)", "lines": "lines of tail (default 50)",
            "inventory": _INV_HELP})
def logs(c, follow=False, lines="50", inventory=None):
    """Show the log of our server (or the newest one); --follow keeps printing."""
    from ..host.ops import current_log, follow_log, server_alive  # deferred: keeps --version/--help fast

    INTERRUPTS.install()  # Invoke swallows a Ctrl-C that lands in one of the loop's short commands
    try:
        if not str(lines).isdigit():
            raise ConfigError(f"must be a whole number, not {lines!r}", field="--lines")
        with _hosts().open_host(inventory, _host_name(c)) as (cfg, conn, _py):
            path, pid = current_log(conn, cfg)
            print(f"==> {path} <==")
            keep = follow and pid is not None
            if follow and not keep:
                print("(no server of ours is running: showing the log's end, not following)")
            for chunk in follow_log(conn, path, lines=int(lines),
                                    until=lambda: INTERRUPTS.check() or not keep or not server_alive(conn, pid)):
                print(chunk, end="" if keep else "\n", flush=True)
    except MtpRemoteError as e:
        raise _fail(e) from None
    except KeyboardInterrupt:
        raise _fail(Interrupted("interrupted")) from None


@task(auto_shortflags=False, help={"prompt": "prompt (default: the playbook's first)", "temperature": "default 0.7",
            "playbook": _PB_HELP, "inventory": _INV_HELP, "json": "print the result as JSON"})
def smoke(c, prompt=None, temperature="0.7", playbook=DEFAULT_PLAYBOOK, inventory=None, json=False):
    """Send one prompt to the running server and say whether its output loops (exit 1 if it does)."""
    from ..host.ops import running_api_key, smoke_lock  # deferred: keeps --version/--help fast
    from ..host.ops import smoke as run_smoke  # deferred: keeps --version/--help fast
    from ..remote import connect as transport  # deferred: keeps --version/--help fast
    from ..report.console import print_smoke  # deferred: rich renderers

    try:
        try:
            temperature = float(temperature)
        except ValueError:
            raise ConfigError(f"must be a number, not {temperature!r}", field="--temperature") from None
        _, _, pb = _hosts().load_config(inventory, playbook, _host_name(c))  # the host's `playbook:` unless given
        with (_hosts().open_host(inventory, _host_name(c)) as (cfg, conn, py), smoke_lock(conn, cfg, py),
              transport.tunnel(conn, cfg) as url):
            inv = f" --inventory {shlex.quote(str(inventory))}" if inventory else ""
            res = run_smoke(url, pb, prompt=prompt, temperature=temperature,
                            api_key=running_api_key(conn, cfg, pb),
                            launch_hint=f"`fab -H {shlex.quote(cfg.name)} launch --profile NAME{inv}`")
    except MtpRemoteError as e:
        raise _fail(e) from None
    if json:
        _json_out(res)
    else:
        print_smoke(make_console(), res)
    if res["verdict"] == "loops":
        raise Exit(code=1)


def _rich_hooks(console):
    from ..experiment.runner import Hooks  # deferred: keeps --version/--help fast
    from ..report.console import RichHooks  # deferred: keeps --version/--help fast

    rh = RichHooks(console)
    return Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample, on_loop=rh.on_loop,
                 interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)


@task(auto_shortflags=False, help={"playbook": _PB_HELP, "inventory": "inventory YAML",
            "from_": "diagnose run to start from (its corrupting profile; its baseline samples when they match)",
            "from_run": "the same as --from (mtp-remote mitigate spells it --from too)",
            "profile": "the corrupting profile (default: from --from, else the first speculative one)",
            "candidate": "only these candidates, comma-separated", "samples": "per-prompt budget per candidate",
            "resume": "continue mitigation run RUN_ID", "runs_dir": _RUNS_DIR_HELP})
def mitigate(c, playbook=DEFAULT_PLAYBOOK, inventory=None, from_=None, from_run=None, profile=None,
             candidate=None, samples=None, resume=None, runs_dir=None):
    """Try flag changes on a corrupting profile and rank the loop-free ones by speed (-H NAME)."""
    runs_dir = runs_dir or str(default_runs_dir())
    from ..fleet.fleet import print_mitigation  # deferred: keeps --version/--help fast
    from ..search.mitigate import mitigate as run_mitigate  # deferred: keeps --version/--help fast

    from_run = from_ or from_run
    INTERRUPTS.install()
    if (code := _as_fleet(c, "mitigate", inventory, playbook=playbook, runs_dir=runs_dir, from_run=from_run,
                          samples=_whole(samples, "--samples"),
                          only=[x for x in (candidate or "").split(",") if x] or None)) is not None:
        _end(code)
        return
    console = make_console()
    try:
        if samples is not None and (not str(samples).isdigit() or int(samples) < 1):
            raise ConfigError(f"must be a whole number >= 1, not {samples!r}", field="--samples")
        res = run_mitigate(inventory=inventory, playbook=playbook, host=_host_name(c), runs_dir=runs_dir,
                           profile=profile, from_run=from_run, resume=resume,
                           only=[x for x in (candidate or "").split(",") if x] or None,
                           samples=int(samples) if samples else None, hooks=_rich_hooks(console))
    except MtpRemoteError as e:
        raise _fail(e) from None
    except KeyboardInterrupt:
        raise _fail(Interrupted("interrupted")) from None
    print_mitigation(console, res.document)
    console.print(f"report: {res.run_dir / 'mitigation.md'}  (exit code {res.exit_code})")
    if res.exit_code:
        raise Exit(code=res.exit_code)


@task(name="bisect", auto_shortflags=False, help={"good": "good flags: profile name or flag string (default: baseline)",
            "bad": "bad flags: profile name or flag string (default: the corrupting profile)",
            "repeats": "per-prompt sample budget of each test", "from_": "diagnose run to start from",
            "from_run": "the same as --from (mtp-remote bisect spells it --from too)",
            "playbook": _PB_HELP, "inventory": "inventory YAML", "runs_dir": _RUNS_DIR_HELP,
            "resume": "continue bisect run RUN_ID (finished tests are not launched again)"})
def bisect_task(c, good=None, bad=None, repeats=None, from_=None, from_run=None, playbook=DEFAULT_PLAYBOOK,
                inventory=None, runs_dir=None, resume=None):
    """Find the minimal flag change from a good to a bad launch line that still corrupts output (ddmin)."""
    runs_dir = runs_dir or str(default_runs_dir())
    from ..search.bisect import bisect as run_bisect  # deferred: keeps --version/--help fast

    from_run = from_ or from_run

    INTERRUPTS.install()
    console = make_console()
    try:
        res = run_bisect(inventory=inventory, playbook=playbook, host=_host_name(c), runs_dir=runs_dir, good=good,
                         bad=bad, repeats=int(repeats) if repeats else None, from_run=from_run,
                         hooks=_rich_hooks(console), resume=resume)
    except MtpRemoteError as e:
        raise _fail(e) from None
    except KeyboardInterrupt:
        raise _fail(Interrupted("interrupted")) from None
    doc = res.document
    if doc.get("minimal") is None:
        console.print(f"[yellow]{escape(doc['message'])}[/]")
        raise Exit(code=1)
    print(f"minimal change ({len(doc['tests'])} tests): {', '.join(doc['minimal'])}")
    print(f"reproduce with: {doc['command']}")


@task(auto_shortflags=False, help={"command": "diagnose, mitigate, preflight, status or stop",
            "hosts": "a,b,c or an inventory group", "playbook": _PB_HELP, "inventory": "inventory YAML",
            "samples": "override samples (diagnose, mitigate)", "workers": "hosts at once (default 8)",
            "runs_dir": _RUNS_DIR_HELP})
def fleet(c, command=None, hosts=None, playbook=DEFAULT_PLAYBOOK, inventory=None, samples=None,
          workers="8", runs_dir=None):
    """Run a command on many hosts at once; one report with per-host verdicts and the hosts that disagree.

    --command is required; --hosts defaults to fab's -H (a,b,c or a group). fab -H a,b,c TASK does the same
    for diagnose, mitigate, preflight, status and stop."""
    runs_dir = runs_dir or str(default_runs_dir())
    from ..experiment.hosts import fleet_hosts  # deferred: keeps --version/--help fast
    from ..fleet.fleet import COMMANDS, print_fleet, run_fleet  # deferred: keeps --version/--help fast

    _refuse_inventory_as_key(c)
    if not hosts and (given := _fab_hosts_given()):
        if _host_name(c) not in (None, given.split(",")[0].strip()):
            return  # Fabric calls a task once per -H host: the first call ran them all
        hosts = given
    if not command or not hosts:
        missing = " and ".join(x for x, v in (("--command CMD", command), ("--hosts a,b|GROUP", hosts)) if not v)
        raise _fail(ConfigError(f"fab fleet needs {missing} (commands: {', '.join(COMMANDS)}); e.g. `fab fleet "
                                f"--command status --hosts sims`", field="fleet"))
    console = make_console()
    try:
        report = run_fleet(command, fleet_hosts(inventory, hosts), inventory=inventory, playbook=playbook,
                           runs_dir=runs_dir, samples=int(samples) if samples else None, max_workers=int(workers),
                           on_progress=lambda h, m: console.print(f"[dim]\\[{h}][/] {escape(m)}", highlight=False))
    except MtpRemoteError as e:
        raise _fail(e) from None
    except ValueError as e:
        raise _fail(ConfigError(str(e), field="--command")) from None
    code = print_fleet(console, report, runs_dir=runs_dir, inventory=inventory)
    if code:
        raise Exit(code=code)


@task(auto_shortflags=False, help={"hosts": "a,b,c or an inventory group: every host at once (default: fab -H, else "
                                            "the inventory's default host)",
            "playbook": "playbook YAML (default playbooks/nightly.yaml)", "inventory": _INV_HELP,
            "runs_dir": _RUNS_DIR_HELP, "history": "SQLite history file (default RUNS_DIR/history.sqlite)",
            "metrics_file": "also write metrics.prom here, atomically (node-exporter textfile collector)",
            "workers": "with a group: hosts at once (default 8)", "json": "print summary.json to stdout"})
def nightly(c, hosts=None, playbook="playbooks/nightly.yaml", inventory=None, runs_dir=None, history=None,
            metrics_file=None, workers="8", json=False):
    """Diagnose, record in the history, test for regressions since the last good run (cron/CI); -H GROUP: all.

    Every night leaves runs/RUN_ID/ (summary.json, junit.xml, metrics.prom) and a history row, also when it
    could not be done. With a group (fab -H GROUP nightly, or --hosts a,b,c) every host runs at once with its
    own artefacts and history row (with the group), plus runs/fleet-ID/ with one junit case per host."""
    runs_dir = runs_dir or str(default_runs_dir())
    from ..experiment.runner import Hooks  # deferred: keeps --version/--help fast
    from ..fleet.nightly import fleet_spec, run_nightly  # deferred: keeps --version/--help fast
    from ..fleet.nightly_fleet import run_nightly_fleet  # deferred: keeps --version/--help fast

    INTERRUPTS.install()
    console = make_console(stderr=json)
    hooks = Hooks(interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)
    given = None if hosts else _fab_hosts_given()  # fab -H a,b: Fabric calls this once per host; the first runs all
    if given and "," in given and _host_name(c) != given.split(",")[0].strip():
        return
    spec = hosts or given or _host_name(c)
    _refuse_inventory_as_key(c)  # also with --hosts given
    fleet = fleet_spec(inventory, spec)
    try:
        if fleet is not None:
            from ..fleet.fleet import print_fleet  # deferred: keeps --version/--help fast

            res = run_nightly_fleet(fleet[0], group=fleet[1], inventory=inventory, playbook=playbook,
                                    runs_dir=runs_dir, history_db=history, hooks=hooks, metrics_file=metrics_file,
                                    max_workers=int(workers),
                                    on_progress=lambda h, m: console.print(f"[dim]\\[{h}][/] {escape(m)}",
                                                                           highlight=False))
            print_fleet(console, res.report, runs_dir=runs_dir, inventory=inventory)
            console.print(f"fleet nightly {res.fleet_id}: {res.fleet_dir}/summary.json, junit.xml, metrics.prom")
            doc, code, error = res.summary, res.exit_code, None
        else:
            from ..report.console import (  # deferred: keeps --version/--help fast
                RichHooks,
                print_run_end,
                verdict_table,
            )

            rh = RichHooks(console)
            hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample, on_loop=rh.on_loop,
                          interrupted=hooks.interrupted, checkpoint=hooks.checkpoint)
            one = run_nightly(inventory=inventory, host=spec, playbook=playbook, runs_dir=runs_dir,
                              history_db=history, hooks=hooks, metrics_file=metrics_file)
            doc, code, error = one.summary, one.exit_code, one.error
            if error is None:
                console.print(verdict_table(doc))
            print_run_end(console, doc, one.run_dir, code, inventory=inventory)
    except MtpRemoteError as e:
        raise _fail(e) from None
    if json:
        _json_out(doc)
    if error is not None:
        raise _fail(error)
    if code:
        raise Exit(code=code)


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
    from ..watch.setup import plan_watch  # deferred: keeps fab -l fast
    from ..watch.watch import watch as run_watch  # deferred: keeps fab -l fast

    INTERRUPTS.install()
    console = make_console(stderr=True)
    try:
        endpoints, pb, opts = plan_watch(
            [u.strip() for u in (urls or "").split(",") if u.strip()], playbook=playbook, api=api,
            samples=_whole(samples, "--samples"), max_tokens=_whole(max_tokens, "--max-tokens"),
            interval_s=_seconds(interval, "--interval", default=300.0), count=_whole(count, "--count"),
            metrics_file=metrics_file, listen=listen, history=history, no_history=no_history,
            runs_dir=runs_dir or str(default_runs_dir()), on_alert=on_alert, api_key_env=api_key_env)

        def on_probe(state, alerts):
            if json:
                _json_out({**state.to_dict(), "alerts": alerts, "detail": state.detail() or None})
            else:
                console.print(escape(state.describe(alerts)), highlight=False)

        res = run_watch(endpoints, pb, opts, on_probe=on_probe,
                        on_listen=lambda port: console.print(f"metrics at http://127.0.0.1:{port}/metrics"))
    except MtpRemoteError as e:
        raise _fail(e) from None
    if res.exit_code:
        raise Exit(code=res.exit_code)
