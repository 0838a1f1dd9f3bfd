"""Starting from a diagnose run (``--from RUN_ID``), shared by ``mitigate`` and ``bisect``: read it, check that it
was made with the same experiment on the same host, and reuse its samples."""

from __future__ import annotations

import json
from pathlib import Path

from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..config.validation import is_name
from ..errors import ConfigError
from ..experiment.diagnose import RUN_FILE, experiment_fingerprint
from ..experiment.sampling import latest_samples, load_samples
from ..files import load_json_file
from ..records.summary import Summary
from ..remote.commands import mask_secrets, playbook_secrets
from ..report.records import cause_line
from ..responses import ServerInfo


def require_run_id(run_id: str, field: str) -> None:
    """Raise ConfigError naming ``field`` unless ``run_id`` is a run id (a safe name)."""
    if not is_name(run_id):
        raise ConfigError(f"{run_id!r} is not a run id (like 20261130-141850-9b44)", field=field)


def load_from_run(runs_dir: Path, from_run: str | None) -> tuple[Path | None, Summary | None]:
    """``--from RUN_ID``: (its directory, its summary.json as a :class:`~mtp_remote.records.summary.Summary`), or
    (None, None) without one. Raises ConfigError when the run is missing, unreadable or did not complete."""
    if not from_run:
        return None, None
    require_run_id(from_run, "--from")
    d = runs_dir / from_run
    try:
        raw = load_json_file(d / "summary.json")
    except FileNotFoundError:
        raise ConfigError(f"no diagnose run {from_run!r} in {runs_dir}/ (no summary.json)", field="--from") from None
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror}", file=str(d / "summary.json")) from None
    except ValueError as e:
        raise ConfigError(f"summary.json is not valid JSON: {e}", file=str(d / "summary.json")) from None
    try:
        doc = Summary.of(raw)
    except ValueError as e:
        raise ConfigError(f"summary.json is not a run summary: {e}", file=str(d / "summary.json")) from None
    if doc.status != "completed":  # no verdict and no samples: nothing to start from
        raise ConfigError(f"run {from_run} {doc.status}: {cause_line(doc)}; --from needs a completed diagnose "
                          f"run (run `mtp-remote diagnose` again, or leave --from out)", field="--from")
    return d, doc


def reuse_check(from_dir: Path, host: HostConfig, pb: Playbook, profile: str) -> str | None:
    """None when the diagnose run in ``from_dir`` was made on the same host with the same experiment (baseline
    and ``profile`` flags, prompts, sampling); else what differs."""
    try:
        stored = load_json_file(from_dir / RUN_FILE)["fingerprint"]
    except (OSError, ValueError, KeyError):
        return f"{from_dir / RUN_FILE} is missing or unreadable"  # a whole phrase: no "differ" after it
    now = mask_secrets(experiment_fingerprint(host, pb), playbook_secrets(pb, host))
    diffs = [k for k in ("host", "engine", "model_path", "address", "gpus", "python", "host_env")
             if stored.get(k) != now[k]]
    old_pb, new_pb = stored.get("playbook", {}), now["playbook"]
    diffs += [f"playbook.{k}" for k in sorted(set(old_pb) | set(new_pb)) if k not in ("name", "profiles")
              and old_pb.get(k) != new_pb.get(k)]
    for p in (pb.baseline, profile):
        if (old_pb.get("profiles") or {}).get(p) != new_pb["profiles"].get(p):
            diffs.append(f"profile {p}")
    return f"{', '.join(diffs)} differ" if diffs else None


def copy_reused(from_dir: Path, run_dir: Path, profiles: tuple[str, ...]) -> int:
    """Append the diagnose run's successful samples of ``profiles`` to this run's samples.jsonl (once)."""
    recs = [s for s in latest_samples(load_samples(from_dir / "samples.jsonl"))
            if s.profile in profiles and s.error is None]
    with (run_dir / "samples.jsonl").open("a") as f:
        for s in recs:
            f.write(json.dumps({**s.to_dict(), "reused_from": from_dir.name}) + "\n")
    return len(recs)


def sglang_version_of(doc: Summary | dict | None) -> str | None:
    """The SGLang release a diagnose run's servers reported (its summary.json's ``server_info``), or None."""
    for pr in Summary.of(doc).profiles if doc else []:
        v = ServerInfo.model_validate(pr.server_info or {}).version
        if v:
            return str(v)
    return None
