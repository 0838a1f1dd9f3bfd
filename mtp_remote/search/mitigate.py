"""``mitigate``: from a corrupting speculative profile, try candidate flag changes and rank the loop-free ones.

One launch per candidate (:class:`~mtp_remote.experiment.runner.Runner`, the same lifecycle as ``diagnose``), sampled in
rounds with early stopping (``analysis.stopping``: a candidate is dropped as soon as it is settled bad), each
judged against the baseline with the same statistics and rule as ``diagnose`` (through :func:`judge_arm`, the one
place that calls the decision rule). The baseline's samples (and the corrupting profile's, shown as the
reference row) are reused from the diagnose run given with ``from_run`` when the host and the experiment
match. Writes ``runs/<run-id>/``: ``samples.jsonl``, ``logs/``, ``mitigation.json`` (the plan, the host facts,
which candidates are done — ``resume`` continues from it — and the ranked results) and ``mitigation.md``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from ..analysis.diagnosis import diagnose as diagnose_samples
from ..analysis.diagnosis import to_obs
from ..analysis.speed import LogSpeed
from ..analysis.stats import bound_p_value
from ..analysis.stopping import Design
from ..config.inventory import HostConfig
from ..config.playbook import Playbook, ProfileConfig
from ..errors import ConfigError, Interrupted, MtpRemoteError
from ..files import load_json_file
from ..records.sample import Sample
from ..records.summary import Environment, Summary
from ..experiment.diagnose import experiment_fingerprint, opening_line
from ..config.loaded import as_loaded
from ..experiment.hosts import load_config, remote_python
from ..experiment.sampling import latest_samples
from ..experiment.plan import plan_requests
from ..experiment.run_id import new_run_id
from ..experiment.runner import Hooks, Runner
from ..experiment.sampling import load_samples
from ..remote import connect as transport
from ..remote.commands import mask_secrets, playbook_secrets
from ..remote.envfacts import get_environment
from .candidates import Candidate, parse_flags, plan_candidates
from .from_run import copy_reused, load_from_run, require_run_id, reuse_check, sglang_version_of
from .mitigation_report import render_markdown
from .records import ArmStats, CandidateResult, MitigationDoc
from .ranking import (
    SPEED_CONFIDENCE,
    familywise_loop_free,
    flag_changes,
    pick_best,
    rank_results,
    recommendation,
    speed_fields,
)

MITIGATION_FILE = "mitigation.json"
#: Verdicts under which a candidate no longer loops more than the baseline.
LOOP_FREE = ("healthy", "spec-slower", "spec-ineffective")
SCHEMA_VERSION = 1


@dataclass
class MitigateResult:
    run_id: str
    run_dir: Path
    document: MitigationDoc
    exit_code: int


def judge_arm(baseline: str, profile: str, samples: list[dict], launch_failure: tuple[str, str] | None,
              alpha: float, margin: float = Design.margin):
    """The decision rule on one profile vs the baseline at ``alpha`` and loop-rate ``margin``: (verdict,
    cells) — the same call ``diagnose`` makes.

    This is the only place mitigate and bisect reach the rule (``diagnosis.diagnose`` ->
    ``analysis.verdict.judge``), so a new rule drops in here."""
    diag = diagnose_samples(baseline=baseline, profiles={baseline: False, profile: True}, samples=samples,
                            launch_failures={profile: launch_failure} if launch_failure else None, alpha=alpha,
                            design=Design(alpha=alpha, margin=margin))
    verdict = next(v for v in diag.verdicts if v.profile == profile)
    return verdict, diag.cells


def judge_profile(baseline: str, name: str, samples: list[Sample | dict], launch_failure, alpha: float,
                  margin: float = Design.margin) -> ArmStats:
    """Statistics of one profile vs the baseline (verdict, loops, p, speed, acceptance, and
    ``bound_p``: the bound test's p-value, the largest over the T > 0 cells, None without one).

    Speeds are over non-looping samples (``SampleObs.is_degenerate`` false) of the T > 0 cells (all cells when
    there are none): ``tokens_per_s`` the mean of the cells' means, as ``diagnose`` shows it; ``log_speed`` /
    ``base_log_speed`` the :class:`~mtp_remote.analysis.speed.LogSpeed` summaries (as dicts) of the per-sample
    completion_tokens / latency_s, which give ``speed_vs_baseline`` and its interval (``ranking.speed_fields``).
    Returns an :class:`~mtp_remote.search.records.ArmStats`."""
    samples = [Sample.of(x) for x in samples]
    v, cells = judge_arm(baseline, name, samples, launch_failure, alpha, margin)
    rows = [r for r in v.comparisons if r.temperature > 0] or list(v.comparisons)
    hot = [r for r in v.comparisons if r.temperature > 0]
    mine = [c for c in cells if c.profile == name and c.temperature > 0] or [c for c in cells if c.profile == name]
    base = [c for c in cells if c.profile == baseline and c.temperature > 0] or \
        [c for c in cells if c.profile == baseline]
    tps = _mean(c.tokens_per_s_nonloop for c in mine)
    acc = _mean(c.accept_length_nonloop if c.accept_length_nonloop is not None else c.accept_length for c in mine)
    ls, bls = _log_speed(samples, name, {c.temperature for c in mine}), \
        _log_speed(samples, baseline, {c.temperature for c in base})
    return ArmStats(verdict=v.kind, evidence=v.evidence, base_tokens_per_s=_mean(c.tokens_per_s_nonloop for c in base),
                    loops=sum(r.spec_loops for r in rows) if rows else None,
                    n=sum(r.spec_n for r in rows) if rows else None,
                    base_loops=sum(r.base_loops for r in rows) if rows else None,
                    base_n=sum(r.base_n for r in rows) if rows else None,
                    p=v.p_value if v.p_value is not None else min(
                        (r.p_adjusted for r in rows if r.p_adjusted is not None), default=None),
                    accept_length=acc, tokens_per_s=tps,
                    log_speed=ls.to_dict() if ls else None, base_log_speed=bls.to_dict() if bls else None,
                    bound_p=max(bound_p_value(r.spec_loops, r.spec_n, r.base_loops, r.base_n, margin)
                                for r in hot) if hot else None,
                    **speed_fields(ls, bls).to_dict())


def _log_speed(samples: list[Sample], profile: str, temperatures: set[float]) -> LogSpeed | None:
    """ln(tokens/s) summary of ``profile``'s non-looping successful samples at ``temperatures``."""
    obs = [to_obs(s) for s in samples if s.profile == profile and float(s.temperature) in temperatures]
    return LogSpeed.of(o.tokens_per_s for o in obs if o.ok and not o.is_degenerate)


def _mean(values):
    vals = [x for x in values if x is not None]
    return sum(vals) / len(vals) if vals else None


def status_of(verdict: str | None, loops: int | None = None) -> str:
    """A candidate's row status. ``loop-free``: the verdict is loop-free, or ``inconclusive`` with no degenerate
    sample seen at T > 0 (too few samples to bound the excess below the margin; the verdict column keeps that
    statement, e.g. "up to 18 % not ruled out")."""
    if verdict is None:
        return "pending"
    if verdict in LOOP_FREE or (verdict == "inconclusive" and loops == 0):
        return "loop-free"
    if verdict == "spec-corrupts-output":
        return "corrupts"
    if verdict.startswith("launch-failed"):
        return "launch-failed"
    if verdict.startswith(("crashed", "hung")):
        return "crashed"
    return "undecided"


# -- the run ----------------------------------------------------------------------------------------------

def corrupting_profile(pb: Playbook, from_doc: Summary | None, profile: str | None) -> str:
    """The profile to mitigate: ``profile``, else the diagnose run's first ``spec-corrupts-output``, else the
    playbook's first speculative profile. Raises ConfigError naming the choices."""
    spec = [p for p in pb.profile_order() if pb.profiles[p].speculative]
    if profile:
        if profile not in spec:
            raise ConfigError(f"{profile!r} is not a speculative profile of {pb.name}; choose one of {spec}",
                              field="--profile")
        return profile
    if from_doc:
        bad = [v.profile for v in Summary.of(from_doc).verdicts if v.kind == "spec-corrupts-output"]
        if bad and bad[0] in pb.profiles:
            return bad[0]
    if not spec:
        raise ConfigError(f"playbook {pb.name} has no speculative profile to mitigate", field="profiles")
    return spec[0]


def derived_playbook(pb: Playbook, profile: str, candidates: list[Candidate], *, samples: int | None) -> Playbook:
    """The mitigation run's playbook: baseline, the corrupting profile, one profile per launched candidate,
    early stopping on (``samples`` is the per-prompt budget)."""
    env = pb.profiles[profile].env
    profiles = {pb.baseline: pb.profiles[pb.baseline], profile: pb.profiles[profile]}
    for cand in candidates:
        if cand.skipped is None:
            profiles[cand.name] = ProfileConfig(flags=list(cand.flags), env=env, description=cand.change)
    data = {**pb.model_dump(), "profiles": {k: v.model_dump() for k, v in profiles.items()}, "early_stop": True}
    if samples:
        data["samples"] = samples
    try:
        return Playbook.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise ConfigError(f"candidate playbook invalid: {err['msg']}",
                          field=".".join(str(x) for x in err["loc"])) from None


def only_profiles(pb: Playbook, names: list[str]) -> Playbook:
    """``pb`` restricted to the baseline and ``names`` (Runner launches every profile of its playbook)."""
    keep = {n: p for n, p in pb.profiles.items() if n == pb.baseline or n in names}
    return pb.model_copy(update={"profiles": keep})


def mitigate(*, inventory="inventory.yaml", playbook="playbooks/diagnose-mtp.yaml", host: str | None = None,
             runs_dir="runs", profile: str | None = None, from_run: str | None = None, resume: str | None = None,
             only: list[str] | None = None, samples: int | None = None, hooks: Hooks | None = None,
             c=None, reference: bool = True) -> MitigateResult:
    """Try the candidates for the corrupting profile on ``host``; returns the ranked table document.

    Exit code 0 when some candidate is loop-free, 1 when none is. Raises ConfigError (bad options, a run to
    resume that does not exist or was made differently), MtpRemoteError when the host cannot be used, and
    Interrupted (with the resume command) on Ctrl-C: launched candidates' samples are kept. ``reference=False``
    does not launch the corrupting profile itself (a fleet spreading candidates runs it on one host only)."""
    config = as_loaded(inventory)  # read once: every step below takes it
    inventory = config.inventory_file
    _, host_cfg, pb = load_config(config, playbook, host)
    runs_dir = Path(runs_dir)
    hooks = hooks or Hooks()
    if resume:
        state, from_doc = _resumed_state(runs_dir, resume, host_cfg, pb), None
    else:
        state, from_doc = _new_state(runs_dir, host_cfg, pb, playbook=playbook, profile=profile, from_run=from_run,
                                     samples=samples, reference=reference, hooks=hooks)
    run_id, profile, samples = state.run_id, state.profile, state.samples
    run_dir = runs_dir / run_id
    resume_cmd = resume_command(run_id, inventory, host_cfg.name, playbook, runs_dir)
    python = remote_python(host_cfg)
    own = c is None
    conn = c or transport.connect(host_cfg)
    try:
        if resume:
            candidates = [Candidate.of(x) for x in state.candidates]
        else:
            candidates = _plan_and_store(conn, host_cfg, pb, python, state, run_dir, runs_dir=runs_dir,
                                         from_doc=from_doc, only=only)
        dpb = derived_playbook(pb, profile, candidates, samples=samples)
        hooks.on_progress(_opening(host_cfg, dpb, run_id, profile, candidates, playbook=playbook,
                                   resumed=bool(resume)))
        if state.reused and not resume:
            hooks.on_progress(state.reused)
        _run_all(conn, host_cfg, dpb, run_dir, run_id, python, profile, candidates, state, hooks)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; the servers we started were stopped and the samples are kept — continue "
                          f"with: {resume_cmd}") from None
    except MtpRemoteError as e:
        if run_dir.exists() and not hooks.interrupted():
            raise e.in_run(f" (continue with: {resume_cmd})", run_id=run_id, run_dir=run_dir) from e
        raise
    finally:
        if own:
            transport.close(conn)
    doc = build_document(state, dpb, run_dir, candidates, profile)
    _save(run_dir, doc)
    (run_dir / "mitigation.md").write_text(render_markdown(doc))
    return MitigateResult(run_id=run_id, run_dir=run_dir, document=doc, exit_code=doc.exit_code)


def _resumed_state(runs_dir: Path, resume: str, host_cfg: HostConfig, pb: Playbook) -> MitigationDoc:
    """The stored state of mitigation run ``resume`` (mitigation.json). Raises ConfigError when there is none, or
    when it was made with another host or playbook."""
    require_run_id(resume, "--resume")
    try:
        state = MitigationDoc.of(load_json_file(runs_dir / resume / MITIGATION_FILE))
    except (OSError, ValueError):
        raise ConfigError(f"no mitigation run {resume!r} to resume in {runs_dir}/ (no {MITIGATION_FILE})",
                          field="--resume") from None
    fp = mask_secrets(experiment_fingerprint(host_cfg, pb), playbook_secrets(pb, host_cfg))
    if state.fingerprint != fp:
        raise ConfigError(f"run {resume} was made with a different host or playbook; resume it with the same "
                          "inventory and playbook", field="--resume")
    state.run_id = resume
    return state


def _new_state(runs_dir: Path, host_cfg: HostConfig, pb: Playbook, *, playbook, profile: str | None,
               from_run: str | None, samples: int | None, reference: bool,
               hooks: Hooks) -> tuple[MitigationDoc, Summary | None]:
    """A new mitigation run's state (its id, the profile to mitigate, the run it starts from) and that run's
    summary (None without ``--from``). Raises ConfigError for a bad ``--from`` or ``--profile``."""
    run_id = new_run_id()
    _, from_doc = load_from_run(runs_dir, from_run)
    explicit = profile
    profile = corrupting_profile(pb, from_doc, profile)
    if from_doc and not explicit and not any(v.kind == "spec-corrupts-output" for v in from_doc.verdicts):
        found = ", ".join(f"{v.profile}: {v.kind}" for v in from_doc.verdicts) or "none"
        hooks.on_progress(f"{from_run} has no spec-corrupts-output verdict ({found}): mitigating {profile}, "
                          f"the playbook's first speculative profile (--profile picks another)")
    return MitigationDoc(
        schema_version=SCHEMA_VERSION, run_id=run_id, kind="mitigate", host=host_cfg.name, playbook=str(playbook),
        profile=profile, from_run=from_run, samples=samples, started_at=datetime.now(timezone.utc).isoformat(),
        simulated=host_cfg.is_sim,
        fingerprint=mask_secrets(experiment_fingerprint(host_cfg, pb), playbook_secrets(pb, host_cfg)),
        done=[] if reference else [profile], reused=None), from_doc


def _plan_and_store(conn, host_cfg: HostConfig, pb: Playbook, python: str, state: MitigationDoc, run_dir: Path, *,
                    runs_dir: Path, from_doc: Summary | None, only: list[str] | None) -> list[Candidate]:
    """A new run's candidates, planned from the host's SGLang release and model (``only``: these); the run
    directory made with the reused samples of the ``--from`` run when it matches, and the state stored.
    Raises ConfigError for an unknown ``--candidate``."""
    profile, from_run = state.profile, state.from_run
    env_facts = get_environment(conn, host_cfg, python)
    if env_facts.sglang is None:
        env_facts.sglang = sglang_version_of(from_doc)
    candidates = plan_candidates(model_path=host_cfg.model_path, base_flags=pb.base_flags,
                                 profile_flags=pb.profiles[profile].flags, playbook_mitigations=pb.mitigations,
                                 sglang_version=env_facts.sglang, architectures=tuple(env_facts.architectures))
    if only:
        unknown = sorted(set(only) - {x.name for x in candidates})
        if unknown:
            raise ConfigError(f"unknown candidate(s) {unknown}; choose from {[x.name for x in candidates]}",
                              field="--candidate")
        candidates = [x for x in candidates if x.name in only]
    run_dir.mkdir(parents=True, exist_ok=True)
    state.facts, state.candidates = Environment.of(env_facts.to_dict()), [x.to_dict() for x in candidates]
    if from_run:
        why_not = reuse_check(runs_dir / from_run, host_cfg, pb, profile)
        if why_not is None:
            n = copy_reused(runs_dir / from_run, run_dir, (pb.baseline, profile))
            state.reused = f"{n} samples of {pb.baseline} and {profile} from {from_run}"
        else:
            state.reused = f"nothing reused from {from_run}: {why_not}"
    _save(run_dir, state)
    return candidates


def _opening(host_cfg: HostConfig, dpb: Playbook, run_id: str, profile: str, candidates: list[Candidate], *,
             playbook, resumed: bool) -> str:
    """The mitigation run's opening line: requests planned over the baseline, the profile and the candidates."""
    launched = [profile] + [x.name for x in candidates if x.skipped is None]
    n_req = len(plan_requests(dpb, dpb.baseline)) + sum(len(plan_requests(dpb, n)) for n in launched)
    return opening_line(
        host_cfg, dpb, run_id, n_requests=n_req, n_profiles=1 + len(launched), playbook_file=playbook,
        resumed=resumed, command="mitigate run",
        planned=(f"{n_req} requests planned (budget; early stopping) over the baseline, {profile} as deployed "
                 f"and {len(launched) - 1} candidate(s) ({sum(1 for x in candidates if x.skipped)} skipped)"))


def resume_command(run_id: str, inventory, host: str, playbook, runs_dir) -> str:
    return (f"mtp-remote mitigate --resume {run_id} -i {shlex.quote(str(inventory))} -H {shlex.quote(host)} "
            f"-p {shlex.quote(str(playbook))} --runs-dir {shlex.quote(str(runs_dir))}")


def _save(run_dir: Path, state: MitigationDoc) -> None:
    tmp = run_dir / (MITIGATION_FILE + ".tmp")
    tmp.write_text(json.dumps(state.to_dict(), indent=2, default=str) + "\n")
    tmp.replace(run_dir / MITIGATION_FILE)


def _run_all(c, host: HostConfig, pb: Playbook, run_dir: Path, run_id: str, python: str, profile: str,
             candidates: list[Candidate], state: MitigationDoc, hooks: Hooks) -> None:
    """The baseline (all its samples: every candidate is compared with it), then the reference profile and each
    launched candidate with early stopping; each is marked done in the state file as it finishes."""
    state.mark_written("launch_failures")
    launch_failures = state.launch_failures
    base_pb = only_profiles(pb, []).model_copy(update={"early_stop": False})
    said: set[str] = set()  # the baseline's "already stored" line: said once, not once per candidate
    Runner(host, base_pb, run_dir, run_id=run_id, python=python, hooks=hooks, c=c, said_stored=said).run()
    todo = [profile] + [x.name for x in candidates if x.skipped is None]
    for name in todo:
        if name in state.done:
            continue
        hooks.on_progress(f"mitigate: {name} ({pb.profiles[name].description or 'as deployed'})")
        runs = Runner(host, only_profiles(pb, [name]), run_dir, run_id=run_id, python=python, profiles=[name],
                      hooks=hooks, c=c, said_stored=said).run()
        pr = next((r for r in runs if r.profile == name), None)
        if pr is not None and pr.failure() is not None:
            launch_failures[name] = list(pr.failure())  # [cause, hint, after_ready]: crashed:<cause> after ready
        state.done.append(name)
        _save(run_dir, state)


def build_document(state: MitigationDoc, pb: Playbook, run_dir: Path, candidates: list[Candidate],
                   profile: str) -> MitigationDoc:
    """The mitigation.json document: the state plus the ranked rows (speeds with 95 % intervals, ties with
    #1 marked), the recommended candidate (``best``, :func:`~mtp_remote.search.ranking.pick_best`), the
    ``recommendation`` sentence and the exit code."""
    samples = latest_samples(load_samples(run_dir / "samples.jsonl"))
    failures = {k: tuple(v) for k, v in state.launch_failures.items()}
    alpha, margin = pb.compare.alpha, pb.compare.margin
    sampled = {s.profile for s in samples} | set(failures)
    ref = judge_profile(pb.baseline, profile, samples, failures.get(profile), alpha, margin) \
        if profile in sampled else None
    ref_ls = LogSpeed.from_dict(ref.log_speed) if ref else None
    ref_flags = tuple(pb.profiles[profile].flags)
    rows = [CandidateResult(name=profile, change="as deployed", source="playbook", status="reference",
                            flags=ref_flags, flag_changes=0, **(ref.row_fields() if ref else {}))]
    judged = [ref] if ref else []
    for cand in candidates:
        row = CandidateResult(name=cand.name, change=cand.change, source=cand.source, status="skipped",
                              evidence=cand.skipped or "", flags=cand.flags,
                              flag_changes=flag_changes(cand.flags, ref_flags))
        if cand.skipped is None and cand.name in sampled:
            st = judge_profile(pb.baseline, cand.name, samples, failures.get(cand.name), alpha, margin)
            judged.append(st)
            cost = speed_fields(LogSpeed.from_dict(st.log_speed), None, ref_ls)
            row = CandidateResult(name=cand.name, change=cand.change, source=cand.source,
                                  status=status_of(st.verdict, st.loops), flags=cand.flags,
                                  flag_changes=row.flag_changes, **st.row_fields())
            row.speed_cost, row.speed_cost_ci = cost.speed_cost, cost.speed_cost_ci
        elif cand.skipped is None:
            row.status, row.evidence = "pending", "not run yet"
        rows.append(row)
    base = baseline_row(pb.baseline, judged, ref_ls, ref_flags)
    if base is not None:
        rows.append(base)
    familywise_loop_free(rows, alpha)
    ranked = rank_results(rows)
    best = pick_best(ranked)
    doc = state.model_copy(deep=True)
    doc.finished_at, doc.speed_confidence = datetime.now(timezone.utc).isoformat(), SPEED_CONFIDENCE
    doc.baseline, doc.rows, doc.best = pb.baseline, ranked, best.name if best else None
    doc.exit_code = 0 if best else 1
    doc.recommendation = recommendation(doc)
    return doc


def baseline_row(baseline: str, judged: list[ArmStats], ref_ls: LogSpeed | None,
                 ref_flags: tuple[str, ...]) -> CandidateResult | None:
    """The baseline as a row of the ranking (status ``baseline``: no speculation, so no speculative loop; the
    figures every other row is measured against): its loops and non-looping tokens/s, speed 1.00x the
    baseline by definition, and its speed cost against the as-deployed profile. ``judged``: the
    :func:`judge_profile` results of this run (each carries the shared baseline's figures); None without one."""
    st = next((j for j in map(ArmStats.of, judged) if j.base_n), None)
    if st is None:
        return None
    ls = LogSpeed.from_dict(st.base_log_speed)
    cost = speed_fields(ls, None, ref_ls)
    return CandidateResult(name=baseline, change="no speculation", source="baseline", status="baseline",
                           verdict="baseline", evidence="speculation off: what every row is measured against",
                           loops=st.base_loops, n=st.base_n, base_loops=st.base_loops, base_n=st.base_n,
                           tokens_per_s=st.base_tokens_per_s, speed_vs_baseline=1.0,
                           log_speed=st.base_log_speed, base_log_speed=st.base_log_speed,
                           speed_cost=cost.speed_cost, speed_cost_ci=cost.speed_cost_ci,
                           flag_changes=len(dict(parse_flags(list(ref_flags)))))
