"""The nightly over a group of SLURM hosts as one job array: ``nightly -H <group>`` when every host of the group is a
``server: {kind: slurm}`` host behind one login node (:func:`mtp_remote.fleet.nightly_fleet.run_nightly_fleet`
chooses it).

The controller submits one array task per host (:func:`mtp_remote.remote.slurm.plan_array_script`); each task runs
the single-host nightly in place on the node the scheduler gave it, its servers as steps of its own allocation
(:mod:`mtp_remote.fleet.array_task`), writing into a fleet directory on the shared filesystem. The controller
never reaches the nodes: it watches the array in the queue from the login node, then brings the fleet
directory back in one round trip and aggregates what landed — each host's run directory under ``RUNS_DIR/``, the
regression check and history row against the controller's history (as a single-host nightly would), and
``RUNS_DIR/fleet-<id>/`` (summary.json, junit.xml, metrics.prom, fleet.json/fleet.md) naming the hosts that
disagree with the node each ran on. A host whose task never ran (cancelled while pending, the array stuck in the
queue, a node that died) is said as such, with the scheduler's last word. An opt-in hook (``server.drain_hook``)
runs a command on the login node for each node whose nightly corrupts output (e.g. drain it).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shlex
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..config.loaded import as_loaded
from ..errors import EXIT_RUN_FAILED, ConfigError, RemoteError
from ..experiment.hosts import find_playbook, open_host
from ..experiment.run_id import new_run_id
from ..remote import facts
from ..remote import slurm as sl
from ..remote import slurm_array as sa
from ..report.document import load_summary
from ..report.records import record_history
from .outcomes import FleetReport, HostOutcome, disagreements, render_fleet_markdown
from .records import TaskRecord
from .nightly import DEFAULT_NIGHTLY_PLAYBOOK, check_and_record

#: Seconds between two looks at the array in the queue.
POLL_S = 2.0
#: How long the controller waits for the whole array by default (seconds).
WAIT_S = 6 * 3600.0
#: Inventory fields that reach a host over SSH: a task runs on its node, where its host is local.
_LOGIN_FIELDS = ("address", "user", "ssh_port", "key_file", "gateway", "known_hosts", "accept_new_host_key")
#: What a drain hook may receive for %n, %h, %v: names, never shell.
_HOOK_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


def is_array_group(inventory, hosts: list[str]) -> bool:
    """True when every host of ``hosts`` is a SLURM host (then ``nightly -H`` runs them as one job array)."""
    try:
        inv = as_loaded(inventory).inventory  # a file, or the command's inventory already loaded
        return bool(hosts) and all(inv.get(h).server.kind == "slurm" for h in hosts)
    except (ConfigError, AttributeError):
        return False


def _check_one_login(cfgs) -> None:
    """Every host of the array is reached through the same login node and cluster; ConfigError naming them else."""
    def login(cfg):
        return (cfg.transport, cfg.address, cfg.user, cfg.ssh_port, cfg.server.conf)
    first = login(cfgs[0])
    odd = [c.name for c in cfgs if login(c) != first]
    if odd:
        raise ConfigError(f"the hosts of a job array must share one login node and cluster; {', '.join(odd)} differ "
                          f"from {cfgs[0].name} (transport, address, user, ssh_port or server.conf)",
                          field="groups")


def task_inventory(inv_path: Path, hosts: list[str], group: str) -> str:
    """The inventory the tasks read: the group's hosts as the operator wrote them (offsets and defaults apply on
    the node as they would here), reached locally (each task runs on its node)."""
    raw = yaml.safe_load(inv_path.read_text()) or {}
    out = {}
    for name in hosts:
        entry = dict(raw.get("hosts", {}).get(name) or {})
        for k in _LOGIN_FIELDS:
            entry.pop(k, None)
        entry["transport"] = "local"
        out[name] = entry
    return yaml.safe_dump({"default_host": hosts[0], "hosts": out, "groups": {group: hosts}}, sort_keys=False)


def run_array(hosts: list[str], *, group: str, inventory=None, playbook=DEFAULT_NIGHTLY_PLAYBOOK,
              runs_dir: str | Path = "runs", history_db: Path, wait_s: float = WAIT_S,
              on_progress: Callable[[str, str], None] = lambda host, msg: None) -> tuple[FleetReport, dict]:
    """The nightly of ``hosts`` (SLURM hosts behind one login node) as one job array: each host's run directory in
    ``RUNS_DIR/<run-id>/`` (checked and recorded against ``history_db``), ``RUNS_DIR/fleet-<id>/fleet.json`` and
    ``fleet.md``. Returns the fleet report (``run_id``: the fleet's) and the fleet summary's ``slurm`` part (the
    array's job id, each host's node and task, the hosts whose task never ran, the drain hook's commands); the
    rest of the fleet's artefacts are :func:`~mtp_remote.fleet.nightly_fleet.run_nightly_fleet`'s. Raises
    ConfigError for hosts that are not one login node's SLURM hosts; RemoteError when the array cannot be
    submitted."""
    loaded = as_loaded(inventory)
    inv_path, inv = loaded.inventory_file, loaded.inventory
    cfgs = [inv.get(h) for h in hosts]
    if not all(c.server.kind == "slurm" for c in cfgs):
        raise ConfigError("a job-array nightly needs SLURM hosts only (server: {kind: slurm})", field="groups")
    _check_one_login(cfgs)
    settings = cfgs[0].server
    pb_path = find_playbook(playbook, inv_path)
    t0 = time.monotonic()
    run_id = new_run_id()
    fleet_id = f"fleet-{run_id}"
    local = Path(runs_dir)
    with open_host(inventory, hosts[0]) as (cfg, c, py):
        shared = facts.resolve_path(facts.get_home(c), settings.runs_dir or f"{cfg.workdir}/fleet-runs")
        fdir = f"{shared}/{fleet_id}"
        _prepare(c, fdir, fleet_id, group, hosts, task_inventory(inv_path, hosts, group), pb_path.read_text())
        array = _submit_array(c, fdir, fleet_id, group, len(hosts), settings, settings.tool_python or py)
        on_progress(group, f"job array {array} submitted: {len(hosts)} tasks, fleet directory {fdir}")
        try:
            seen = _watch_array(c, array, settings, len(hosts), wait_s, on_progress, group)
        except BaseException:  # Ctrl-C, a lost login node: the array we submitted must not run on unwatched
            c.run(sl.with_conf(settings.conf, ["scancel", str(array)]), hide=True, warn=True, in_stream=False)
            raise
        results = _bring_back(c, fdir, local, fleet_id)
        outcomes, part = task_outcomes(hosts, results, seen, array, local, history_db)
        report = FleetReport(command="nightly", run_id=run_id, hosts=outcomes, wall_s=round(time.monotonic() - t0, 2),
                             max_workers=len(hosts))
        report.disagreements = disagreements(outcomes)
        part["drain_hook"] = drain_hook(c, settings.drain_hook, outcomes, part["nodes"], on_progress)
    fleet_dir = local / fleet_id
    fleet_dir.mkdir(parents=True, exist_ok=True)
    (fleet_dir / "fleet.json").write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    (fleet_dir / "fleet.md").write_text(render_fleet_markdown(report))
    return report, {**part, "array_job": array, "shared_dir": fdir}


def _prepare(c, fdir: str, fleet_id: str, group: str, hosts: list[str], inventory_text: str,
             playbook_text: str) -> None:
    """The fleet directory on the shared filesystem (0700) with the manifest, the tasks' inventory and playbook."""
    q = shlex.quote
    r = c.run(f"umask 077; mkdir -p {q(fdir)}/results {q(fdir)}/runs", hide=True, warn=True, in_stream=False)
    manifest = json.dumps({"fleet_id": fleet_id, "group": group, "hosts": hosts}, indent=1) + "\n"
    ok = r.ok and all(sl.put_file(c, f"{fdir}/{name}", text) for name, text in (
        ("manifest.json", manifest), ("inventory.yaml", inventory_text), ("playbook.yaml", playbook_text)))
    if not ok:
        raise RemoteError(f"cannot write the fleet directory {fdir} on the login node; set server.runs_dir to a "
                          f"writable directory the nodes share", command="mkdir", exit_code=r.exited,
                          output=r.stderr)


def _submit_array(c, fdir: str, fleet_id: str, group: str, tasks: int, settings, python: str) -> int:
    try:
        script = sa.plan_array_script(name=f"{sl.JOB_PREFIX}-nightly.{group}", comment=f"{sl.JOB_PREFIX}:{fleet_id}",
                                      fleet_dir=fdir, tasks=tasks, settings=settings, python=python)
    except ValueError as e:
        raise ConfigError(str(e), field="server.runs_dir") from None
    rep = sl.submit(c, workdir=fdir, env_path="", conf=settings.conf, script=script, env={})
    if rep.result != "ok":
        raise RemoteError(f"the scheduler refused the nightly's job array ({rep.result}): {rep.message or 'no message'}",
                          command="sbatch --array", output=rep.message)
    return rep.job_id


@dataclass
class TaskSeen:
    """An array task as last seen in the queue: its state and reason, its node, whether it ever ran, and why
    the controller cancelled the array (None when it did not)."""

    state: str | None = None
    reason: str | None = None
    node: str = ""
    ran: bool = False
    cancelled: str | None = None


def _watch_array(c, array: int, settings, tasks: int, wait_s: float, on_progress, group: str) -> dict[int, TaskSeen]:
    """Poll the array until no task is in the queue; {index: :class:`TaskSeen`} as last seen. The array is
    cancelled when no task started within ``server.pending_s`` or all of it within ``wait_s``."""
    seen: dict[int, TaskSeen] = {}
    t0, said = time.monotonic(), ""
    while True:
        states = sa.parse_array_squeue(c.run(sa.array_squeue_command(array, settings.conf), hide=True, warn=True,
                                             in_stream=False).stdout)
        for i, q in states.items():
            last = seen.setdefault(i, TaskSeen())
            last.state, last.reason, last.node = q.state, q.reason, q.node or last.node
            last.ran = last.ran or q.state not in ("PENDING", "REQUEUED")
        if not states:
            return seen
        line = ", ".join(f"{n} {s.lower()}" for s, n in _counts(states).items())
        if line != said:
            said = line
            on_progress(group, f"job array {array}: {line}")
        waited = time.monotonic() - t0
        never = not any(v.ran for v in seen.values())
        if (never and waited > settings.pending_s) or waited > wait_s:
            why = (f"no task started within server.pending_s = {settings.pending_s:.0f} s" if never
                   else f"not done within {wait_s:.0f} s")
            on_progress(group, f"job array {array}: {why}; cancelling it")
            c.run(sl.with_conf(settings.conf, ["scancel", str(array)]), hide=True, warn=True, in_stream=False)
            for v in seen.values():
                v.cancelled = why
            time.sleep(POLL_S)
            continue
        time.sleep(POLL_S)


def _counts(states: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for q in states.values():
        out[q.state] = out.get(q.state, 0) + 1
    return out


def _bring_back(c, fdir: str, local: Path, fleet_id: str) -> dict[int, TaskRecord]:
    """The fleet directory's results and runs, in one round trip: each run directory to ``local/<run-id>/``, the
    task records kept in ``local/<fleet-id>/tasks/``. Returns {index: task record}."""
    out = c.run(sa.tree_command(fdir, ["results", "runs"]), hide=True, warn=True, in_stream=False).stdout
    records: dict[int, TaskRecord] = {}
    if not out.strip():
        return records
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(out)), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        tasks = local / fleet_id / "tasks"
        tasks.mkdir(parents=True, exist_ok=True)
        for f in sorted(Path(tmp, "results").glob("*.json")):
            rec = TaskRecord.of(json.loads(f.read_text()))
            records[rec.index] = rec
            shutil.copy(f, tasks / f.name)
        for run in Path(tmp, "runs").glob("*"):
            if run.is_dir() and not (local / run.name).exists():
                shutil.copytree(run, local / run.name)
    return records


def task_outcomes(hosts: list[str], results: dict[int, TaskRecord], seen: dict[int, TaskSeen], array: int,
                  local: Path, db: Path) -> tuple[list[HostOutcome], dict]:
    """Each host's outcome from its task record (its run checked and recorded against the controller's history),
    or why its task never ran or left nothing; and the fleet summary's ``slurm`` part. ``results`` and ``seen``
    may be given as their JSON mappings."""
    results = {i: TaskRecord.of(r) for i, r in results.items()}
    seen = {i: v if isinstance(v, TaskSeen) else TaskSeen(**v) for i, v in seen.items()}
    outcomes, nodes, never = [], {}, []
    for i, host in enumerate(hosts):
        rec, last = results.get(i), seen.get(i)
        task = f"{array}_{i}"
        node = (rec.node if rec else None) or (last.node if last else "")
        nodes[host] = node
        if rec is None or rec.status != "done":
            never.append(host)
            outcomes.append(HostOutcome(host, EXIT_RUN_FAILED, error=never_ran(task, rec, last),
                                        facts={"node": node or "none"}))
            continue
        code = int(rec.exit_code)
        if rec.run_id and (local / rec.run_id).is_dir():
            doc = load_summary(local / rec.run_id)
            if doc.status == "completed":
                code, _ = check_and_record(doc, local / rec.run_id, db, code)
            else:
                record_history(db, doc, local / rec.run_id)
        detail = "; ".join(f"{p}: {k}" for p, k in rec.verdicts.items())
        outcomes.append(HostOutcome(host, code, dict(rec.verdicts), f"on {node}: {detail}",
                                    error=rec.error, duration_s=round(rec.finished - rec.started, 2),
                                    run_id=rec.run_id, facts={**rec.facts, "node": node}))
    return outcomes, {"nodes": nodes, "never_ran": never,
                      "tasks": {h: f"{array}_{i}" for i, h in enumerate(hosts)}}


def never_ran(task: str, rec: TaskRecord | None, last: TaskSeen | None) -> str:
    """Why a host's array task left no outcome: started but killed, cancelled by us, or never run."""
    if rec is not None:
        return (f"its array task {task} started on {rec.node} but left no result (the task was killed: "
                f"time limit, node failure or scancel); last seen {last.state if last else 'unknown'}")
    if last is not None and last.cancelled:
        return f"its array task {task} never ran: {last.cancelled} (last seen {last.state}: {last.reason})"
    if last is not None:
        return (f"its array task {task} never ran (last seen {last.state}, reason {last.reason or 'none'}"
                f"{', on ' + last.node if last.node else ''})")
    return f"its array task {task} never ran (the scheduler never listed it)"


def drain_hook(c, hook: str | None, outcomes: list[HostOutcome], nodes: dict[str, str], on_progress) -> list[dict]:
    """With ``server.drain_hook`` set: the command, for each node whose nightly corrupts output, on the login node
    (%n node, %h host, %v the verdict); what ran and its exit code. Nothing when unset (the default)."""
    done: list[dict] = []
    if not hook:
        return done
    for o in outcomes:
        bad = sorted({k for k in o.verdicts.values() if k.startswith("spec-corrupts-output")})
        node = nodes.get(o.host, "")
        if not bad or not node:
            continue
        values = {"%n": node, "%h": o.host, "%v": bad[0]}
        if not all(_HOOK_VALUE.fullmatch(v) for v in values.values()):
            done.append({"host": o.host, "node": node, "skipped": "a value is not a plain name"})
            continue
        cmd = hook
        for k, v in values.items():
            cmd = cmd.replace(k, v)
        r = c.run(cmd, hide=True, warn=True, in_stream=False)
        on_progress(o.host, f"drain hook on {node}: exit {r.exited}")
        done.append({"host": o.host, "node": node, "command": cmd, "exit_code": r.exited,
                     "output": (r.stdout + r.stderr)[-500:]})
    return done
