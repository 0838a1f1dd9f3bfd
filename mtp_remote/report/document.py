"""The run's versioned summary document (``summary.json``): build, save, load.

The document holds everything a renderer needs — schema and tool version, host facts (simulated or not,
faults), the expanded plan, per-profile launch outcomes, cells and verdicts — so reports can be re-rendered
later without the network. Secrets were masked before anything got here.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from .. import __version__
from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..errors import ConfigError
from ..files import InputTooLarge, JsonTooDeep, load_json_file
from ..records.summary import SCHEMA_VERSION, Summary
from ..remote.commands import mask_secrets, playbook_secrets
from .accounting import time_split, token_accounting

if TYPE_CHECKING:  # (diagnosis imports scipy: not needed to load or re-render a document)
    from ..analysis.diagnosis import Diagnosis


def host_facts(host: HostConfig, playbook: Playbook) -> dict:
    """Host facts for the report header: name, transport, engine, simulated?, faults (sim), masked env."""
    return {"name": host.name, "transport": host.transport, "engine": host.engine, "simulated": host.is_sim,
            "address": host.address, "port": host.port, "model_path": host.model_path,
            "faults": host.env.get("SGLANG_SIM_FAULTS", "") if host.is_sim else None,
            "profile_faults": ({n: p.env["SGLANG_SIM_FAULTS"] for n, p in playbook.profiles.items()
                                if "SGLANG_SIM_FAULTS" in p.env} if host.is_sim else None),
            "env": host.masked_env()}


def engine_facts(host: HostConfig, profile_runs: list) -> dict:
    """What served the run, from the servers' own ``/server_info`` (``version``, ``model_path``): e.g.
    ``{"label": "real SGLang 0.5.9", "version": "0.5.9", "simulated": False, "model_path": "/models/..."}``."""
    infos = [pr.server_info for pr in profile_runs if getattr(pr, "server_info", None)]
    version = next((i["version"] for i in infos if i.get("version")), None)
    model = next((i["model_path"] for i in infos if i.get("model_path")), host.model_path)
    # an attached endpoint that is mtp-remote's simulated engine says so in its own /server_info
    simulated = host.is_sim or any(i.get("simulated") is True for i in infos)
    name = "simulated SGLang (mtp_remote.sim)" if simulated else "real SGLang"
    return {"label": f"{name} {version}" if version else name, "version": version, "simulated": simulated,
            "model_path": model}


def build_summary(*, run_id: str, host: HostConfig, playbook: Playbook, profile_runs: list, diagnosis: Diagnosis,
                  exit_code: int, started_at: datetime, n_samples: int, playbook_file: str | None = None,
                  samples: list[dict] | None = None, command_started: datetime | None = None) -> Summary:
    """The summary.json document (:class:`~mtp_remote.records.summary.Summary`). Times: ISO-8601 UTC; durations: seconds.
    ``samples`` (the run's records) give ``generated_tokens``, ``tokens_saved`` and ``loop_stop``.
    ``command_started``: when this command began (a resume: later than ``started_at``, the run's first start);
    ``time_split`` covers this command only, so the time between an interrupted run and its resume is never
    counted as the tool's (``duration_s`` stays the run's, first start to finish)."""
    finished = datetime.now(timezone.utc)
    tokens = token_accounting(samples or [], playbook.max_tokens)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tool": "mtp-remote",
        "tool_version": __version__,
        "run_id": run_id,
        "status": "completed",  # failed/interrupted runs: mtp_remote.report.records.failed_summary
        "started_at": started_at.isoformat(),
        "finished_at": finished.isoformat(),
        "duration_s": round((finished - started_at).total_seconds(), 2),
        "host": host_facts(host, playbook),
        "engine": engine_facts(host, profile_runs),
        "simulated": host.is_sim or any((pr.server_info or {}).get("simulated") is True for pr in profile_runs),
        "playbook": {
            "name": playbook.name, "file": playbook_file, "baseline": playbook.baseline,
            "base_flags": playbook.base_flags,
            "profiles": {n: {"flags": p.flags, "speculative": p.speculative} for n, p in playbook.profiles.items()},
            "prompts": [p.model_dump() for p in playbook.prompts], "temperatures": playbook.temperatures,
            "samples": playbook.samples, "greedy_samples": playbook.greedy_samples, "max_tokens": playbook.max_tokens, "api": playbook.api,
            "top_p": playbook.top_p, "seed": playbook.seed, "prompt_template": playbook.prompt_template,
            "alpha": playbook.compare.alpha, "margin": playbook.compare.margin,
        },
        "profiles": [_profile_dict(pr) for pr in profile_runs],
        "cells": [_cell_dict(c) for c in diagnosis.cells],
        "verdicts": [v.to_dict() for v in diagnosis.verdicts],
        "calibration": diagnosis.calibration,
        "n_samples": n_samples,
        "sampling": _sampling(playbook, profile_runs, n_samples),
        "generated_tokens": tokens.generated_tokens,
        "tokens_saved": tokens.tokens_saved,
        "kl_probe_tokens": tokens.kl_probe_tokens,
        "loop_stop": {"enabled": playbook.stop_on_loop, **tokens.to_dict()},
        "time_split": time_split(profile_runs, (finished - (command_started or started_at)).total_seconds()).to_dict(),
        "exit_code": exit_code,
        "files": {"samples": "samples.jsonl", "report": "report.md", "html": "report.html", "junit": "junit.xml",
                  "metrics": "metrics.prom", "logs": "logs/"},
    }
    # nothing secret leaves the run: API keys in flags, env values, log lines quoting server_args
    return Summary.model_validate(mask_secrets(doc, playbook_secrets(playbook, host)))


def _sampling(playbook: Playbook, profile_runs: list, n_samples: int) -> dict:
    """Fixed budget (profiles × temperatures × prompts × samples) against what was requested."""
    budget = len(profile_runs) * len(playbook.prompts) * sum(playbook.samples_at(t) for t in playbook.temperatures)
    return {"early_stop": playbook.early_stop, "budget": budget, "used": n_samples,
            "saved": max(0, budget - n_samples),
            "used_fraction": round(n_samples / budget, 3) if budget else None}


def _profile_dict(pr) -> dict:
    d = asdict(pr)
    d["launched"] = pr.launched
    return d


def _cell_dict(c) -> dict:
    d = asdict(c)
    d["loop_ci"] = list(c.loop_ci)
    return d


def save_summary(doc: Summary | dict, run_dir: Path) -> Path:
    """Write ``run_dir/summary.json`` (a mapping is read as a :class:`Summary` first); returns its path."""
    return Summary.of(doc).save(run_dir)


def load_summary(path: str | Path) -> Summary:
    """Read a summary.json (or a run directory) as a :class:`Summary` (a fleet nightly's summary too: its own
    fields are kept as read). Raises ConfigError for a missing file, a newer schema or a field of the wrong
    type."""
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    try:
        doc = load_json_file(p)
    except FileNotFoundError:
        raise ConfigError("no summary.json here", file=str(p)) from None
    except (InputTooLarge, JsonTooDeep) as e:
        raise ConfigError(str(e), file=str(p)) from None
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror}", file=str(p)) from None
    except ValueError as e:
        raise ConfigError(f"not valid JSON: {e}", file=str(p)) from None
    if not isinstance(doc, dict):
        raise ConfigError("not a summary: the file holds no JSON object", file=str(p))
    if doc.get("schema_version", 0) > SCHEMA_VERSION:
        raise ConfigError(f"schema_version {doc.get('schema_version')} is newer than this tool reads "
                          f"({SCHEMA_VERSION}); upgrade mtp-remote", file=str(p), field="schema_version")
    try:
        return Summary.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        raise ConfigError(f"not a summary this tool reads: {err['msg']}", file=str(p),
                          field=".".join(str(x) for x in err["loc"])) from None
