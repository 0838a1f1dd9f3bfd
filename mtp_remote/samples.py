"""samples.jsonl records: reading them, their key, the latest per key, and the text their metrics are computed on
— shared by the runner (as it samples), ``analyze`` and ``report`` (re-reading records), in a module light
enough for the latter two: importing the runner costs ~0.3 s of CPU (pydantic, httpx), the API's imports
(scipy, Fabric) over a second."""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)

THINK_PREFIX = "<think>\n"


def analysed_text(text: str, think_opened_by_prompt: bool) -> str:
    """The text the metrics see: with the prompt's ``<think>`` put back when the template opened it, so an
    unterminated reasoning block counts as unclosed (character offsets then include that prefix)."""
    return THINK_PREFIX + text if think_opened_by_prompt else text


def load_samples(path: Path) -> list[dict]:
    """Samples already stored (a truncated last line from a crash is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            log.warning("skipping a truncated line in %s", path)
    return out


def sample_key(s: dict) -> tuple:
    """(profile, temperature, prompt id, sample index): one request of the plan."""
    return (s["profile"], float(s["temperature"]), s["prompt_id"], s["sample_index"])


def latest_samples(samples: list[dict]) -> list[dict]:
    """One record per (profile, temperature, prompt, sample index): the last successful one, else the last
    failure (a resumed run re-requests what failed, so both may be stored)."""
    best: dict[tuple, dict] = {}
    for x in samples:
        key = sample_key(x)
        if key not in best or x.get("error") is None or best[key].get("error") is not None:
            best[key] = x
    return list(best.values())
