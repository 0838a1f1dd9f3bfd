"""``bisect``: the smallest set of flag changes from a good launch line that still corrupts output.

Delta debugging (Zeller & Hildebrandt 2002, *ddmin*) over the changes that turn the good profile's flags into
the bad one's (set a flag, change its value, remove it). One test applies a subset of the changes to the good
flags, launches that server once (:class:`~mtp_remote.experiment.runner.Runner`, early stopping with ``repeats`` samples
per prompt as the budget: a test is statistical) and asks the decision rule (:func:`mitigate.judge_arm`) whether
it corrupts output against the baseline: ``fail`` (spec-corrupts-output), ``pass`` (no loop excess) or
``unresolved`` (anything else — ddmin treats it as not failing). Results are cached by flag set, so a
configuration is launched at most once. Writes ``runs/<run-id>/bisect.json`` and ``samples.jsonl``.

Family-wise error over the tests (issue 31): ddmin's answer rests on its ``fail`` outcomes, and how many tests
it makes is not known in advance, so test ``t<i>`` is judged at :func:`test_alpha` = ``alpha / (i (i + 1))``
(the shares sum to ``alpha``: by the union bound a false ``fail`` anywhere in the search has probability at most
``compare.alpha``); each test records its level.

Resumable like ``diagnose`` and ``mitigate`` (``--resume RUN_ID``): every test's result is written to
bisect.json as it completes (and the test in flight as ``pending``, its samples in samples.jsonl); a resumed
bisect replays ddmin with the stored results of the same flag sets, so it relaunches none of them, and
continues the test that was interrupted from its stored samples. ddmin is deterministic, so the resumed run
ends with the same minimal change as an uninterrupted one.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..config.playbook import Playbook, ProfileConfig
from ..errors import ConfigError, Interrupted, MtpRemoteError
from ..files import load_json_file
from ..records.summary import Summary
from ..experiment.diagnose import experiment_fingerprint, opening_line
from ..config.loaded import as_loaded
from ..experiment.hosts import load_config, remote_python
from ..experiment.sampling import latest_samples
from ..experiment.plan import plan_requests
from ..experiment.run_id import new_run_id
from ..experiment.runner import Hooks, Runner
from ..experiment.sampling import load_samples
from ..remote import connect as transport
from ..remote.commands import mask_argv, mask_secrets, playbook_secrets, server_argv
from .candidates import parse_flags, unparse_flags
from .from_run import copy_reused, load_from_run, require_run_id, reuse_check
from .mitigate import corrupting_profile, judge_arm, only_profiles
from .records import BisectDoc, BisectTest, PendingTest

BISECT_FILE = "bisect.json"

Change = tuple[str, str, str | None]  # (op "set" | "unset", flag, value)


def flag_changes(good: list[str], bad: list[str]) -> list[Change]:
    """The changes that turn ``good`` flags into ``bad`` ones, in ``bad``'s order then removals."""
    g, b = dict(parse_flags(good)), dict(parse_flags(bad))
    out: list[Change] = [("set", k, v) for k, v in parse_flags(bad) if k not in g or g[k] != v]
    out += [("unset", k, None) for k, _ in parse_flags(good) if k not in b]
    return out


def apply_changes(good: list[str], changes: list[Change]) -> list[str]:
    """``good`` flags with ``changes`` applied (a set replaces the flag's value in place, or appends it)."""
    pairs = parse_flags(good)
    for op, k, v in changes:
        if op == "unset":
            pairs = [(n, x) for n, x in pairs if n != k]
        elif any(n == k for n, _ in pairs):
            pairs = [(n, v if n == k else x) for n, x in pairs]
        else:
            pairs.append((k, v))
    return unparse_flags(pairs)


def test_alpha(alpha: float, index: int) -> float:
    """The level of bisect's test number ``index`` (1-based, ``t<index>``): ``alpha / (index (index + 1))`` —
    alpha/2, alpha/6, alpha/12, ...; the levels of any number of tests sum to at most ``alpha``."""
    return alpha / (index * (index + 1))


def describe(change: Change) -> str:
    op, k, v = change
    return f"without {k}" if op == "unset" else (k if v is None else f"{k} {v}")


def ddmin(changes: list, test: Callable[[list], str]) -> list:
    """A 1-minimal subset of ``changes`` for which ``test`` returns ``"fail"`` (``test(changes)`` must fail).

    Zeller's ddmin: split into n parts; reduce to a failing part (n = 2) or a failing complement
    (n = n - 1); else double n until the parts are single changes. ``unresolved`` counts as not failing."""
    n = 2
    cur = list(changes)
    while len(cur) >= 2:
        size = len(cur) / n
        parts = [cur[int(i * size):int((i + 1) * size)] for i in range(n)]
        parts = [p for p in parts if p]
        reduced = False
        for p in parts:
            if test(p) == "fail":
                cur, n, reduced = p, 2, True
                break
        if not reduced and n > 2:
            for p in parts:
                comp = [c for c in cur if c not in p]
                if test(comp) == "fail":
                    cur, n, reduced = comp, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(cur):
                break
            n = min(len(cur), 2 * n)
    if len(cur) == 1 and test([]) == "fail":
        return []
    return cur


@dataclass
class BisectResult:
    run_id: str
    run_dir: Path
    document: BisectDoc
    exit_code: int


def bisect(*, inventory="inventory.yaml", playbook="playbooks/diagnose-mtp.yaml", host: str | None = None,
           runs_dir="runs", good: str | None = None, bad: str | None = None, repeats: int | None = None,
           from_run: str | None = None, hooks: Hooks | None = None, c=None,
           resume: str | None = None) -> BisectResult:
    """Find the minimal flag change from ``good`` (default: the baseline profile's flags) to ``bad`` (default:
    the first speculative profile's, or the diagnose run's corrupting one) that corrupts output.

    ``good``/``bad`` are a profile name or a flag string. Exit code 0 when a minimal change was found (it is in
    ``document.minimal`` with the launch line), 1 when the bad line does not corrupt (nothing to bisect).
    ``resume``: continue bisect run RUN_ID (its good/bad lines, repeats and stored test results; the same
    inventory and playbook). Raises ConfigError for bad options or a run that cannot be resumed,
    MtpRemoteError when the host cannot be used (with the resume command), Interrupted (with the resume
    command) on Ctrl-C: finished tests and the samples of the one in flight are kept."""
    config = as_loaded(inventory)  # read once: every step below takes it
    inventory = config.inventory_file
    _, host_cfg, pb = load_config(config, playbook, host)
    hooks = hooks or Hooks()
    runs_dir = Path(runs_dir)
    fingerprint = mask_secrets(experiment_fingerprint(host_cfg, pb), playbook_secrets(pb, host_cfg))
    if resume:
        doc = _resume_state(runs_dir, resume, fingerprint)
        good, bad, from_run, repeats = doc.good_spec, doc.bad_spec, doc.from_run, doc.repeats_asked
    from_dir, from_doc = load_from_run(runs_dir, from_run)
    good_flags, bad_name, bad_flags, changes = _lines(pb, from_doc, good, bad)
    run_id = resume or new_run_id()
    run_dir = runs_dir / run_id
    temps = [t for t in pb.temperatures if t > 0] or pb.temperatures
    budget = {"samples": repeats} if repeats else {}
    base = Playbook.model_validate({**pb.model_dump(), "temperatures": temps, "early_stop": True, **budget})
    if resume:
        if (doc.good, doc.bad) != (good_flags, bad_flags):
            raise ConfigError(f"run {resume}'s good/bad lines no longer read the same from the playbook; resume "
                              "it with the playbook it was made with", field="--resume")
    else:
        run_dir.mkdir(parents=True)
        reused = None
        if from_dir is not None and reuse_check(from_dir, host_cfg, pb, bad_name or pb.baseline) is None:
            reused = copy_reused(from_dir, run_dir, (pb.baseline,))
        doc = BisectDoc(schema_version=1, kind="bisect", run_id=run_id, host=host_cfg.name, simulated=host_cfg.is_sim,
                        playbook=str(playbook), from_run=from_run, started_at=datetime.now(timezone.utc).isoformat(),
                        good=good_flags, bad=bad_flags, good_spec=good, bad_spec=bad, repeats_asked=repeats,
                        fingerprint=fingerprint, changes=[describe(ch) for ch in changes], repeats=base.samples,
                        tests=[], pending=None, baseline_reused=reused)
    doc.unset("minimal")
    resume_cmd = resume_command(run_id, inventory, host_cfg.name, playbook, runs_dir)
    run = _Bisection(doc, run_dir, run_id, host_cfg, base, good_flags=good_flags, good=good, bad_name=bad_name,
                     python=remote_python(host_cfg), hooks=hooks)
    per_test = len(plan_requests(base, base.baseline))
    hooks.on_progress(opening_line(
        host_cfg, base, run_id, n_requests=per_test, n_profiles=0, playbook_file=playbook, resumed=bool(resume),
        command="bisect run",
        planned=(f"{len(changes)} flag difference(s) from {good or pb.baseline} (good) to {bad or bad_name} (bad); "
                 f"up to {per_test} requests per test launch (budget; early stopping), one launch per test; "
                 f"{len(doc.tests)} test(s) stored" + (", not launched again" if resume else ""))))
    own = c is None
    try:
        run.save()
        run.conn = c or transport.connect(host_cfg)
        run.search(changes)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; the servers we started were stopped, {len(doc.tests)} finished tests "
                          f"and the samples are kept — continue with: {resume_cmd}") from None
    except MtpRemoteError as e:
        if hooks.interrupted():
            raise Interrupted(f"interrupted; {len(doc.tests)} finished tests and the samples are kept — "
                              f"continue with: {resume_cmd}") from None
        raise e.in_run(f" (continue with: {resume_cmd})", run_id=run_id, run_dir=run_dir) from e
    finally:
        if own and run.conn is not None:
            transport.close(run.conn)
    doc.finished_at = datetime.now(timezone.utc).isoformat()
    run.save()
    return BisectResult(run_id=run_id, run_dir=run_dir, document=doc, exit_code=doc.exit_code)


class _Bisection:
    """One bisect run as it goes: its stored document (``bisect.json``: the tests so far, the one in flight),
    the outcome of every flag set tested, and the host connection (``conn``, set before :meth:`search`)."""

    def __init__(self, doc: BisectDoc, run_dir: Path, run_id: str, host_cfg, base: Playbook, *, good_flags: list[str],
                 good: str | None, bad_name: str | None, python: str, hooks: Hooks):
        self.doc, self.run_dir, self.run_id, self.host_cfg, self.base = doc, run_dir, run_id, host_cfg, base
        self.good_flags, self.good, self.bad_name, self.python, self.hooks = good_flags, good, bad_name, python, hooks
        self.cache: dict[tuple[str, ...], str] = {tuple(t.flags): t.outcome for t in doc.tests}
        self.conn = None
        self.said_stored: set[str] = set()  # the baseline's "already stored" line: said once, not per test

    def save(self) -> None:
        """Write ``bisect.json`` (through a temporary file and a rename)."""
        tmp = self.run_dir / (BISECT_FILE + ".tmp")
        tmp.write_text(json.dumps(self.doc.to_dict(), indent=2, default=str) + "\n")
        tmp.replace(self.run_dir / BISECT_FILE)

    def next_name(self, flags: list[str]) -> str:
        """The interrupted test's name when these are its flags (its stored samples continue), else a new one."""
        pending = self.doc.pending
        if pending and pending.flags == flags:
            return pending.name
        used = [int(t.name[1:]) for t in self.doc.tests] + ([int(pending.name[1:])] if pending else [])
        return f"t{max(used, default=0) + 1}"

    def test(self, subset: list[Change]) -> str:
        """``pass``, ``fail`` or ``unresolved`` for the good flags with ``subset`` applied: stored, or one launch
        judged against the baseline (then stored)."""
        flags = apply_changes(self.good_flags, subset)
        key = tuple(flags)
        if key in self.cache:
            return self.cache[key]
        if not subset and self.good is None:  # the baseline itself: the reference, not a test
            self.cache[key] = "pass"
            return "pass"
        self.hooks.checkpoint()  # a safe point: the tests so far are stored
        name = self.next_name(flags)
        self.doc.pending = PendingTest(name=name, flags=flags)
        self.save()
        self.hooks.on_progress(f"bisect {name}: {', '.join(describe(ch) for ch in subset) or '(good flags)'}")
        base = self.base
        pbt = Playbook.model_validate({**base.model_dump(), "profiles": {
            **{k: v.model_dump() for k, v in base.profiles.items() if k == base.baseline},
            name: ProfileConfig(flags=flags, env=base.profiles[self.bad_name].env if self.bad_name else {}).model_dump()}})
        runs = Runner(self.host_cfg, only_profiles(pbt, [name]), self.run_dir, run_id=self.run_id, python=self.python,
                      profiles=[name], hooks=self.hooks, c=self.conn, said_stored=self.said_stored).run()
        self.doc.pending = None
        pr = next((r for r in runs if r.profile == name), None)
        samples = latest_samples(load_samples(self.run_dir / "samples.jsonl"))
        level = test_alpha(base.compare.alpha, int(name[1:]))
        verdict, _ = judge_arm(base.baseline, name, samples, pr.failure() if pr else None, level, base.compare.margin)
        outcome = {"spec-corrupts-output": "fail"}.get(verdict.kind) or (
            "pass" if verdict.kind in ("healthy", "spec-slower", "spec-ineffective") else "unresolved")
        self.cache[key] = outcome
        self.doc.tests.append(BisectTest(name=name, changes=[describe(ch) for ch in subset], flags=flags,
                                         outcome=outcome, verdict=verdict.kind, evidence=verdict.evidence,
                                         alpha=level))
        self.hooks.on_progress(f"bisect {name}: {outcome} ({verdict.kind}: {verdict.evidence})")
        self.save()
        return outcome

    def search(self, changes: list[Change]) -> None:
        """The baseline's samples, then the bad line, then ddmin over ``changes``: the minimal change and its
        launch line in the document (``exit_code`` 0), or 1 when the bad line does not corrupt output here."""
        base, doc = self.base, self.doc
        base_only = only_profiles(base, []).model_copy(update={"early_stop": False})
        Runner(self.host_cfg, base_only, self.run_dir, run_id=self.run_id, python=self.python, hooks=self.hooks,
               c=self.conn, said_stored=self.said_stored).run()
        if self.test(changes) != "fail":
            doc.minimal, doc.exit_code = None, 1
            doc.message = "the bad launch line does not corrupt output here: nothing to bisect"
            return
        minimal = ddmin(changes, self.test)
        flags = apply_changes(self.good_flags, minimal)
        pbm = base.model_copy(update={"profiles": {**base.profiles, "minimal": ProfileConfig(flags=flags)}})
        argv = mask_argv(server_argv(self.host_cfg, pbm, "minimal"))
        doc.minimal, doc.minimal_flags, doc.exit_code = [describe(ch) for ch in minimal], flags, 0
        doc.command = "python -m sglang.launch_server " + " ".join(shlex.quote(a) for a in argv)


def _lines(pb: Playbook, from_doc: Summary | None, good: str | None, bad: str | None):
    """(good flags, bad profile name or None, bad flags, changes). Raises ConfigError when they are equal."""
    good_flags = _flags_of(pb, good or pb.baseline)
    bad_name = bad if bad and bad in pb.profiles else None
    if bad is None:
        bad_name = corrupting_profile(pb, from_doc, None)
    bad_flags = _flags_of(pb, bad or bad_name)
    changes = flag_changes(good_flags, bad_flags)
    if not changes:
        raise ConfigError("the good and bad launch lines have the same flags: nothing to bisect", field="--bad")
    return good_flags, bad_name, bad_flags, changes


def _resume_state(runs_dir: Path, run_id: str, fingerprint: dict) -> BisectDoc:
    """The stored bisect.json of ``run_id``. Raises ConfigError when there is none, it is finished, or it was
    made with another host or playbook."""
    require_run_id(run_id, "--resume")
    doc = load_bisect(runs_dir / run_id)
    if doc is None or doc.fingerprint is None:
        raise ConfigError(f"no resumable bisect run {run_id!r} in {runs_dir}/ (no {BISECT_FILE})", field="--resume")
    if doc.fingerprint != fingerprint:
        raise ConfigError(f"run {run_id} was made with a different host or playbook; resume it with the same "
                          "inventory and playbook", field="--resume")
    return doc


def resume_command(run_id: str, inventory, host: str, playbook, runs_dir) -> str:
    return (f"mtp-remote bisect --resume {run_id} -i {shlex.quote(str(inventory))} -H {shlex.quote(host)} "
            f"-p {shlex.quote(str(playbook))} --runs-dir {shlex.quote(str(runs_dir))}")


def _flags_of(pb: Playbook, spec: str) -> list[str]:
    """A profile's flags by name, else ``spec`` read as a flag string."""
    if spec in pb.profiles:
        return list(pb.profiles[spec].flags)
    if not spec.strip().startswith("--"):
        raise ConfigError(f"{spec!r} is neither a profile of {pb.name} ({', '.join(pb.profiles)}) nor a flag string",
                          field="--good/--bad")
    return shlex.split(spec)


def load_bisect(run_dir: Path) -> BisectDoc | None:
    """The stored ``bisect.json`` of ``run_dir``; None when there is none or it cannot be read."""
    try:
        return BisectDoc.of(load_json_file(run_dir / BISECT_FILE))
    except (OSError, ValueError):
        return None


