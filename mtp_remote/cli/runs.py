"""CLI commands over the inventory and the runs on disk: ``hosts``, ``report``, ``compare``.

Thin click commands (registered by :mod:`mtp_remote.cli.main`) over :mod:`mtp_remote.runs.compare` and the inventory;
no network. ``--json`` prints the same data for scripts. Errors are MtpRemoteError, turned into one red line
and exit 2 by the CLI's ``handle_errors``.
"""

from __future__ import annotations

import json
import sys

import click

from .lazy import make_console
from .options import runs_dir_option

# rich and the report layer are imported inside the commands: importing this module (as ``mtp-remote
# --help`` does) must stay as light as click itself.


def escape(text: str) -> str:
    from rich.markup import escape as esc  # deferred: keeps --version/--help fast

    return esc(text)


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.2g}"


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def hosts_table(inv, path):
    """One row per inventory host (a rich Table): name (* default), how it is reached, engine, GPUs ("all" when
    ``gpus`` is unset: the server sees every GPU, not none), port, model, faults."""
    from rich.table import Table  # deferred: keeps --version/--help fast

    t = Table(title=f"Hosts — {path}", title_justify="left")
    for col in ("host", "transport", "address", "engine", "GPUs", "port", "model", "faults injected"):
        t.add_column(col)
    for name, h in inv.hosts.items():
        where = "this machine" if h.transport == "local" else f"{h.user + '@' if h.user else ''}{h.address}:{h.ssh_port}"
        if getattr(h, "gateway", None):
            where += f" via {h.gateway}"
        faults = h.env.get("SGLANG_SIM_FAULTS", "") if h.is_sim else ""
        engine = f"{h.engine} (simulated)" if h.is_sim else h.engine
        t.add_row(f"{name}{' *' if name == inv.default_host else ''}", h.transport, escape(where), engine,
                  ",".join(map(str, h.gpus)) if h.gpus else "all", str(h.port), escape(h.model_path or "–"),
                  escape(faults or "–"))
    t.caption = "* default host (used without -H)"
    return t


def host_dict(name: str, h, default: str) -> dict:
    return {"name": name, "default": name == default, "transport": h.transport, "address": h.address,
            "user": h.user, "ssh_port": h.ssh_port, "engine": h.engine, "simulated": h.is_sim, "gpus": h.gpus,
            "port": h.port, "model_path": h.model_path, "workdir": h.workdir,
            "faults": h.env.get("SGLANG_SIM_FAULTS") if h.is_sim else None}


@click.command("hosts")
@click.option("-i", "--inventory", default=None,
              help="Inventory (YAML). Default: $MTP_REMOTE_INVENTORY, else inventory.yaml here or in a parent.")
@click.option("--json", "as_json", is_flag=True, help="Print the hosts as JSON.")
def hosts_cmd(inventory, as_json):
    """List the hosts of the inventory: how each is reached, engine, GPUs, port, model."""
    from ..config.inventory import load_inventory  # deferred: keeps --version/--help fast
    from ..config.paths import find_inventory  # not .api: listing hosts needs no scipy (~1 s)

    path = find_inventory(inventory)
    inv = load_inventory(path)
    if as_json:
        click.echo(json.dumps({"inventory": str(path), "default_host": inv.default_host,
                               "hosts": [host_dict(n, h, inv.default_host) for n, h in inv.hosts.items()]}, indent=2))
        return
    make_console().print(hosts_table(inv, path))


_runs_dir_opt = runs_dir_option()


@click.command("report")
@click.argument("run", required=False, default="last", metavar="[RUN_ID|last|DIR]")
@_runs_dir_opt
@click.option("--open", "open_it", is_flag=True, help="Open report.html in the browser.")
def report_cmd(run, runs_dir, open_it):
    """Re-render a run's report.md and report.html from its summary.json (default: the last run).

    A run that could not be done has no report: its status and cause are printed (exit 2)."""
    from ..report.console import print_run_end, verdict_table  # deferred: keeps --version/--help fast
    from ..report.document import load_summary  # deferred: keeps --version/--help fast
    from ..runs.compare import readable_run, rerender, resolve_run  # deferred: keeps --version/--help fast

    run_dir = readable_run(resolve_run(run, runs_dir), ("run",), "report")
    paths = rerender(run_dir)
    doc = load_summary(run_dir)
    console = make_console()
    console.print(verdict_table(doc))
    print_run_end(console, doc, run_dir, doc.get("exit_code", 0), afterwards=True)
    if open_it:
        import webbrowser  # deferred: keeps --version/--help fast

        if not webbrowser.open(paths["html"].resolve().as_uri()):
            click.echo(f"no browser found; open {paths['html']} by hand", err=True)


def compare_table(res: dict):
    """The comparison of :func:`mtp_remote.runs.compare.compare_runs` as a rich Table, one row per cell."""
    from rich.table import Table  # deferred: keeps --version/--help fast

    a, b = res["a"], res["b"]
    t = Table(title=f"Compare — A {a['run_id']} ({a['host']}, {a['playbook']}) vs B {b['run_id']} "
                    f"({b['host']}, {b['playbook']})", title_justify="left",
              caption="loops: Fisher exact (p B loops more, one-sided; two-sided); speed: per-sample tokens/s, "
                      "Welch t and Mann-Whitney U (two-sided)")
    for col in ("profile", "T", "loops A → B", "p more / p ≠", "accept len A → B", "tok/s A → B", "B/A",
                "p Welch / MW"):
        t.add_column(col, justify="left" if col == "profile" else "right")
    for r in res["cells"]:
        if r["only_in"]:
            t.add_row(r["profile"], f"{r['temperature']:g}", f"only in {r['only_in'].upper()}", "", "", "", "", "")
            continue
        lo, sp = r["loops"], r["speed"]
        style = "bold red" if lo["p_worse"] < 0.05 else ""
        t.add_row(r["profile"], f"{r['temperature']:g}",
                  f"[{style}]{lo['loops_a']}/{lo['n_a']} → {lo['loops_b']}/{lo['n_b']}[/]" if style else
                  f"{lo['loops_a']}/{lo['n_a']} → {lo['loops_b']}/{lo['n_b']}",
                  f"{_p(lo['p_worse'])} / {_p(lo['p_two_sided'])}",
                  f"{_num(r['accept_a'])} → {_num(r['accept_b'])}",
                  f"{_num(sp['mean_a'], 1)} → {_num(sp['mean_b'], 1)}", _num(sp["ratio"]),
                  f"{_p(sp['p_welch'])} / {_p(sp['p_mannwhitney'])}")
    return t


@click.command("compare")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="[RUN_B]", required=False, default="last")
@_runs_dir_opt
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_cmd(run_a, run_b, runs_dir, as_json):
    """Compare two runs cell by cell: loop rates (Fisher), acceptance, speed (Welch, Mann-Whitney).

    RUN_A is the reference, RUN_B (default: last) the run under test; each is a run id, 'last' or a
    directory. Exit 1 when a cell of B loops significantly more than in A (one-sided p < 0.05)."""
    from ..runs.compare import compare_runs, readable_run, resolve_run  # deferred: keeps --version/--help fast

    res = compare_runs(*(readable_run(resolve_run(r, runs_dir), ("run",), "compare") for r in (run_a, run_b)))
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        console = make_console()
        console.print(compare_table(res))
        for side in ("a", "b"):
            if res[side]["status"] != "completed":  # a run that could not be done has no cells to compare
                console.print(f"run {side.upper()} ({res[side]['run_id']}) {res[side]['status']}: it has no cells, "
                              f"so its rows show as only in {'B' if side == 'a' else 'A'}; "
                              f"`mtp-remote report {res[side]['run_id']}` says why", highlight=False, markup=False)
        changed = [v for v in res["verdicts"] if v["a"] != v["b"]]
        for v in changed:
            console.print(f"verdict {v['profile']}: {v['a'] or '–'} → {v['b'] or '–'}", highlight=False)
    worse = any(r.get("loops", {}).get("p_worse", 1.0) < 0.05 for r in res["cells"])
    sys.exit(1 if worse else 0)
