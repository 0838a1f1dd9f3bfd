"""The text a samples.jsonl record's metrics are computed on — shared by the runner (as it samples) and
``analyze`` (re-reading records), in a module light enough for the latter: importing the runner costs
~0.3 s of CPU (pydantic, httpx), a third of analysing 1,000 samples."""

from __future__ import annotations

THINK_PREFIX = "<think>\n"


def analysed_text(text: str, think_opened_by_prompt: bool) -> str:
    """The text the metrics see: with the prompt's ``<think>`` put back when the template opened it, so an
    unterminated reasoning block counts as unclosed (character offsets then include that prefix)."""
    return THINK_PREFIX + text if think_opened_by_prompt else text
