"""``mtp-remote watch URL...``: probe live endpoints on an interval and export what they do (a thin click command
over :mod:`mtp_remote.watch`; registered by :mod:`mtp_remote.cli.main`)."""

from __future__ import annotations

import json
import sys

import click

from .options import handle_errors, runs_dir_option


@click.command("watch")
@click.argument("urls", nargs=-1, metavar="URL...")
@click.option("--interval", "interval_s", type=float, default=300.0, show_default=True,
              help="Seconds between probe rounds.")
@click.option("--count", type=click.IntRange(min=1), default=None, help="End after N probe rounds (default: run "
                                                                       "until interrupted).")
@click.option("--metrics-file", default=None, help="Prometheus textfile rewritten after each round (node-exporter "
                                                   "textfile collector).")
@click.option("--listen", default=None, metavar="PORT", help="Serve /metrics on 127.0.0.1:PORT.")
@click.option("--on-alert", default=None, metavar="CMD",
              help="Shell command run when a probe loops or a greedy output changes ({endpoint} {url} {reasons} "
                   "{probe} {detail} are replaced, shell-quoted); the watch goes on. Without it the first alert "
                   "ends the watch with exit 1.")
@click.option("-p", "--playbook", default=None, help="Probe with this playbook's prompts, api and sampling "
                                                     "(default: 2 prompts, 1 greedy + 2 sampled each).")
@click.option("--api", type=click.Choice(["generate", "chat"]), default=None,
              help="/generate (per-request acceptance; default) or /v1/chat/completions.")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Sampled requests per prompt per probe.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Max tokens per probe request.")
@click.option("--api-key-env", default=None, metavar="VAR", help="Environment variable holding the API key.")
@click.option("--history", default=None, help="SQLite history file (default RUNS_DIR/history.sqlite).")
@click.option("--no-history", is_flag=True, help="Do not record probes in the history.")
@runs_dir_option("Where the history is (RUNS_DIR/history.sqlite).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per probe on stdout.")
@handle_errors
def watch_cmd(urls, interval_s, count, metrics_file, listen, on_alert, playbook, api, samples, max_tokens,
              api_key_env, history, no_history, runs_dir, as_json):
    """Probe live endpoints (URL or NAME=URL) every --interval seconds: loops, acceptance, greedy stability.

    Each round sends every endpoint a small probe set, one request at a time, and never launches, signals or
    stops anything. Exit codes: 0 no alert, 1 a probe looped or a greedy output changed, 2 bad input."""
    from ..watch.setup import plan_watch  # deferred: keeps --version/--help fast
    from ..watch.watch import watch  # deferred: keeps --version/--help fast

    endpoints, pb, opts = plan_watch(urls, playbook=playbook, api=api, samples=samples, max_tokens=max_tokens,
                                     interval_s=interval_s, count=count, metrics_file=metrics_file, listen=listen,
                                     history=history, no_history=no_history, runs_dir=runs_dir, on_alert=on_alert,
                                     api_key_env=api_key_env)
    n_req = len(pb.prompts) * sum(pb.samples_at(t) for t in pb.temperatures)
    click.echo(f"watching {len(endpoints)} endpoint(s) every {opts.interval_s:g} s: {n_req} requests per probe, "
               f"{pb.concurrency or 1} at a time, max_tokens {pb.max_tokens} ({pb.api})", err=True)

    def on_probe(state, alerts):
        if as_json:
            click.echo(json.dumps({**state.to_dict(), "alerts": alerts, "detail": state.detail() or None}))
        else:
            click.echo(state.describe(alerts))

    res = watch(endpoints, pb, opts, on_probe=on_probe,
                on_listen=lambda port: click.echo(f"metrics at http://127.0.0.1:{port}/metrics", err=True))
    sys.exit(res.exit_code)
