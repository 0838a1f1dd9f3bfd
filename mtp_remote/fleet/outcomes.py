"""A command's outcome on many hosts: one :class:`HostOutcome` per host, the :class:`FleetReport` over them, the
hosts that disagree (and the facts they differ in), and :func:`fan_out`, which runs a function of one host on
every host at once (a thread and a connection each, a concurrency limit) and never lets one host's failure
stop the others (Fabric's ``GroupResult`` habit).

Light (the configuration, the transport and the host facts): ``status -H a,b`` fans out without importing the
experiment; :mod:`mtp_remote.fleet.fleet` runs the workflows (diagnose, mitigate, nightly) through it.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..config.loaded import as_loaded
from ..errors import EXIT_RUN_FAILED, MtpRemoteError, worst_exit
from ..experiment.hosts import open_host
from ..experiment.run_id import new_run_id
from ..remote.envfacts import get_environment
from .records import Disagreement, FactDifference

#: Hosts a fleet command runs at once unless told otherwise.
DEFAULT_WORKERS = 8
#: The commands whose hosts' environment facts are collected (to explain the hosts that disagree).
WITH_FACTS = ("diagnose", "mitigate", "preflight", "nightly")


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
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return worst_exit(h.exit_code for h in self.hosts)

    def to_dict(self) -> dict:
        d = {**asdict(self), "disagreements": [x.to_dict() for x in self.disagreements]}
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


def gather(futures: list) -> bool:
    """Wait for every future; a Ctrl-C meanwhile keeps waiting (each host sees it at its next checkpoint and
    ends its own run, keeping its samples and artefacts). Returns whether an interrupt arrived."""
    interrupted = False
    while True:
        try:
            wait(futures)
            return interrupted
        except KeyboardInterrupt:
            interrupted = True


def fan_out(command: str, hosts: list[str], run_one: Callable[[str], HostOutcome], *, inventory, runs_dir="runs",
            max_workers: int = DEFAULT_WORKERS, on_progress: Callable[[str, str], None] = lambda host, msg: None,
            write: bool = True, run_id: str | None = None) -> FleetReport:
    """``run_one(host)`` on every host (threads, at most ``max_workers`` at once) and the fleet report.

    Per-host failures (MtpRemoteError, or any other exception: a bug on one host must not hide the others'
    results) are that host's outcome with exit code 2. Writes ``RUNS_DIR/fleet-<run-id>/`` (``fleet.json``,
    ``fleet.md``) when ``write``. A Ctrl-C waits for the hosts to end their runs and is raised again after,
    except for ``nightly``, whose hosts' interrupted outcomes (exit 130) are the report. ``run_id``: the
    fleet's (default: a new one)."""
    t0 = time.monotonic()
    run_id = run_id or new_run_id()
    inventory = as_loaded(inventory)  # read once, shared by the hosts' threads

    def one(host: str) -> HostOutcome:
        h0 = time.monotonic()
        try:
            out = run_one(host)
        except MtpRemoteError as e:
            out = HostOutcome(host, e.exit_code if e.exit_code else EXIT_RUN_FAILED, error=e.message)
        except Exception as e:  # noqa: BLE001 - one host's bug is that host's outcome, not the fleet's end
            out = HostOutcome(host, EXIT_RUN_FAILED, error=f"{type(e).__name__}: {e}")
        out.duration_s = round(time.monotonic() - h0, 2)
        if command in WITH_FACTS:
            out.facts = host_facts(inventory, host)
        on_progress(host, f"done in {out.duration_s:.1f} s (exit {out.exit_code})")
        return out

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(hosts)))) as ex:
        futures = [ex.submit(one, h) for h in hosts]
        interrupted = gather(futures)
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


def disagreements(outcomes: list[HostOutcome]) -> list[Disagreement]:
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
            out.append(Disagreement(key=key, verdict=kind, hosts=odd, majority=majority, majority_hosts=rest,
                                    differing_facts=differing_facts([o for o in ran if o.host in odd],
                                                                    [o for o in ran if o.host in rest])))
    return out


def differing_facts(odd: list[HostOutcome], rest: list[HostOutcome]) -> list[FactDifference]:
    """Facts whose values on the odd hosts and on the others do not overlap: [{fact, odd, others}]."""
    names = sorted({k for o in odd + rest for k in o.facts if k != "error"})
    out = []
    for k in names:
        a = sorted({str(o.facts.get(k)) for o in odd})
        b = sorted({str(o.facts.get(k)) for o in rest})
        if not set(a) & set(b):
            out.append(FactDifference(fact=k, odd=a, others=b))
    return out


def describe_disagreement(d: Disagreement | dict) -> str:
    """``mtp: spec-corrupts-output on sim-b only (healthy on sim-a, sim-c); differs: driver 560.35 vs 550.54``."""
    d = Disagreement.of(d)
    facts = "; ".join(f"{f.fact} {'/'.join(_none(f.odd))} vs {'/'.join(_none(f.others))}"
                      for f in d.differing_facts) or "no collected fact differs"
    return (f"{d.key}: {d.verdict} on {', '.join(d.hosts)} only ({d.majority} on "
            f"{', '.join(d.majority_hosts)}); differs: {facts}")


def _none(values: list[str]) -> list[str]:
    return ["unset" if v == "None" else v for v in values]


def at_a_clause(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else cut at its last clause end (``; ``, ``. ``, ``, ``)
    within the limit and marked `` …`` -- never in the middle of a figure or a word (the fleet table cut evidence
    mid-sentence)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind(sep) for sep in ("; ", ". ", ", "))
    if cut < limit // 3:  # no clause end in reach: the last space
        cut = head.rfind(" ") if head.rfind(" ") > 0 else limit
    return text[:cut].rstrip(" ;,.") + " …"


def render_fleet_markdown(report: FleetReport) -> str:
    d = report.to_dict()
    lines = [f"# Fleet {report.command} — {len(report.hosts)} hosts", "",
             (f"Wall time {report.wall_s:.1f} s (slowest host {d['slowest_host_s']:.1f} s, sum over hosts "
             f"{d['sum_host_s']:.1f} s; at most {report.max_workers} hosts at once). Exit code {report.exit_code}."),
             "", "| host | exit | verdicts | detail |", "|---|---|---|---|"]
    for h in report.hosts:
        verdicts = ", ".join(f"{k}: {v}" for k, v in h.verdicts.items()) or "–"
        detail = (f"error: {h.error}" if h.error else h.detail).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {h.host} | {h.exit_code} | {verdicts} | {detail} |")  # whole: the table's row wraps
    lines.append("")
    if report.disagreements:
        lines += ["## Hosts that disagree", ""] + [f"- {describe_disagreement(x)}" for x in report.disagreements]
    else:
        lines.append("Every host that ran agrees.")
    failed = [h.host for h in report.hosts if h.error]
    if failed:
        lines += ["", f"Could not run on: {', '.join(failed)}."]
    return "\n".join(lines) + "\n"
