"""``bug-report RUN_ID``: an upstream issue body (markdown) from a diagnose run and what followed it.

Reads documents only (never the network): the diagnose run's ``summary.json`` and ``samples.jsonl``, and the
``mitigation.json`` / ``bisect.json`` of later runs started ``--from`` it (or the run itself when RUN_ID is a
mitigation run). Sections: environment (SGLang, torch, GPU, driver, model architectures), the minimal
reproducing command (bisect's, else the corrupting profile's launch line), the evidence table, a short excerpt of
one looping output, the mitigation table. Secrets are masked (API keys, secret env values, keys in log-like
text) and so are host names, addresses, users and home directories: the body is meant to be pasted in public.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from ..config.validation import is_name
from ..errors import ConfigError
from ..remote.commands import mask_log_secrets
from ..report.records import cause_line
from ..search.mitigate import HEADERS, table_rows

EXCERPT_CHARS = 500
CORRUPT = "spec-corrupts-output"  # the verdict an upstream issue is written for


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def related_runs(runs_dir: Path, run_id: str) -> tuple[dict | None, dict | None]:
    """The newest mitigation and bisect documents started from ``run_id`` (or being it)."""
    mit = bis = None
    for d in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        m, b = _read(d / "mitigation.json"), _read(d / "bisect.json")
        if m and (m.get("from_run") == run_id or m.get("run_id") == run_id):
            mit = m
        if b and (b.get("from_run") == run_id or b.get("run_id") == run_id):
            bis = b
    return mit, bis


def looping_excerpt(samples_path: Path, profile: str, chars: int = EXCERPT_CHARS) -> str | None:
    """A short excerpt of the first looping output of ``profile``, starting where its loop starts."""
    if not samples_path.exists():
        return None
    for line in samples_path.read_text().splitlines():
        try:
            s = json.loads(line)
        except ValueError:
            continue
        m = s.get("metrics") or {}
        if s.get("profile") == profile and m.get("loop") and s.get("text"):
            text = s["text"]
            start = max(0, int(m.get("loop_start_char") or 0) - (len("<think>\n") if s.get("think_opened_by_prompt") else 0))
            head = f"[{s['prompt_id']}, T={s['temperature']}, seed {s['seed']}, finish_reason={s.get('finish_reason')}, "
            head += f"{s.get('completion_tokens')} tokens; loop of {m.get('loop_unit_tokens')} tokens x "
            head += f"{m.get('loop_repeats')} from char {start}]\n"
            cut = text[start:start + chars]
            return head + ("…" if start else "") + cut + ("…" if start + chars < len(text) else "")
    return None


def masker(doc: dict):
    """A function masking this run's host name, address, user and home directories in text."""
    host = doc.get("host") or {}
    names = [v for v in (host.get("name"), host.get("address")) if v]

    def mask(text: str) -> str:
        text = mask_log_secrets(text)
        for n in sorted(set(names), key=len, reverse=True):
            text = re.sub(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", "<host>", text)
        text = re.sub(r"/(home|Users)/[^/\s'\"]+", r"/\1/<user>", text)
        text = re.sub(r"/root(?=/)", "/<home>", text)
        return re.sub(r"\b[\w.-]+@[\w.-]+\b", "<user>@<host>", text)

    return mask


def render_bug_report(doc: dict, samples_path: Path, mitigation: dict | None, bisect: dict | None) -> str:
    """The markdown body (masked)."""
    verdicts = doc.get("verdicts", [])
    bad = next((v for v in verdicts if v["kind"] == "spec-corrupts-output"), verdicts[0] if verdicts else None)
    profile = bad["profile"] if bad else None
    prof = next((p for p in doc.get("profiles", []) if p["profile"] == profile), {})
    info = prof.get("server_info") or {}
    facts = (mitigation or {}).get("facts") or {}
    sim = " (mtp-remote's simulated engine, not a real SGLang)" if doc.get("simulated") else ""
    lines = [(f"## Speculative decoding corrupts output: `{profile}` loops where the same server without "
             f"speculation does not{sim}"), ""]
    if bad:
        lines += [f"**Verdict** (mtp-remote {doc.get('tool_version')}): `{bad['kind']}` — {bad['evidence']}", ""]
    lines += ["### Environment", "",
              f"- SGLang: {facts.get('sglang') or info.get('version') or 'unknown'}",
              f"- torch: {facts.get('torch') or 'unknown'}",
              f"- GPU: {facts.get('gpus') and ', '.join(facts['gpus']) or 'unknown'}",
              f"- driver: {facts.get('driver') or 'unknown'}",
              (f"- model: `{(doc.get('host') or {}).get('model_path')}`; architectures: "
              f"{', '.join(facts.get('architectures') or []) or 'unknown'}"), ""]
    lines += ["### Minimal reproducing command", ""]
    if bisect and bisect.get("command"):
        lines += [(f"Found by delta debugging over the flag differences from the baseline "
                  f"({len(bisect['tests'])} test launches): the trigger is "
                  f"`{', '.join(bisect['minimal'])}`."), ""]
        cmd = bisect["command"]
    else:
        cmd = "python -m sglang.launch_server " + " ".join(shlex.quote(a) for a in prof.get("argv_masked", []))
    lines += ["```", cmd, "```", ""]
    lines += ["### Evidence", "", ("Same prompts and seeds against the server without speculation (baseline). "
              "Loops: repetition to the end of the output (corpus definition); p: one-sided Fisher exact, "
              "Holm-adjusted."), "", ("| profile | T | loops spec | loops baseline | p | accept len (non-loop) | "
              "tokens/s vs baseline (non-loop) |"), "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        for r in v.get("comparisons", []):
            acc = r.get("accept_length_nonloop") or r.get("accept_length")
            sr = r.get("speed_ratio_nonloop")
            lines.append(f"| {v['profile']} | {r['temperature']:g} | {r['spec_loops']}/{r['spec_n']} | "
                         f"{r['base_loops']}/{r['base_n']} | {r['p_adjusted']:.2g} | "
                         f"{'–' if acc is None else f'{acc:.2f}'} | {'–' if sr is None else f'{sr:.2f}x'} |")
    excerpt = looping_excerpt(samples_path, profile) if profile else None
    if excerpt:
        lines += ["", "### Excerpt of a looping output", "", "```", excerpt, "```"]
    if mitigation and mitigation.get("rows"):
        lines += ["", "### Mitigations tried", "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table_rows(mitigation)]
        if mitigation.get("best"):
            lines += ["", f"Workaround: `{mitigation['best']}` is loop-free (see the table for its speed cost)."]
    lines += ["", f"<sub>Generated by mtp-remote bug-report from run {doc.get('run_id')}.</sub>"]
    return masker(doc)("\n".join(lines)) + "\n"


def write_bug_report(run_id: str, *, runs_dir: Path = Path("runs"), output: Path | None = None) -> tuple[Path, str]:
    """Write the issue body for ``run_id`` (a diagnose run, or a mitigation run started from one); returns the
    path and the text. Raises ConfigError when the run or its summary is missing, when the run did not complete
    (its cause named), or when no profile of it has the spec-corrupts-output verdict (its verdicts named)."""
    if not is_name(run_id):
        raise ConfigError(f"{run_id!r} is not a run id", field="RUN_ID")
    run_dir = runs_dir / run_id
    own = _read(run_dir / "mitigation.json") or _read(run_dir / "bisect.json")
    diag_id = own["from_run"] if own and own.get("from_run") else run_id
    doc = _read(runs_dir / diag_id / "summary.json")
    if doc is None:
        raise ConfigError(f"no diagnose run {diag_id!r} in {runs_dir}/ (summary.json missing)"
                          + ("" if diag_id == run_id else f"; {run_id} was started from it"), field="RUN_ID")
    if doc.get("status", "completed") != "completed":  # no verdict, no evidence: an issue body would be empty

        raise ConfigError(f"run {diag_id} {doc.get('status')}: {cause_line(doc)}; it has no verdict to report "
                          f"(a bug report needs a completed diagnose run with a spec-corrupts-output verdict)",
                          file=str(runs_dir / diag_id / "summary.json"))
    if not any(v.get("kind") == CORRUPT for v in doc.get("verdicts", [])):
        found = ", ".join(f"{v.get('profile')}: {v.get('kind')}" for v in doc.get("verdicts", [])) or "none"
        raise ConfigError(f"run {diag_id} has no {CORRUPT} verdict (verdicts: {found}); a bug report is written "
                          f"for a profile that corrupts output", file=str(runs_dir / diag_id / "summary.json"))
    mit, bis = related_runs(runs_dir, diag_id)
    text = render_bug_report(doc, runs_dir / diag_id / "samples.jsonl", mit, bis)
    path = output or (run_dir / "bug-report.md")
    path.write_text(text)
    return path, text
