"""The operations behind both entry points (``cli/main.py`` and ``cli/tasks.py``), so the two stay thin and alike.

``diagnose`` runs a playbook on a host and writes ``runs/<run-id>/``; ``analyze_files`` measures texts.
Errors are :class:`~mtp_remote.errors.MtpRemoteError` subclasses; nothing here prints except through the
hooks given.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from ..analysis.diagnosis import design_of, record_design
from ..analysis.diagnosis import diagnose as diagnose_samples
from ..analysis.verdict import exit_code as verdicts_exit_code
from ..config.inventory import HostConfig
from ..config.endpoints import parse_endpoints
from ..config.loaded import LoadedConfig, as_loaded
from ..config.paths import DEFAULT_INVENTORY, DEFAULT_PLAYBOOK, HISTORY_FILE
from ..config.playbook import Playbook, load_playbook
from ..config.validation import is_name
from ..errors import EXIT_RUN_FAILED, ConfigError, Interrupted, MtpRemoteError, RunsDirError, TransportLost
from ..files import load_json_file
from ..lint.flag_table import available_versions
from ..lint.lint import misspelled_flags
from ..remote import connect as transport
from ..remote.commands import mask_secrets, playbook_secrets, server_argv
from ..report.ci import write_ci_outputs
from ..report.document import build_summary, host_facts, save_summary
from ..report.html import write_html
from ..report.markdown import write_markdown
from ..report.records import failed_summary, record_history, write_failed_run
from .attach import ATTACHED_HOST, attach_kind, attach_line, attached_host, attached_playbook, cannot_include
from .calibration import calibration_profile, with_calibration
from .hosts import host_playbook_file, load_config, remote_python
from .plan import plan_run
from .run_id import new_run_id
from .runner import Hooks, Runner
from ..records.run import RunRecord
from ..records.summary import DesignRecord
from .sampling import latest_samples, load_samples

log = logging.getLogger(__name__)



@dataclass
class DiagnoseResult:
    run_id: str
    run_dir: Path
    summary: dict
    exit_code: int


def opening_line(host: HostConfig, pb: Playbook, run_id: str, *, n_requests: int, n_profiles: int,
                 playbook_file: str | Path, resumed: bool = False, command: str = "run",
                 planned: str | None = None) -> str:
    """The one line a run opens with: host, engine, simulated or real, playbook, run id, requests planned
    (the budget under early stopping) and the faults injected (simulated hosts; none on a real engine).
    With attached endpoints it names them and the load they get (``load``: in flight, per second).
    ``command``: what the run is (``run`` for diagnose/nightly, ``mitigate run``, ``bisect run``);
    ``planned``: what is planned, when it is not "N requests over P profiles" (bisect: tests not known yet)."""
    faults = []
    if host.is_sim:
        if host.env.get("SGLANG_SIM_FAULTS"):
            faults.append(host.env["SGLANG_SIM_FAULTS"])
        faults += [f"{n}: {p.env['SGLANG_SIM_FAULTS']}" for n, p in pb.profiles.items()
                   if p.env.get("SGLANG_SIM_FAULTS")]
    kind = "simulated" if host.is_sim else "real"
    budget = " (budget; early stopping)" if pb.early_stop else ""
    planned = planned or f"{n_requests} requests planned over {n_profiles} profiles{budget}"
    where = (f"host {host.name} [{host.transport}], engine {host.engine} ({kind})" if host.name != ATTACHED_HOST
             else "no host (attached endpoints only)")
    attached = f"; {attach_line(pb)}" if pb.attached else ""
    return (f"{command} {run_id}{' (resumed)' if resumed else ''}: {where}{attached}; playbook {pb.name} "
            f"({playbook_file}); {planned}; faults injected: {', '.join(faults) or 'none'}")


def _prewarm_report_imports() -> None:
    """Import what the verdict and the reports need (scipy.stats, matplotlib, jinja2: ~0.5 s together) in a
    daemon thread while the first server starts, when the driver has nothing else to do: the run's end then
    does not wait for them. The CLI itself stays light (they are imported only where used)."""
    import threading

    def load() -> None:
        try:
            import jinja2  # noqa: F401
            import matplotlib
            import scipy.stats  # noqa: F401

            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401
        except Exception as e:  # noqa: BLE001 - a missing optional module fails again, loudly, where it is used
            log.debug("prewarming the report imports: %s", e)

    threading.Thread(target=load, name="prewarm-report-imports", daemon=True).start()


def refuse_misspelled_flags(pb: Playbook, profiles: list[str], *, playbook_file: str, host: HostConfig) -> None:
    """Before anything is launched: a flag of a profile's launch line that no SGLang release we have a table
    for knows, and that is a near miss of one (``--speculative-num-stepz``), makes SGLang refuse to start —
    found only after the runs before it (minutes on a GPU host). Raises ConfigError naming the playbook, the
    field (``base_flags`` or ``profiles.NAME.flags``), the flag and the right spelling."""
    for name in profiles:
        bad = misspelled_flags(server_argv(host, pb, name))
        if bad:
            flag, right = bad[0]["flag"], bad[0]["suggestion"]
            in_base = any(f == flag or f.startswith(flag + "=") for f in pb.base_flags)
            field = "base_flags" if in_base else f"profiles.{name}.flags"
            raise ConfigError(f"{flag} is not an SGLang flag (did you mean {right}?): SGLang would refuse the "
                              f"{name!r} launch line at startup; no release we have a table for "
                              f"({', '.join(_known_releases())}) knows it", file=playbook_file, field=field)


def _known_releases() -> list[str]:
    return available_versions()


def diagnose(*, inventory: str | Path | LoadedConfig = DEFAULT_INVENTORY, playbook: str | Path = DEFAULT_PLAYBOOK,
             host: str | None = None, runs_dir: str | Path = "runs", profiles: list[str] | None = None,
             resume: str | None = None, hooks: Hooks | None = None, c=None,
             overrides: dict | None = None, history: str | Path | None = None,
             attach: list[str] | None = None) -> DiagnoseResult:
    """Run the speculative vs baseline experiment of ``playbook`` on ``host`` and write the run directory.

    ``resume`` continues an earlier run id (stored samples are not requested again); ``overrides`` updates
    playbook fields (e.g. ``{"samples": 2}``). Returns the summary and the exit code (0 healthy, 1 a
    speculative profile corrupts output or failed to launch, 3 inconclusive: ``analysis.verdict.exit_code``). Raises MtpRemoteError when the run cannot be
    done; the samples stored so far are kept. Every run that got as far as the host — completed, failed or
    interrupted — is recorded in ``history`` (default ``RUNS_DIR/history.sqlite``); one that failed also
    leaves summary.json (status, cause), junit.xml and metrics.prom (:mod:`mtp_remote.report.records`), and the
    raised error carries ``run_id``/``run_dir``. A run that stored no sample suggests no ``--resume`` and
    leaves no ``run.json``.

    ``attach`` (``NAME=URL`` each; one named as the playbook's baseline): diagnose those endpoints, already
    serving, instead of the playbook's profiles (:func:`~mtp_remote.experiment.attach.attached_playbook`); with
    no ``host`` no inventory is needed. Profiles with ``attach:`` in the playbook are attached too. An attached
    endpoint is never launched, signalled or stopped and no lock is taken for it; its verdicts say what their
    evidence cannot include."""
    inventory, host_cfg, pb, playbook = _config(inventory, playbook, host, attach)
    hooks = hooks or Hooks()
    run = _prepare_run(host_cfg, pb, playbook, runs_dir=runs_dir, resume=resume, profiles=profiles,
                       overrides=overrides, hooks=hooks)
    pb, run_id, run_dir = run.pb, run.run_id, run.run_dir
    history_db = Path(history) if history is not None else Path(runs_dir) / HISTORY_FILE
    own_c = c is None and bool(pb.attached)
    if pb.attached:  # the attach kind, with the host's own kind for the profiles it launches
        c = c or transport.connect(host_cfg)
    kind = attach_kind(c, host_cfg, pb, python=remote_python(host_cfg), run_id=run_id,
                       on_progress=hooks.on_progress) if pb.attached else None
    launches, _ = with_calibration(pb, run.plan, relaunch=kind.capabilities.relaunch if kind is not None else True)
    hooks.on_progress(opening_line(host_cfg, pb, run_id, n_requests=sum(len(lp.requests) for lp in launches),
                                   n_profiles=len(launches), playbook_file=playbook, resumed=bool(resume)))
    runner = Runner(host_cfg, pb, run_dir, run_id=run_id, python=remote_python(host_cfg), profiles=profiles,
                    hooks=hooks, c=c, design=run.recorded, kind=kind)
    resume_cmd = _resume_command(run_id, inventory, host_cfg.name, playbook, runs_dir, overrides, profiles, attach)
    _prewarm_report_imports()
    try:
        profile_runs = runner.run()
    except BaseException as e:
        raise _run_failed(e, run, runner, host_cfg, playbook, inventory=inventory, resume=resume,
                          resume_cmd=resume_cmd, history_db=history_db) from None
    finally:
        if own_c:
            transport.close(c)
    return _conclude(run, runner, profile_runs, host_cfg, playbook, attach=attach, resume_cmd=resume_cmd,
                     history_db=history_db)


@dataclass
class _PreparedRun:
    """A run checked and recorded before anything reaches the host: its playbook (overrides applied, sampled to a
    look of the design), plan, id, directory, recorded design and start times (``started``: the run's first
    start, kept across resumes; ``command_started``: this command's own)."""

    pb: Playbook
    plan: list
    run_id: str
    run_dir: Path
    recorded: dict
    started: datetime
    command_started: datetime


def _prepare_run(host_cfg: HostConfig, pb: Playbook, playbook, *, runs_dir, resume: str | None,
                 profiles: list[str] | None, overrides: dict | None, hooks: Hooks) -> _PreparedRun:
    """Apply ``overrides``, check ``resume``, plan, refuse misspelled flags, make the run directory and write
    (or check, on a resume) its run.json. Raises ConfigError naming the file and field."""
    if overrides:
        try:
            pb = Playbook.model_validate({**pb.model_dump(), **overrides})
        except ValidationError as e:
            err = e.errors()[0]
            raise ConfigError(f"invalid value {err.get('input')!r}: {err['msg']}", file=str(playbook),
                              field=".".join(str(x) for x in err["loc"])) from None
    started = datetime.now(timezone.utc)
    run_id = resume or new_run_id(started)
    run_dir = Path(runs_dir) / run_id
    if resume and not is_name(resume):
        raise ConfigError(f"{resume!r} is not a run id (like 20261130-141850-9b44)", field="--resume")
    if resume and not (run_dir / RUN_FILE).exists():
        raise ConfigError(f"no run {resume!r} to resume in {runs_dir}/ (no {RUN_FILE})", field="--resume")
    try:
        plan = plan_run(host_cfg, pb, host_cfg.workdir, profiles)
    except ValueError as e:
        raise ConfigError(str(e), file=str(playbook), field="--profile") from None
    refuse_misspelled_flags(pb, [lp.profile for lp in plan], playbook_file=str(playbook), host=host_cfg)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create the run directory: {e.strerror}", file=str(run_dir),
                          field="--runs-dir") from None
    n_spec = sum(1 for lp in plan if lp.speculative)
    command_started = started  # this command's own start: a resume's time split does not count the gap before it
    started, recorded = _check_or_write_run_file(run_dir, host_cfg, pb, run_id, started, resume=bool(resume),
                                                 design=record_design(pb, n_spec))
    pb, plan = _at_a_look(pb, plan, recorded, host_cfg, profiles, hooks)
    return _PreparedRun(pb=pb, plan=plan, run_id=run_id, run_dir=run_dir, recorded=recorded, started=started,
                        command_started=command_started)


def _run_failed(e: BaseException, run: _PreparedRun, runner: Runner, host_cfg: HostConfig, playbook, *, inventory,
                resume: str | None, resume_cmd: str, history_db: Path) -> MtpRemoteError:
    """The error a run that did not finish ends with (Interrupted for Ctrl-C), after keeping what it can: the
    partial summary, junit, metrics and history row, the resume and stop commands in its message. Re-raises
    ``e`` itself when it is a bug (not an MtpRemoteError nor a raw SSH failure): its traceback is kept."""
    pb, run_dir = run.pb, run.run_dir
    interrupted = isinstance(e, KeyboardInterrupt) or runner.hooks.interrupted()
    if isinstance(e, OSError) and e.errno in RunsDirError.DISK_ERRNOS:  # a copy into the run directory
        e = RunsDirError.of(e, e.filename or run_dir)
    if not interrupted and not isinstance(e, MtpRemoteError):
        ssh = transport.as_connect_error(e, host_cfg.name)
        if ssh is None:
            raise e  # a bug: keep its traceback
        e = ssh  # a raw SSH failure that escaped the connection's own translation
    n = len(load_samples(run_dir / "samples.jsonl"))
    stop_cmd = _stop_command(inventory, host_cfg.name) if runner.left_on_host else None
    if not n and not resume:
        _forget_unresumable(run_dir)
    if n or stop_cmd:
        _best_effort(_write_partial, run_dir, runner, resume_cmd if n else None,
                     error=None if interrupted else e, stop_cmd=stop_cmd)
    if interrupted:
        kept = (f"{n} samples are kept in {run_dir}/samples.jsonl — continue with: {resume_cmd}" if n else
                "no sample was stored, so there is nothing to resume")
        err: MtpRemoteError = Interrupted(f"interrupted; the servers we started were stopped and {kept}")
    else:
        err = e
    doc = failed_summary(run_id=run.run_id, host=host_facts(host_cfg, pb),
                         playbook={"name": pb.name, "file": str(playbook), "alpha": pb.compare.alpha},
                         started_at=run.started, error=err, n_samples=n, resume=resume_cmd if n else None,
                         status="interrupted" if interrupted else "failed")
    _best_effort(write_failed_run, run_dir, doc, history_db)  # a full RUNS_DIR takes none of it
    note = ""
    if not interrupted:
        if stop_cmd:
            note += f"; left on the host: {', '.join(runner.left_on_host)} — stop with: {stop_cmd}"
        note += (f" ({n} samples kept; continue with: {resume_cmd})" if n else
                 " (no sample was stored: nothing to resume; run again once this is fixed)")
    return err.in_run(note, run_id=run.run_id, run_dir=run_dir)


def _conclude(run: _PreparedRun, runner: Runner, profile_runs: list, host_cfg: HostConfig, playbook, *,
              attach: list[str] | None, resume_cmd: str, history_db: Path) -> DiagnoseResult:
    """A finished run: the verdicts from its samples, summary.json, report.md/html, junit/metrics and the history
    row. Raises RunsDirError (with the command that writes the reports again) when the run directory is full."""
    pb, run_dir, recorded = run.pb, run.run_dir, run.recorded
    (run_dir / "partial.json").unlink(missing_ok=True)
    samples = latest_samples(load_samples(run_dir / "samples.jsonl"))
    spec = {pr.profile: pr.speculative for pr in profile_runs}
    aa = calibration_profile(pb)
    failures = {pr.profile: pr.failure() for pr in profile_runs if pr.failure() is not None}
    design = design_of(pb, sum(1 for p in spec if p not in (pb.baseline, aa)), recorded=recorded)
    diag = diagnose_samples(baseline=pb.baseline, profiles=spec, samples=samples, launch_failures=failures,
                            design=design, calibration_profile=aa,
                            expected={p.id: p.expected for p in pb.prompts if p.expected is not None},
                            greedy_fallback={pr.profile: pr.greedy_fallback for pr in profile_runs
                                             if pr.greedy_fallback})
    cannot_include(diag.verdicts, set(pb.attached), pb.baseline, {pr.profile: pr.argv_masked for pr in profile_runs})
    code = verdicts_exit_code(diag.verdicts)
    doc = build_summary(run_id=run.run_id, host=host_cfg, playbook=pb, profile_runs=profile_runs, diagnosis=diag,
                        exit_code=code, started_at=run.started, n_samples=len(samples), playbook_file=str(playbook),
                        samples=samples, command_started=run.command_started)
    if runner.environment is not None:
        doc.environment = runner.environment  # the bug report's Environment (SGLang, torch, GPUs, architectures)
    doc.design = {**recorded, "rounds": design.rounds, "looks_reached": list(design.looks())}
    if attach:
        doc.attach = list(attach)  # the next step's commands repeat them
    try:
        save_summary(doc, run_dir)
        write_markdown(doc, samples, run_dir)
        write_html(doc, samples, run_dir)
        write_ci_outputs(doc, run_dir)
    except OSError as e:
        if e.errno not in RunsDirError.DISK_ERRNOS:
            raise
        raise RunsDirError.of(e, e.filename or run_dir).in_run(
            f" ({len(samples)} samples kept; write the reports with: {resume_cmd})", run_id=run.run_id,
            run_dir=run_dir) from None
    record_history(history_db, doc, run_dir)
    return DiagnoseResult(run_id=run.run_id, run_dir=run_dir, summary=doc, exit_code=code)

RUN_FILE = "run.json"


def experiment_fingerprint(host: HostConfig, pb: Playbook) -> dict:
    """What must not change between a run and its resumption: the host and every field that decides what a
    sample means (the sample counts and stopping may change: raising ``samples`` and resuming is the way to
    add evidence)."""
    keep = ("name", "base_flags", "profiles", "baseline", "prompts", "temperatures", "max_tokens", "top_p", "seed",
            "api", "prompt_template", "kl_probe")
    return {"host": host.name, "engine": host.engine, "model_path": host.model_path, "address": host.address,
            "gpus": host.gpus, "python": host.python, "host_env": host.env,
            "playbook": {k: v for k, v in pb.model_dump(mode="json").items() if k in keep}}


def _check_or_write_run_file(run_dir: Path, host: HostConfig, pb: Playbook, run_id: str, started: datetime,
                             *, resume: bool, design: dict) -> tuple[datetime, dict]:
    """Write run.json for a new run, with its ``design`` (``diagnosis.record_design``: the looks and alpha
    spending every resume continues); on resume, refuse a different host or experiment (ConfigError naming
    what differs) and return the original start time and the recorded design (a run recorded before designs
    were: the first run's rounds are taken as this design's, with no resume look)."""
    path = run_dir / RUN_FILE
    fp = mask_secrets(experiment_fingerprint(host, pb), playbook_secrets(pb, host))
    if resume:
        try:
            stored = RunRecord.of(load_json_file(path))
            old = stored.fingerprint
        except (OSError, ValueError, TypeError) as e:  # pydantic's ValidationError is a ValueError
            raise ConfigError(f"run {run_id} cannot be resumed: {path} is unreadable ({e})", field="--resume") from None
        diffs = [f"{k} ({old.get(k)!r} then, {fp[k]!r} now)" for k in
                 ("host", "engine", "model_path", "address", "gpus", "python", "host_env") if old.get(k) != fp[k]]
        diffs += [f"playbook.{k}" for k in sorted(set(old["playbook"]) | set(fp["playbook"]))
                  if old["playbook"].get(k) != fp["playbook"].get(k)]
        if diffs:
            raise ConfigError(f"run {run_id} was made with a different {'; '.join(diffs)}; resume it with the same "
                              f"host, inventory settings and playbook (stored in {path}), or start a new run",
                              field="--resume")
        return datetime.fromisoformat(stored.started_at), stored.design or {**design, "resumes": 0}
    path.write_text(json.dumps({"run_id": run_id, "started_at": started.isoformat(), "fingerprint": fp,
                                "design": design}, indent=2) + "\n")
    return started, design


def _at_a_look(pb: Playbook, plan, recorded: dict, host: HostConfig, profiles, hooks):
    """A resume samples to a look of the recorded design: ``samples`` between two looks is raised to the next
    one (said in a progress line), past the last allowed look lowered to it. Returns (playbook, plan)."""
    rec = DesignRecord.of(recorded)
    first = rec.first_rounds or pb.samples
    looks = [first * 2 ** s for s in range(int(rec.resumes or 0) + 1)]
    want = pb.samples
    if want <= first or want in looks:
        return pb, plan
    at = next((j for j in looks if j >= want), looks[-1])
    why = "the next look of this run's design" if at >= want else "the design's last look (compare.resumes)"
    hooks.on_progress(f"--samples {want} is not a look of this run's design (looks at {', '.join(map(str, looks))} "
                      f"samples per prompt, fixed at its first run): sampling to {at}, {why}")
    pb = pb.model_copy(update={"samples": at})
    return pb, plan_run(host, pb, host.workdir, profiles)


def _config(inventory, playbook, host: str | None, attach: list[str] | None
            ) -> tuple[Path | None, HostConfig, Playbook, str | Path]:
    """(inventory, host, playbook, playbook file) of a run: from the inventory, or — ``attach`` given and no
    ``host`` — the stand-in host of attached endpoints and the playbook file alone (no inventory needed); with
    ``attach`` the playbook's profiles are the endpoints. Raises ConfigError naming ``--attach`` for a bad
    endpoint."""
    if attach and host is None:
        inventory, host_cfg, pb = None, attached_host(), load_playbook(playbook)
    else:
        config = as_loaded(inventory)  # read once: every step below takes it
        inventory = config.inventory_file
        _, host_cfg, pb = load_config(config, playbook, host)
        playbook = host_playbook_file(playbook, config, host_cfg)  # what load_config read (for the report)
    if attach:
        try:
            endpoints = parse_endpoints(list(attach), need_name=True)
        except ValueError as e:
            raise ConfigError(str(e), field="--attach") from None
        pb = attached_playbook(pb, endpoints, playbook_file=str(playbook))
    return inventory, host_cfg, pb, playbook


def _resume_command(run_id: str, inventory, host: str, playbook, runs_dir, overrides: dict | None,
                    profiles: list[str] | None, attach: list[str] | None = None) -> str:
    where = "" if host == ATTACHED_HOST else f" -i {shlex.quote(str(inventory))} -H {shlex.quote(host)}"
    cmd = (f"mtp-remote diagnose --resume {run_id}{where} -p {shlex.quote(str(playbook))} "
           f"--runs-dir {shlex.quote(str(runs_dir))}")
    for spec in attach or []:
        cmd += f" --attach {shlex.quote(spec)}"
    for key, value in (overrides or {}).items():
        if isinstance(value, bool):  # a switch: --stop-on-loop / --no-stop-on-loop
            cmd += f" --{'' if value else 'no-'}{key.replace('_', '-')}"
        else:
            cmd += f" --{key.replace('_', '-')} {shlex.quote(str(value))}"
    for p in profiles or []:
        cmd += f" --profile {shlex.quote(p)}"
    return cmd


def _stop_command(inventory, host: str) -> str:
    return f"mtp-remote stop -i {shlex.quote(str(inventory))} -H {shlex.quote(host)}"


def _write_partial(run_dir: Path, runner: Runner, resume_cmd: str | None, *, error: MtpRemoteError | None = None,
                   stop_cmd: str | None = None) -> int:
    """Keep a note of how far an aborted run got (samples.jsonl is already on disk); returns the number of
    samples stored. With ``error``: its cause (``transport_lost`` for a dropped SSH connection) and message; with
    ``stop_cmd``: what was left on the unreachable host and the command that stops it."""
    n = len(load_samples(run_dir / "samples.jsonl"))
    cause = {} if error is None else {
        "cause": "transport_lost" if isinstance(error, TransportLost) else type(error).__name__,
        "error": error.message}
    left = {"left_on_host": list(runner.left_on_host), "stop": stop_cmd} if stop_cmd else {}
    note = {"aborted": True, "profiles": [pr.profile for pr in runner.profile_runs], "samples": n,
            "exit_code": EXIT_RUN_FAILED, "resume": resume_cmd, **cause, **left}
    (run_dir / "partial.json").write_text(json.dumps(note, indent=2) + "\n")
    return n


def _best_effort(write, *args, **kwargs) -> None:
    """``write(*args, **kwargs)`` of a failed run's records: a file system that will not take them (the run's
    own error may be that RUNS_DIR is full) is logged, never raised over the run's error."""
    try:
        write(*args, **kwargs)
    except OSError as e:
        log.warning("could not write the failed run's records in %s: %s", args[0], e.strerror or e)


def _forget_unresumable(run_dir: Path) -> None:
    """A run that failed before its first sample: remove what would make it look resumable (run.json, an
    empty samples.jsonl, an empty logs/); server logs copied so far stay."""
    for name in (RUN_FILE, "samples.jsonl", "partial.json"):
        f = run_dir / name
        if f.exists() and (name != "samples.jsonl" or f.stat().st_size == 0):
            f.unlink()
    logs = run_dir / "logs"
    if logs.is_dir() and not any(logs.iterdir()):
        logs.rmdir()


