"""Fleet: run ``diagnose``, ``mitigate``, ``preflight``, ``status`` or ``stop`` on many hosts at once.

``-H a,b,c`` or an inventory group (``groups:`` in ``inventory.yaml``) names the hosts. Each host runs in its
own thread (at most ``max_workers`` at a time) with its own connection, exactly as a single-host command
would; one host's failure is recorded as that host's outcome (Fabric's ``GroupResult`` habit) and never stops
the others. Each host's environment facts (:mod:`mtp_remote.remote.envfacts`, plus its inventory env and model path)
are collected alongside, so the fleet report can single out the hosts whose verdict differs from the majority
and say in which facts they differ ("corrupts on gpu-3 only: driver 550.54 vs 560.35"). The report is
written to ``runs/fleet-<run-id>/fleet.json`` and ``fleet.md``. ``nightly`` runs here too (per host exactly
the single-host nightly, recorded in the history with the group and the fleet id); its fleet-level summary,
junit and metrics are written by :func:`mtp_remote.fleet.nightly_fleet.run_nightly_fleet`. The host outcomes, the
report and the fan-out are :mod:`mtp_remote.fleet.outcomes`; ``preflight``/``status``/``stop`` per host
:mod:`mtp_remote.fleet.host_ops`; the console rendering :mod:`mtp_remote.fleet.console`. ``mitigate --spread``
(:func:`spread_mitigate`) shares one mitigation's candidates out over a group.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..config.loaded import as_loaded
from ..config.paths import DEFAULT_INVENTORY, DEFAULT_PLAYBOOK
from ..errors import MtpRemoteError
from ..experiment import diagnose as api
from ..experiment.run_id import new_run_id
from ..experiment.runner import Hooks
from ..records.summary import Environment
from ..search.candidates import plan_candidates
from ..search.mitigate import corrupting_profile, mitigate
from ..search.mitigation_report import render_markdown
from ..search.ranking import familywise_loop_free, pick_best, rank_results, recommendation
from ..search.records import CandidateResult, MitigationDoc
from .host_ops import HOST_COMMANDS, host_outcome
from .nightly import run_nightly
from .outcomes import DEFAULT_WORKERS, FleetReport, HostOutcome, fan_out, host_facts
from .records import ServedFacts
from .regression import describe

#: The commands ``fab fleet`` runs (``mtp-remote CMD -H a,b,c`` too).
COMMANDS = ("diagnose", "mitigate", *HOST_COMMANDS)
#: Commands run_fleet accepts: COMMANDS and ``nightly`` (started by ``nightly -H GROUP``, not by ``fleet``).
RUNNABLE = (*COMMANDS, "nightly")


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
        vs = res.summary.verdicts
        return HostOutcome(host, res.exit_code, {v.profile: v.kind for v in vs},
                           "; ".join(f"{v.profile}: {v.evidence}" for v in vs), run_id=res.run_id)
    if command == "mitigate":
        res = mitigate(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, from_run=from_run,
                       samples=samples, only=only, hooks=hooks)
        best = res.document.best
        return HostOutcome(host, res.exit_code, {"best": best or "none"},
                           f"profile {res.document.profile}: best {best or 'none loop-free'}", run_id=res.run_id)

    return host_outcome(command, host, inventory=inventory, playbook=playbook, force=force, term_s=term_s,
                        on_progress=on_progress)


def _nightly_one(host: str, *, inventory, playbook, runs_dir, hooks: Hooks, history_db, group: str,
                 fleet_id: str) -> HostOutcome:
    """One host's nightly (never raises MtpRemoteError: a host that could not be done is an outcome with
    its cause, and has its own artefacts and history row like a single-host nightly)."""
    res = run_nightly(inventory=inventory, host=host, playbook=playbook, runs_dir=runs_dir, history_db=history_db,
                      hooks=hooks, fleet={"group": group, "fleet_id": fleet_id})
    vs = res.summary.verdicts
    detail = "; ".join([f"{v.profile}: {v.evidence}" for v in vs]
                       + (describe(res.regression) if res.regression is not None else []))
    return HostOutcome(host, res.exit_code, {v.profile: v.kind for v in vs}, detail,
                       error=res.error.message if res.error is not None else None, run_id=res.run_id)


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
    run_id = new_run_id()
    inventory = as_loaded(inventory)  # read once, shared by the hosts' threads
    if command == "nightly":
        nightly = {**(nightly or {}), "fleet_id": f"fleet-{run_id}"}

    def one(host: str) -> HostOutcome:
        return _run_one(command, host, inventory=inventory, playbook=playbook, runs_dir=runs_dir,
                        on_progress=on_progress, from_run=from_run, samples=samples, force=force, only=only,
                        hooks=hooks, nightly=nightly, term_s=term_s, stop_on_loop=stop_on_loop)

    return fan_out(command, hosts, one, inventory=inventory, runs_dir=runs_dir, max_workers=max_workers,
                   on_progress=on_progress, write=write, run_id=run_id)


# -- mitigate spread over a group ------------------------------------------------------------------------

def spread_mitigate(hosts: list[str], *, inventory=DEFAULT_INVENTORY, playbook=DEFAULT_PLAYBOOK,
                    runs_dir="runs", samples: int | None = None, only: list[str] | None = None,
                    max_workers: int = DEFAULT_WORKERS,
                    on_progress: Callable[[str, str], None] = lambda host, msg: None) -> MitigationDoc:
    """``mitigate`` with its candidates spread over the hosts that serve the same model on the same SGLang
    release as the first host: each candidate runs on one host, each host samples its own baseline and the
    corrupting profile as deployed (its reference row), and the rows are merged into one table ranked by
    tokens/s *relative to the host's own baseline*. A cure only means something where the bug reproduces: the
    candidates of a host whose as-deployed profile is not ``spec-corrupts-output`` there are
    ``not-comparable`` (shown, not ranked), and "loop-free" is Holm-adjusted over every candidate of the merged
    table (``ranking.familywise_loop_free``). Hosts that differ are left out, with the reason.
    Returns the merged document (``rows`` carry their ``host``); writes ``RUNS_DIR/fleet-<id>/mitigation.md``."""
    t0 = time.monotonic()
    inventory = as_loaded(inventory)  # read once for every host
    plan = _plan_spread(hosts, inventory, playbook, only)

    def one(i_host):
        i, host = i_host
        mine = plan.share[host]
        if not mine and i:
            return host, None, None
        try:
            res = mitigate(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, samples=samples,
                           only=[x.name for x in plan.candidates if x.name in mine or x.skipped], reference=True,
                           hooks=Hooks(on_progress=lambda m: on_progress(host, m)))
            return host, res.document, None
        except MtpRemoteError as e:
            return host, None, e.message

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(plan.same)))) as ex:
        results = list(ex.map(one, enumerate(plan.same)))
    doc = _merged_document(plan, results, plan.pb.compare.alpha)
    doc.wall_s = round(time.monotonic() - t0, 2)
    doc.recommendation = recommendation(doc)
    d = Path(runs_dir) / f"fleet-{doc.run_id}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "mitigation.json").write_text(json.dumps(doc.to_dict(), indent=2, default=str) + "\n")
    (d / "mitigation.md").write_text(render_markdown(doc))
    return doc


@dataclasses.dataclass
class _SpreadPlan:
    """Who runs what in a spread: the hosts serving what the first serves (``same``), those left out (host →
    why), the playbook and the profile mitigated, the first host's facts, the candidates and each host's
    ``share`` of the launched ones."""

    same: list[str]
    left_out: dict[str, str]
    pb: object
    profile: str
    first: ServedFacts
    candidates: list
    share: dict[str, list[str]]


def _plan_spread(hosts: list[str], inventory, playbook, only: list[str] | None) -> _SpreadPlan:
    """The hosts that serve the first host's model on its release, and the candidates shared out over them."""
    facts = {h: ServedFacts.of(host_facts(inventory, h)) for h in hosts}
    same = [h for h in hosts if facts[h].error is None and facts[h].key() == facts[hosts[0]].key()]
    left_out = {h: facts[h].error or f"serves {facts[h].key()}, not {facts[hosts[0]].key()}"
                for h in hosts if h not in same}
    pb = inventory.playbook(inventory.find_playbook(playbook))
    profile = corrupting_profile(pb, None, None)
    f0 = facts[hosts[0]]
    cands = plan_candidates(model_path=f0.model_path or "", base_flags=pb.base_flags,
                            profile_flags=pb.profiles[profile].flags, playbook_mitigations=pb.mitigations,
                            sglang_version=f0.sglang,
                            architectures=tuple(a for a in (f0.architectures or "").split(", ") if a))
    if only:
        cands = [x for x in cands if x.name in only]
    launched = [x.name for x in cands if x.skipped is None]
    return _SpreadPlan(same, left_out, pb, profile, f0, cands, {h: launched[i::len(same)] for i, h in enumerate(same)})


def _merged_document(plan: _SpreadPlan, results: list, alpha: float) -> MitigationDoc:
    """The hosts' mitigation documents merged into one ranked table (the first host's skipped and baseline rows
    stand for all; a host's candidates are ``not-comparable`` where the as-deployed profile does not corrupt);
    a host that failed has its share ``untried`` (exit code 2)."""
    rows, errors, runs, untried = [], dict(plan.left_out), {}, {}
    for host, doc, err in results:
        if err:  # its share of the candidates was not tried: said, and the spread could not be done whole
            untried[host] = plan.share[host]
            errors[host] = err + (f"; its candidates were not tried: {', '.join(plan.share[host])}"
                                  if plan.share[host] else "")
        if doc:
            runs[host] = doc.run_id
            rows += _host_rows(doc, host, plan)
    familywise_loop_free(rows, alpha)
    ranked = rank_results(rows, by="speed_vs_baseline")  # absolute tokens/s differ between hosts
    best = pick_best(ranked)
    return MitigationDoc(
        kind="mitigate-spread", run_id=new_run_id(), host=", ".join(plan.same), profile=plan.profile, simulated=None,
        facts=Environment(sglang=plan.first.sglang, architectures=[]),
        reused=f"candidates spread over {len(plan.same)} hosts; runs {runs}", hosts=plan.same, left_out=errors,
        rows=ranked, best=best.name if best else None, untried=untried,
        exit_code=2 if any(untried.values()) else 0 if best else 1)


def _host_rows(doc: MitigationDoc, host: str, plan: _SpreadPlan) -> list[CandidateResult]:
    """One host's rows of the merged table, marked with the host (rank cleared: the table is ranked again)."""
    ref = next((r.verdict for r in doc.with_status("reference")), None)
    out = []
    for r in doc.rows:
        if r.status in ("skipped", "baseline") and host != plan.same[0]:
            continue  # one row of each (every host's own baseline is the 1.00x of its rows)
        if r.status == "reference" and r.n is None:
            continue
        row = r.model_copy(update={"host": host, "rank": None})
        if ref != "spec-corrupts-output" and r.status not in ("reference", "baseline", "skipped"):
            row.status = "not-comparable"
            row.evidence = (f"{plan.profile} as deployed does not reproduce the bug on {host} ({ref or 'not run'}): "
                            f"a cure measured there is not comparable")
        out.append(row)
    return out
