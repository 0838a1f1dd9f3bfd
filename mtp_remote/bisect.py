"""``bisect``: the smallest set of flag changes from a good launch line that still corrupts output.

Delta debugging (Zeller & Hildebrandt 2002, *ddmin*) over the changes that turn the good profile's flags into
the bad one's (set a flag, change its value, remove it). One test applies a subset of the changes to the good
flags, launches that server once (:class:`~mtp_remote.runner.Runner`, early stopping with ``repeats`` samples
per prompt as the budget: a test is statistical) and asks the decision rule (:func:`mitigate._judge`) whether
it corrupts output against the baseline: ``fail`` (spec-corrupts-output), ``pass`` (no loop excess) or
``unresolved`` (anything else — ddmin treats it as not failing). Results are cached by flag set, so a
configuration is launched at most once. Writes ``runs/<run-id>/bisect.json`` and ``samples.jsonl``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .api import latest_samples, load_config, remote_python
from .candidates import parse_flags, unparse_flags
from .config import Playbook, ProfileConfig
from .errors import ConfigError
from .mitigate import _judge, _load_from, _reuse_check, copy_reused, only_profiles
from .remote import connect as transport
from .remote.commands import mask_argv, server_argv
from .runner import Hooks, Runner, load_samples, new_run_id

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
    document: dict
    exit_code: int


def bisect(*, inventory="inventory.yaml", playbook="playbooks/diagnose-mtp.yaml", host: str | None = None,
           runs_dir="runs", good: str | None = None, bad: str | None = None, repeats: int | None = None,
           from_run: str | None = None, hooks: Hooks | None = None, c=None) -> BisectResult:
    """Find the minimal flag change from ``good`` (default: the baseline profile's flags) to ``bad`` (default:
    the first speculative profile's, or the diagnose run's corrupting one) that corrupts output.

    ``good``/``bad`` are a profile name or a flag string. Exit code 0 when a minimal change was found (it is in
    ``document["minimal"]`` with the launch line), 1 when the bad line does not corrupt (nothing to bisect).
    Raises ConfigError for bad options, MtpRemoteError when the host cannot be used."""
    from .mitigate import corrupting_profile

    _, host_cfg, pb = load_config(inventory, playbook, host)
    hooks = hooks or Hooks()
    runs_dir = Path(runs_dir)
    from_dir, from_doc = _load_from(runs_dir, from_run)
    good_flags = _flags_of(pb, good or pb.baseline)
    bad_name = bad if bad and bad in pb.profiles else None
    if bad is None:
        bad_name = corrupting_profile(pb, from_doc, None)
    bad_flags = _flags_of(pb, bad or bad_name)
    changes = flag_changes(good_flags, bad_flags)
    if not changes:
        raise ConfigError("the good and bad launch lines have the same flags: nothing to bisect", field="--bad")
    run_id = new_run_id()
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    temps = [t for t in pb.temperatures if t > 0] or pb.temperatures
    budget = {"samples": repeats} if repeats else {}
    base = Playbook.model_validate({**pb.model_dump(), "temperatures": temps, "early_stop": True, **budget})
    reused = None
    if from_dir is not None and _reuse_check(from_dir, host_cfg, pb, bad_name or pb.baseline) is None:
        reused = copy_reused(from_dir, run_dir, (pb.baseline,))
    doc = {"schema_version": 1, "kind": "bisect", "run_id": run_id, "host": host_cfg.name,
           "simulated": host_cfg.is_sim, "playbook": str(playbook), "from_run": from_run,
           "started_at": datetime.now(timezone.utc).isoformat(), "good": good_flags, "bad": bad_flags,
           "changes": [describe(ch) for ch in changes], "repeats": base.samples, "tests": [],
           "baseline_reused": reused}
    python = remote_python(host_cfg)
    own = c is None
    conn = c or transport.connect(host_cfg)
    cache: dict[tuple[str, ...], str] = {}

    def save():
        (run_dir / BISECT_FILE).write_text(json.dumps(doc, indent=2, default=str) + "\n")

    def test(subset: list[Change]) -> str:
        flags = apply_changes(good_flags, subset)
        key = tuple(flags)
        if key in cache:
            return cache[key]
        if not subset and good is None:  # the baseline itself: the reference, not a test
            cache[key] = "pass"
            return "pass"
        name = f"t{len(doc['tests']) + 1}"
        hooks.on_progress(f"bisect {name}: {', '.join(describe(ch) for ch in subset) or '(good flags)'}")
        pbt = Playbook.model_validate({**base.model_dump(), "profiles": {
            **{k: v.model_dump() for k, v in base.profiles.items() if k == base.baseline},
            name: ProfileConfig(flags=flags, env=base.profiles[bad_name].env if bad_name else {}).model_dump()}})
        runs = Runner(host_cfg, only_profiles(pbt, [name]), run_dir, run_id=run_id, python=python,
                      profiles=[name], hooks=hooks, c=conn).run()
        pr = next((r for r in runs if r.profile == name), None)
        failure = (pr.cause or "unknown", pr.hint or "") if pr and not pr.launched and \
            (pr.outcome or {}).get("kind") != "skipped" else None
        verdict, _ = _judge(base.baseline, name, latest_samples(load_samples(run_dir / "samples.jsonl")), failure, base.compare.alpha)
        outcome = {"spec-corrupts-output": "fail"}.get(verdict.kind) or (
            "pass" if verdict.kind in ("healthy", "spec-slower", "spec-ineffective") else "unresolved")
        cache[key] = outcome
        doc["tests"].append({"name": name, "changes": [describe(ch) for ch in subset], "flags": flags,
                             "outcome": outcome, "verdict": verdict.kind, "evidence": verdict.evidence})
        hooks.on_progress(f"bisect {name}: {outcome} ({verdict.kind}: {verdict.evidence})")
        save()
        return outcome

    try:
        save()
        base_only = only_profiles(base, []).model_copy(update={"early_stop": False})
        Runner(host_cfg, base_only, run_dir, run_id=run_id, python=python, hooks=hooks, c=conn).run()
        if test(changes) != "fail":
            doc.update(minimal=None, exit_code=1,
                       message="the bad launch line does not corrupt output here: nothing to bisect")
        else:
            minimal = ddmin(changes, test)
            flags = apply_changes(good_flags, minimal)
            pbm = base.model_copy(update={"profiles": {**base.profiles, "minimal": ProfileConfig(flags=flags)}})
            argv = mask_argv(server_argv(host_cfg, pbm, "minimal"))
            doc.update(minimal=[describe(ch) for ch in minimal], minimal_flags=flags, exit_code=0,
                       command="python -m sglang.launch_server " + " ".join(shlex.quote(a) for a in argv))
    finally:
        if own:
            transport.close(conn)
    doc["finished_at"] = datetime.now(timezone.utc).isoformat()
    save()
    return BisectResult(run_id=run_id, run_dir=run_dir, document=doc, exit_code=doc["exit_code"])


def _flags_of(pb: Playbook, spec: str) -> list[str]:
    """A profile's flags by name, else ``spec`` read as a flag string."""
    if spec in pb.profiles:
        return list(pb.profiles[spec].flags)
    if not spec.strip().startswith("--"):
        raise ConfigError(f"{spec!r} is neither a profile of {pb.name} ({', '.join(pb.profiles)}) nor a flag string",
                          field="--good/--bad")
    return shlex.split(spec)


def load_bisect(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / BISECT_FILE).read_text())
    except (OSError, ValueError):
        return None


