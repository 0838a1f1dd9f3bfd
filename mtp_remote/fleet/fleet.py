"""Fleet: run ``diagnose``, ``mitigate``, ``preflight``, ``status`` or ``stop`` on many hosts at once.

``-H a,b,c`` or an inventory group (``groups:`` in ``inventory.yaml``) names the hosts. Each host runs in its
own thread (at most ``max_workers`` at a time) with its own connection, exactly as a single-host command
would; one host's failure is recorded as that host's outcome (Fabric's ``GroupResult`` habit) and never stops
the others. Each host's environment facts (:mod:`mtp_remote.remote.envfacts`, plus its inventory env and model path)
are collected alongside, so the fleet report can single out the hosts whose verdict differs from the majority
and say in which facts they differ ("corrupts on gpu-3 only: driver 550.54 vs 560.35"). The report is
written to ``runs/fleet-<run-id>/fleet.json`` and ``fleet.md``. ``nightly`` runs here too (per host exactly
the single-host nightly, recorded in the history with the group and the fleet id); its fleet-level summary,
junit and metrics are written by :func:`mtp_remote.fleet.nightly_fleet.run_nightly_fleet`. This module also renders the
mitigation table for the console (rich).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ..config.paths import DEFAULT_INVENTORY, DEFAULT_PLAYBOOK
from ..config.playbook import load_playbook
from ..errors import EXIT_RUN_FAILED, MtpRemoteError, worst_exit
from ..files import load_json_file
from ..experiment import diagnose as api
from ..experiment.hosts import find_playbook, load_config, open_host
from ..experiment.runner import Hooks, new_run_id
from ..host import ops
from ..remote.envfacts import get_environment
from ..report.console import inventory_option, next_step
from ..search.candidates import plan_candidates
from ..search.mitigate import (
    HEADERS,
    CandidateResult,
    corrupting_profile,
    mitigate,
    render_markdown,
    table_rows,
)
from ..search.ranking import pick_best, rank_results, recommendation
from .nightly import run_nightly
from .regression import describe

COMMANDS = ("diagnose", "mitigate", "preflight", "status", "stop")
#: Commands run_fleet accepts: COMMANDS and ``nightly`` (started by ``nightly -H GROUP``, not by ``fleet``).
RUNNABLE = (*COMMANDS, "nightly")
DEFAULT_WORKERS = 8


@dataclass
class HostOutcome:
    """One host's part of a fleet run. ``verdicts``: profile (or check / "server") -> short verdict string;
    ``error``: why the command could not run on that host (then ``exit_code`` is 2)."""

    host: str
    exit_code: int
    verdicts: dict[str, str] = field(default_factory=dict)
    detail: str = ""
    error: str | None = None
    duration_s: float = 0.0
    run_id: str | None = None
    facts: dict = field(default_factory=dict)


@dataclass
class FleetReport:
    command: str
    run_id: str
    hosts: list[HostOutcome]
    wall_s: float
    max_workers: int
    disagreements: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return worst_exit(h.exit_code for h in self.hosts)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(exit_code=self.exit_code, slowest_host_s=max((h.duration_s for h in self.hosts), default=0.0),
                 sum_host_s=sum(h.duration_s for h in self.hosts))
        return d


def host_facts(inventory, host: str) -> dict:
    """Facts to compare hosts by: SGLang, torch, GPUs, driver, architectures, model path, inventory env
    (secrets masked). Any failure becomes ``{"error": ...}``."""
    try:
        with open_host(inventory, host) as (cfg, c, py):
            ef = get_environment(c, cfg, py)
            return {"sglang": ef.sglang, "torch": ef.torch, "driver": ef.driver, "gpus": ", ".join(ef.gpus),
                    "architectures": ", ".join(ef.architectures), "model_path": cfg.model_path,
                    **{f"env {k}": v for k, v in cfg.masked_env().items()}}
    except MtpRemoteError as e:
        return {"error": e.message}


def _run_one(command: str, host: str, *, inventory, playbook, runs_dir, on_progress, from_run=None,
             samples=None, force=False, only=None, hooks: Hooks | None = None,
             nightly: dict | None = None, term_s: float | None = None,
             stop_on_loop: bool | None = None) -> HostOutcome:
    hooks = dataclasses.replace(hooks or Hooks(), on_progress=lambda m: on_progress(host, m))
    if command == "nightly":
        return _nightly_one(host, inventory=inventory, playbook=playbook, runs_dir=runs_dir, hooks=hooks,
                            **(nightly or {}))
    if command == "diagnose":
        overrides = {k: v for k, v in (("samples", samples), ("stop_on_loop", stop_on_loop)) if v is not None}
        res = api.diagnose(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, hooks=hooks,
                           overrides=overrides or None)
        vs = res.summary["verdicts"]
        return HostOutcome(host, res.exit_code, {v["profile"]: v["kind"] for v in vs},
                           "; ".join(f"{v['profile']}: {v['evidence']}" for v in vs), run_id=res.run_id)
    if command == "mitigate":
        res = mitigate(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, from_run=from_run,
                       samples=samples, only=only, hooks=hooks)
        best = res.document.get("best")
        return HostOutcome(host, res.exit_code, {"best": best or "none"},
                           f"profile {res.document['profile']}: best {best or 'none loop-free'}", run_id=res.run_id)

    with open_host(inventory, host) as (cfg, c, py):
        if command == "preflight":
            checks = ops.preflight(c, cfg, load_config(inventory, playbook, host)[2], py)
            bad = [ch for ch in checks if ch.status != "ok"]
            return HostOutcome(host, EXIT_RUN_FAILED if any(ch.status == "fail" for ch in checks) else 0,
                               {ch.name: ch.status for ch in checks},
                               "; ".join(f"{ch.name}: {ch.detail}" for ch in bad) or "all checks ok")
        if command == "status":
            st = ops.status(c, cfg, py)
            return HostOutcome(host, 0, {"server": st.server_state},
                               f"port {cfg.port} {'in use' if st.port_in_use else 'free'}; "
                               f"{len(st.foreign)} foreign SGLang processes")
        res = ops.stop(c, cfg, py, force=force, term_s=term_s or ops.STOP_TERM_S,
                       on_progress=lambda m: on_progress(host, m))
        left = len(res["targets"]) - len(res["forced"])  # ops.stop returns a dict (StopResult as "ours")
        return HostOutcome(host, 0, {"stop": res["ours"]["found"]}, res["ours_text"]
                           + (f"; --force signalled PIDs {res['forced']}" if res["forced"] else "")
                           + (f"; {left} foreign process(es) on its GPUs or port left alone" if left > 0 else ""))


def _nightly_one(host: str, *, inventory, playbook, runs_dir, hooks: Hooks, history_db, group: str,
                 fleet_id: str) -> HostOutcome:
    """One host's nightly (never raises MtpRemoteError: a host that could not be done is an outcome with
    its cause, and has its own artefacts and history row like a single-host nightly)."""
    res = run_nightly(inventory=inventory, host=host, playbook=playbook, runs_dir=runs_dir, history_db=history_db,
                      hooks=hooks, fleet={"group": group, "fleet_id": fleet_id})
    vs = res.summary.get("verdicts", [])
    detail = "; ".join([f"{v['profile']}: {v['evidence']}" for v in vs]
                       + (describe(res.regression) if res.regression is not None else []))
    return HostOutcome(host, res.exit_code, {v["profile"]: v["kind"] for v in vs}, detail,
                       error=res.error.message if res.error is not None else None, run_id=res.run_id)


def _gather(futures: list) -> bool:
    """Wait for every future; a Ctrl-C meanwhile keeps waiting (each host sees it at its next checkpoint and
    ends its own run, keeping its samples and artefacts). Returns whether an interrupt arrived."""
    interrupted = False
    while True:
        try:
            wait(futures)
            return interrupted
        except KeyboardInterrupt:
            interrupted = True


def run_fleet(command: str, hosts: list[str], *, inventory=DEFAULT_INVENTORY, playbook=DEFAULT_PLAYBOOK,
              runs_dir="runs", max_workers: int = DEFAULT_WORKERS, from_run: str | None = None,
              samples: int | None = None, force: bool = False, only: list[str] | None = None,
              on_progress: Callable[[str, str], None] = lambda host, msg: None,
              write: bool = True, hooks: Hooks | None = None, nightly: dict | None = None,
              term_s: float | None = None, stop_on_loop: bool | None = None) -> FleetReport:
    """Run ``command`` on every host (threads, at most ``max_workers`` at once) and build the fleet report.

    Per-host failures (MtpRemoteError, or any other exception: a bug on one host must not hide the others'
    results) are that host's outcome with exit code 2. Writes ``RUNS_DIR/fleet-<run-id>/`` when ``write``.
    ``hooks``: interrupt hooks shared by the hosts (progress goes to ``on_progress``). ``nightly``:
    ``{"history_db", "group"}`` for ``command="nightly"`` (each host's history row gets the group and
    ``fleet-<run-id>``). A Ctrl-C waits for the hosts to end their runs; it is raised again after, except for
    ``nightly``, whose hosts' interrupted outcomes (exit 130) are the report. ``term_s``: ``stop``'s seconds
    after SIGTERM before SIGKILL (``--term-timeout``; default :data:`ops.STOP_TERM_S`)."""
    if command not in RUNNABLE:
        raise ValueError(f"fleet command {command!r}; choose one of {COMMANDS}")
    t0 = time.monotonic()
    run_id = new_run_id()
    if command == "nightly":
        nightly = {**(nightly or {}), "fleet_id": f"fleet-{run_id}"}

    def one(host: str) -> HostOutcome:
        h0 = time.monotonic()
        try:
            out = _run_one(command, host, inventory=inventory, playbook=playbook, runs_dir=runs_dir,
                           on_progress=on_progress, from_run=from_run, samples=samples, force=force, only=only,
                           hooks=hooks, nightly=nightly, term_s=term_s, stop_on_loop=stop_on_loop)
        except MtpRemoteError as e:
            out = HostOutcome(host, e.exit_code if e.exit_code else EXIT_RUN_FAILED, error=e.message)
        except Exception as e:  # noqa: BLE001 - one host's bug is that host's outcome, not the fleet's end
            out = HostOutcome(host, EXIT_RUN_FAILED, error=f"{type(e).__name__}: {e}")
        out.duration_s = round(time.monotonic() - h0, 2)
        if command in ("diagnose", "mitigate", "preflight", "nightly"):
            out.facts = host_facts(inventory, host)
        on_progress(host, f"done in {out.duration_s:.1f} s (exit {out.exit_code})")
        return out

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(hosts)))) as ex:
        futures = [ex.submit(one, h) for h in hosts]
        interrupted = _gather(futures)
    if interrupted and command != "nightly":
        raise KeyboardInterrupt
    outcomes = [f.result() for f in futures]
    report = FleetReport(command=command, run_id=run_id, hosts=outcomes,
                         wall_s=round(time.monotonic() - t0, 2), max_workers=max_workers)
    report.disagreements = disagreements(outcomes)
    if write:
        d = Path(runs_dir) / f"fleet-{report.run_id}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "fleet.json").write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
        (d / "fleet.md").write_text(render_fleet_markdown(report))
    return report


def disagreements(outcomes: list[HostOutcome]) -> list[dict]:
    """For each key (profile, check) whose verdict is not the same on every host that ran: the minority
    hosts, their verdict, the majority's, and the facts in which they differ from the majority hosts."""
    ran = [o for o in outcomes if o.error is None]
    keys = sorted({k for o in ran for k in o.verdicts})
    out = []
    for key in keys:
        by_host = {o.host: o.verdicts.get(key) for o in ran if key in o.verdicts}
        counts = Counter(by_host.values())
        if len(counts) < 2:
            continue
        majority, _ = counts.most_common(1)[0]
        for kind in (k for k in counts if k != majority):
            odd = [h for h, v in by_host.items() if v == kind]
            rest = [h for h, v in by_host.items() if v == majority]
            out.append({"key": key, "verdict": kind, "hosts": odd, "majority": majority, "majority_hosts": rest,
                        "differing_facts": differing_facts([o for o in ran if o.host in odd],
                                                           [o for o in ran if o.host in rest])})
    return out


def differing_facts(odd: list[HostOutcome], rest: list[HostOutcome]) -> list[dict]:
    """Facts whose values on the odd hosts and on the others do not overlap: [{fact, odd, others}]."""
    names = sorted({k for o in odd + rest for k in o.facts if k != "error"})
    out = []
    for k in names:
        a = sorted({str(o.facts.get(k)) for o in odd})
        b = sorted({str(o.facts.get(k)) for o in rest})
        if not set(a) & set(b):
            out.append({"fact": k, "odd": a, "others": b})
    return out


def describe_disagreement(d: dict) -> str:
    """``mtp: spec-corrupts-output on sim-b only (healthy on sim-a, sim-c); differs: driver 560.35 vs 550.54``."""
    facts = "; ".join(f"{f['fact']} {'/'.join(_none(f['odd']))} vs {'/'.join(_none(f['others']))}"
                      for f in d["differing_facts"]) or "no collected fact differs"
    return (f"{d['key']}: {d['verdict']} on {', '.join(d['hosts'])} only ({d['majority']} on "
            f"{', '.join(d['majority_hosts'])}); differs: {facts}")


def _none(values: list[str]) -> list[str]:
    return ["unset" if v == "None" else v for v in values]


def render_fleet_markdown(report: FleetReport) -> str:
    d = report.to_dict()
    lines = [f"# Fleet {report.command} — {len(report.hosts)} hosts", "",
             (f"Wall time {report.wall_s:.1f} s (slowest host {d['slowest_host_s']:.1f} s, sum over hosts "
             f"{d['sum_host_s']:.1f} s; at most {report.max_workers} hosts at once). Exit code {report.exit_code}."),
             "", "| host | exit | verdicts | detail |", "|---|---|---|---|"]
    for h in report.hosts:
        verdicts = ", ".join(f"{k}: {v}" for k, v in h.verdicts.items()) or "–"
        detail = (f"error: {h.error}" if h.error else h.detail).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {h.host} | {h.exit_code} | {verdicts} | {detail[:300]} |")
    lines.append("")
    if report.disagreements:
        lines += ["## Hosts that disagree", ""] + [f"- {describe_disagreement(x)}" for x in report.disagreements]
    else:
        lines.append("Every host that ran agrees.")
    failed = [h.host for h in report.hosts if h.error]
    if failed:
        lines += ["", f"Could not run on: {', '.join(failed)}."]
    return "\n".join(lines) + "\n"


# -- console rendering -----------------------------------------------------------------------------------

def fleet_table(report: FleetReport):
    t = Table(title=f"Fleet {report.command}: {len(report.hosts)} hosts, wall {report.wall_s:.1f} s")
    for col in ("host", "exit", "verdicts", "time", "detail"):
        t.add_column(col, overflow="fold")
    for h in report.hosts:
        t.add_row(h.host, str(h.exit_code), ", ".join(f"{k}: {v}" for k, v in h.verdicts.items()) or "–",
                  f"{h.duration_s:.1f} s", f"[red]{h.error}[/]" if h.error else h.detail[:200])
    return t


def print_fleet(console, report: FleetReport, runs_dir="runs", inventory=None) -> int:
    """Print the fleet table, the disagreeing hosts and where the report is; returns the fleet exit code."""
    console.print(fleet_table(report))
    for d in report.disagreements:
        console.print(f"[bold yellow]disagree:[/] {escape(describe_disagreement(d))}")
    d = report.to_dict()
    console.print(f"wall {report.wall_s:.1f} s; slowest host {d['slowest_host_s']:.1f} s; sum {d['sum_host_s']:.1f} s")
    where = Path(runs_dir) / f"fleet-{report.run_id}" / "fleet.md"
    console.print(f"report: {where}  (exit code {report.exit_code})" if where.exists() else
                  f"exit code {report.exit_code}")
    for line in fleet_next_steps(report, runs_dir, inventory=inventory):
        console.print(line, highlight=False, markup=False)
    return report.exit_code


def _summary_or_none(path: Path) -> dict | None:
    """A host's summary.json, or None when it is missing or unreadable (then the host's error says why)."""
    try:
        return load_json_file(path)
    except (OSError, ValueError):
        return None


def fleet_next_steps(report: FleetReport, runs_dir="runs", *, inventory=None) -> list[str]:
    """The ``next:`` lines after a fleet diagnose: one per host with something to do (each host's own next step,
    from its ``summary.json``, as a single-host run prints it; a host that could not be run: its cause and the
    preflight to run), or one line when no host has anything to fix. Other commands: none. ``inventory``: the ``-i``
    the fleet was given (each command names it)."""
    if report.command != "diagnose":
        return []

    lines, calm = [], []
    for h in report.hosts:
        run_dir = Path(runs_dir) / h.run_id if h.run_id else None
        summary = run_dir / "summary.json" if run_dir else None
        doc = _summary_or_none(summary) if summary is not None else None
        if doc is not None:
            step = next_step(doc, run_dir, inventory=inventory)
        elif h.error:
            step = (f"fix the cause ({h.error}), then check the host: "
                    f"`mtp-remote preflight -H {h.host}{inventory_option(inventory)}`")
        else:
            continue
        (calm if step.startswith("nothing to fix") else lines).append(f"next [{h.host}]: {step}")
    if not lines and calm:
        return [f"next: nothing to fix on {len(calm)} host(s); compare each with an earlier run: "
                f"`mtp-remote compare RUN_A RUN_B`"]
    return lines


def mitigation_table(doc: dict):
    """The ranked mitigation table (rich); skipped rows say only "skipped" (:func:`print_mitigation` lists why)."""
    sim = " [simulated host]" if doc.get("simulated") else ""
    t = Table(title=f"Mitigation of {doc['profile']} on {doc['host']}{sim} — loop-free candidates ranked by "
                    f"speed over the baseline (non-looping samples; [95% CI]; =#1: not distinguishable from #1)",
              title_justify="left")
    for h in HEADERS:
        t.add_column(h, overflow="fold", no_wrap=h in ("rank", "candidate", "tok/s", "vs base", "verdict"))
    for row in table_rows(doc):
        style = ("cyan" if row[-1].startswith("baseline") else "green" if row[0] else
                 "red" if "corrupts" in row[-1] else None)
        t.add_row(*row[:-1], row[-1].split(":")[0] if row[-1].startswith(("skipped", "pending")) else row[-1],
                  style=style)
    return t


def print_mitigation(console, doc: dict) -> None:
    """The table, then one line per skipped candidate with the reason."""
    console.print(mitigation_table(doc))
    console.print(escape(recommendation(doc)).replace("**", ""))
    for r in doc["rows"]:
        if r["status"] == "skipped":
            console.print(f"[dim]skipped[/] {r['name']} ({escape(r['change'])}): {escape(r['evidence'])}")


# -- mitigate spread over a group ------------------------------------------------------------------------

def spread_mitigate(hosts: list[str], *, inventory=DEFAULT_INVENTORY, playbook=DEFAULT_PLAYBOOK,
                    runs_dir="runs", samples: int | None = None, only: list[str] | None = None,
                    max_workers: int = DEFAULT_WORKERS,
                    on_progress: Callable[[str, str], None] = lambda host, msg: None) -> dict:
    """``mitigate`` with its candidates spread over the hosts that serve the same model on the same SGLang
    release as the first host: each candidate runs on one host, each host samples its own baseline (the
    first also runs the corrupting profile, the reference row), and the rows are merged into one table ranked
    by tokens/s *relative to the host's own baseline*. Hosts that differ are left out, with the reason.
    Returns the merged document (``rows`` carry their ``host``); writes ``RUNS_DIR/fleet-<id>/mitigation.md``."""
    t0 = time.monotonic()
    facts = {h: host_facts(inventory, h) for h in hosts}

    def key(h: str) -> tuple:
        return facts[h].get("sglang"), facts[h].get("model_path"), facts[h].get("architectures")

    same = [h for h in hosts if "error" not in facts[h] and key(h) == key(hosts[0])]
    left_out = {h: facts[h].get("error") or f"serves {key(h)}, not {key(hosts[0])}" for h in hosts if h not in same}
    pb = load_playbook(find_playbook(playbook, inventory))
    profile = corrupting_profile(pb, None, None)
    f0 = facts[hosts[0]]
    cands = plan_candidates(model_path=f0.get("model_path") or "", base_flags=pb.base_flags,
                            profile_flags=pb.profiles[profile].flags, playbook_mitigations=pb.mitigations,
                            sglang_version=f0.get("sglang"),
                            architectures=tuple(a for a in (f0.get("architectures") or "").split(", ") if a))
    if only:
        cands = [x for x in cands if x.name in only]
    launched = [x.name for x in cands if x.skipped is None]
    share = {h: launched[i::len(same)] for i, h in enumerate(same)}

    def one(i_host):
        i, host = i_host
        if not share[host] and i:
            return host, None, None
        try:
            res = mitigate(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, samples=samples,
                           only=[x.name for x in cands if x.name in share[host] or x.skipped] if share[host] else
                           [x.name for x in cands if x.skipped], reference=i == 0,
                           hooks=Hooks(on_progress=lambda m: on_progress(host, m)))
            return host, res.document, None
        except MtpRemoteError as e:
            return host, None, e.message

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(same)))) as ex:
        results = list(ex.map(one, enumerate(same)))
    rows, errors, runs, untried = [], dict(left_out), {}, {}
    for host, doc, err in results:
        if err:  # its share of the candidates was not tried: said, and the spread could not be done whole
            untried[host] = share[host]
            errors[host] = err + (f"; its candidates were not tried: {', '.join(share[host])}" if share[host] else "")
        if not doc:
            continue
        runs[host] = doc["run_id"]
        for r in doc["rows"]:
            if r["status"] in ("skipped", "baseline") and host != same[0]:
                continue  # one row of each (every host's own baseline is the 1.00x of its rows)
            if r["status"] == "reference" and r.get("n") is None:
                continue
            rows.append(CandidateResult(**{**{k: v for k, v in r.items() if k != "rank"},
                                           "flags": tuple(r["flags"]), "host": host}))
    ranked = rank_results(rows, by="speed_vs_baseline")  # absolute tokens/s differ between hosts
    best = pick_best(ranked)
    doc = {"kind": "mitigate-spread", "run_id": new_run_id(), "host": ", ".join(same), "profile": profile,
           "simulated": None, "facts": {"sglang": f0.get("sglang"), "architectures": []},
           "reused": f"candidates spread over {len(same)} hosts; runs {runs}", "hosts": same, "left_out": errors,
           "rows": [r.to_dict() for r in ranked], "best": best.name if best else None, "untried": untried,
           "exit_code": 2 if any(untried.values()) else 0 if best else 1, "wall_s": round(time.monotonic() - t0, 2)}
    doc["recommendation"] = recommendation(doc)
    d = Path(runs_dir) / f"fleet-{doc['run_id']}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "mitigation.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    (d / "mitigation.md").write_text(render_markdown(doc))
    return doc
