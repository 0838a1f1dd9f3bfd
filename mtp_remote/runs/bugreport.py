"""``bug-report RUN_ID``: an upstream issue body (markdown) from a diagnose run and what followed it.

Reads documents only (never the network): the diagnose run's ``summary.json``, ``samples.jsonl`` and
``logs/``, and the ``mitigation.json`` / ``bisect.json`` of later runs started ``--from`` it (or the run itself
when RUN_ID is a mitigation run). Written for a profile that corrupts output (``spec-corrupts-output``) and for
one whose server crashed or hung while sampling (``crashed:<cause>``/``hung:<cause>``: a crash is a bug worth
reporting too). Sections: environment (SGLang, torch, GPU, driver, model architectures), the minimal
reproducing command (bisect's, else the profile's launch line), the evidence (the loop table, or the crash's
cause and the log's last lines), the exact request to replay (endpoint, the prompt text after the template,
sampling parameters with the seed and ``max_tokens``, a ``curl`` line) with the output it got from its start,
the mitigation table. Secrets are masked (API keys, secret env values, keys in log-like text) and so are host
names, addresses, users and home directories: the body is meant to be pasted in public.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from ..client import chat_request, generate_request
from ..config.validation import is_name
from ..errors import ConfigError
from ..files import load_json_file, loads_json
from ..remote.commands import mask_log_secrets
from ..report.records import cause_line
from ..search.mitigate import HEADERS, table_rows

EXCERPT_CHARS = 500
#: Characters of a quoted output shown from its start (the loop's first copies included after them).
OUTPUT_CHARS = 2000
CORRUPT = "spec-corrupts-output"  # the verdict an upstream issue is written for
FAILURES = ("crashed:", "hung:")  # ... and the server failures while sampling, which are bugs too
#: Lines of the crashed server's log quoted in the report.
LOG_TAIL_LINES = 30


def reportable(kind: str) -> bool:
    """True for a verdict a bug report is written for: corruption, or a crash/hang while sampling."""
    return kind == CORRUPT or kind.startswith(FAILURES)


def _read(path: Path) -> dict | None:
    try:
        return load_json_file(path)
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


def _samples(samples_path: Path) -> list[dict]:
    out = []
    if samples_path.exists():
        for line in samples_path.open(encoding="utf-8", errors="replace"):
            try:
                out.append(loads_json(line))
            except ValueError:
                continue
    return out


def quoted_sample(samples: list[dict], profile: str, kind: str) -> dict | None:
    """The sample the report quotes: for corruption the first looping output of ``profile`` (the latest
    attempt of each request), for a crash the first request of ``profile`` that failed (the one in flight
    when the server died), else its last answered one."""
    mine = [s for s in samples if s.get("profile") == profile]
    if kind == CORRUPT:
        return next((s for s in mine if (s.get("metrics") or {}).get("loop") and s.get("text")), None)
    return next((s for s in mine if s.get("error")), mine[-1] if mine else None)


def looping_excerpt(samples_path: Path, profile: str, chars: int = EXCERPT_CHARS) -> str | None:
    """A short excerpt of the first looping output of ``profile``, starting where its loop starts."""
    s = quoted_sample(_samples(samples_path), profile, CORRUPT)
    if s is None:
        return None
    m = s.get("metrics") or {}
    text = s["text"]
    start = _loop_start(s)
    head = f"[{s['prompt_id']}, T={s['temperature']}, seed {s['seed']}, finish_reason={s.get('finish_reason')}, "
    head += f"{s.get('completion_tokens')} tokens; loop of {m.get('loop_unit_tokens')} tokens x "
    head += f"{m.get('loop_repeats')} from char {start}]\n"
    cut = text[start:start + chars]
    return head + ("…" if start else "") + cut + ("…" if start + chars < len(text) else "")


def _loop_start(s: dict) -> int:
    m = s.get("metrics") or {}
    return max(0, int(m.get("loop_start_char") or 0) - (len("<think>\n") if s.get("think_opened_by_prompt") else 0))


def request_of(sample: dict, doc: dict) -> tuple[dict, bool]:
    """``({"endpoint", "body"}, exact)``: the request ``sample`` was answered for -- as stored with it
    (``exact``), or, for samples stored before requests were, rebuilt from the run's playbook (prompt text,
    template, ``top_p``, ``max_tokens``; the sample's own seed) the way the runner builds it."""
    if sample.get("request"):
        return sample["request"], True
    pb = doc.get("playbook") or {}
    prompt = next((p.get("text", "") for p in pb.get("prompts", []) if p.get("id") == sample.get("prompt_id")), "")
    t, top_p, n = float(sample["temperature"]), float(pb.get("top_p") or 1.0), int(pb.get("max_tokens") or 2048)
    if pb.get("api") == "generate":
        text = (pb.get("prompt_template") or "{prompt}").replace("{prompt}", prompt)
        return generate_request(text, temperature=t, max_new_tokens=n, top_p=top_p, seed=sample.get("seed"),
                                top2=t == 0), False
    return chat_request(prompt, temperature=t, max_tokens=n, top_p=top_p, seed=sample.get("seed")), False


def _message_line(m: dict) -> str:
    """One chat message as ``role: content`` with its tool calls (``-> name(arguments)``) and, for a tool turn,
    the call it answers."""
    line = f"{m.get('role')}: {m.get('content') if m.get('content') is not None else ''}"
    if m.get("tool_call_id"):
        line += f" (answers {m['tool_call_id']})"
    for c in m.get("tool_calls") or []:
        fn = (c.get("function") or {}) if isinstance(c, dict) else {}
        line += f" -> {fn.get('name')}({fn.get('arguments')})"
    return line


def replay_section(sample: dict, doc: dict, samples: list[dict], *, port: int = 30000) -> list[str]:
    """Markdown lines: the exact request of ``sample`` (endpoint, prompt text after the template, sampling
    parameters, seed, max tokens, a ``curl`` line against the launch command's server on ``port``), what the
    speculative server answered from the start of its output, and what the baseline answered to the same
    request."""
    req, exact = request_of(sample, doc)
    body = dict(req["body"])
    for k in ("return_logprob", "logprob_start_len", "top_logprobs_num"):  # our measurement, not the bug
        body.pop(k, None)
    endpoint = req["endpoint"]
    lines = ["### Replay the request", "",
             (f"Request `{sample.get('prompt_id')}` sample {sample.get('sample_index')} at T={sample['temperature']:g}, "
              f"as mtp-remote sent it{'' if exact else ' (rebuilt from the run playbook: stored before requests were)'}: "
              f"`POST {endpoint}` to the server started with the command above (on port {port})."), ""]
    if "text" in body:
        lines += ["Prompt text, after the chat template (what `/generate` receives):", "", "```",
                  body["text"], "```", ""]
        params = body.get("sampling_params", {})
    else:
        msgs = body.get("messages", [])
        lines += ["Messages (the server applies the model's chat template):", "", "```",
                  "\n".join(_message_line(m) for m in msgs), "```", ""]
        if body.get("tools"):
            names = [(t.get("function") or {}).get("name") for t in body["tools"] if isinstance(t, dict)]
            lines += [f"Tools ({len(names)}, definitions in the curl body): {', '.join(map(str, names))}", ""]
        params = {k: v for k, v in body.items() if k not in ("messages", "model", "tools")}
    seed_key = "sampling_seed" if "sampling_seed" in params else "seed"
    max_key = "max_new_tokens" if "max_new_tokens" in params else "max_tokens"
    lines += [f"Sampling parameters: `{json.dumps(params, sort_keys=True)}` (seed `{params.get(seed_key)}` as "
              f"`{seed_key}`, `{max_key}` {params.get(max_key)})", "", "```",
              f"curl -s http://127.0.0.1:{port}{endpoint} -H 'Content-Type: application/json' \\",
              f"  -d {shlex.quote(json.dumps(body, ensure_ascii=False))}", "```", ""]
    text = sample.get("text") or ""
    if sample.get("error"):
        lines += [f"This request was in flight when the server failed; it got: `{sample['error'][:300]}`", ""]
    elif text:
        start = _loop_start(sample) if (sample.get("metrics") or {}).get("loop") else None
        shown = max(OUTPUT_CHARS, (start or 0) + EXCERPT_CHARS)
        note = (f"; the loop starts at char {start}" if start is not None else "")
        lines += [(f"Output from its start ({sample.get('completion_tokens')} tokens, finish_reason="
                   f"{sample.get('finish_reason')}{note}):"), "", "```",
                  text[:shown] + ("…" if len(text) > shown else ""), "```", ""]
    twin = next((b for b in samples if b.get("profile") == (doc.get("playbook") or {}).get("baseline", "baseline")
                 and b.get("prompt_id") == sample.get("prompt_id") and b.get("seed") == sample.get("seed")
                 and float(b.get("temperature", -1)) == float(sample["temperature"]) and not b.get("error")), None)
    if twin is not None:
        loops = "loops" if (twin.get("metrics") or {}).get("loop") else "does not loop"
        lines += [(f"The same request to the server without speculation: {twin.get('completion_tokens')} tokens, "
                   f"finish_reason={twin.get('finish_reason')}, {loops}."), ""]
    return lines


def _port(prof: dict) -> int:
    """The ``--port`` of a profile's launch line; for an attached endpoint (its line read back without host and
    port) the port its ``/server_info`` reports; SGLang's default 30000 without either."""
    argv = prof.get("argv_masked") or []
    for i, a in enumerate(argv):
        if a == "--port" and i + 1 < len(argv) and str(argv[i + 1]).isdigit():
            return int(argv[i + 1])
        if str(a).startswith("--port=") and a[7:].isdigit():
            return int(a[7:])
    served = (prof.get("server_info") or {}).get("port")
    return served if isinstance(served, int) and not isinstance(served, bool) else 30000


def log_tail(run_dir: Path, profile: str, lines: int = LOG_TAIL_LINES) -> str | None:
    """The last ``lines`` lines of ``profile``'s server log kept with the run (``logs/<profile>.log``)."""
    p = run_dir / "logs" / f"{profile}.log"
    try:
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
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
    bad = next((v for v in verdicts if v["kind"] == CORRUPT), None) or \
        next((v for v in verdicts if reportable(v["kind"])), verdicts[0] if verdicts else None)
    profile = bad["profile"] if bad else None
    kind = bad["kind"] if bad else CORRUPT
    prof = next((p for p in doc.get("profiles", []) if p["profile"] == profile), {})
    info = prof.get("server_info") or {}
    facts = (mitigation or {}).get("facts") or {}
    sim = " (mtp-remote's simulated engine, not a real SGLang)" if doc.get("simulated") else ""
    if kind == CORRUPT:
        title = f"Speculative decoding corrupts output: `{profile}` loops where the same server without speculation does not"
    else:
        what = "hung" if kind.startswith("hung:") else "crashed"
        title = (f"Speculative decoding: the `{profile}` server {what} while serving (`{kind}`), where the same "
                 f"server without speculation served every request")
    lines = [f"## {title}{sim}", ""]
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
        good = bisect.get("good_spec")
        origin = ("the baseline" if not good else
                  f"the good launch line given with `--good {good}`" if " " in str(good) or str(good).startswith("-")
                  else f"the `{good}` profile (`--good {good}`)")
        lines += [(f"Found by delta debugging over the flag differences from {origin} "
                  f"({len(bisect['tests'])} test launches): the trigger is "
                  f"`{', '.join(bisect['minimal'])}`."), ""]
        cmd = bisect["command"]
    else:
        cmd = "python -m sglang.launch_server " + " ".join(shlex.quote(a) for a in prof.get("argv_masked", []))
    lines += ["```", cmd, "```", ""]
    samples = _samples(samples_path)
    if kind != CORRUPT:
        crash = prof.get("crashed") or {}
        lines += ["### Evidence", "",
                  (f"The server became ready and served {prof.get('n_requests', 0)} request(s), then failed while "
                   f"sampling: `{kind}`. Its fatal line: `{crash.get('fatal_line') or 'not logged'}`. "
                   f"mtp-remote's reading: {crash.get('hint') or bad.get('evidence') or 'see the log'}"), ""]
        tail = log_tail(samples_path.parent, profile) if profile else None
        if tail:
            lines += [f"Last {LOG_TAIL_LINES} lines of its log:", "", "```", tail, "```", ""]
        quoted = quoted_sample(samples, profile, kind) if profile else None
        if quoted is not None:
            lines += replay_section(quoted, doc, samples, port=_port(prof))
        return _finish(lines, doc, mitigation)
    lines += ["### Evidence", "", ("Same prompts and seeds against the server without speculation (baseline). "
              "Loops: repetition to the end of the output (corpus definition); p: one-sided Fisher exact, "
              "Holm-adjusted."), "", ("| profile | T | loops spec | loops baseline | p | accept len (non-loop) | "
              "tokens/s vs baseline (non-loop) |"), "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        for r in v.get("comparisons", []):
            acc = r.get("accept_length_nonloop") or r.get("accept_length")
            sr = r.get("speed_ratio_nonloop")
            p = r.get("p_adjusted")  # None at T = 0: greedy cells are judged by the lossless test, not by loops
            lines.append(f"| {v['profile']} | {r['temperature']:g} | {r['spec_loops']}/{r['spec_n']} | "
                         f"{r['base_loops']}/{r['base_n']} | {'–' if p is None else f'{p:.2g}'} | "
                         f"{'–' if acc is None else f'{acc:.2f}'} | {'–' if sr is None else f'{sr:.2f}x'} |")
    excerpt = looping_excerpt(samples_path, profile) if profile else None
    if excerpt:
        lines += ["", "### Excerpt of a looping output", "", "```", excerpt, "```"]
    quoted = quoted_sample(samples, profile, kind) if profile else None
    if quoted is not None:
        lines += [""] + replay_section(quoted, doc, samples, port=_port(prof))
    return _finish(lines, doc, mitigation)


def _finish(lines: list[str], doc: dict, mitigation: dict | None) -> str:
    """The mitigation table and the footer after ``lines``; the whole body masked."""
    if mitigation and mitigation.get("rows"):
        lines += ["", "### Mitigations tried", "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table_rows(mitigation)]
        if mitigation.get("recommendation"):
            lines += ["", mitigation["recommendation"].replace("**", "")]
        elif mitigation.get("best"):
            lines += ["", f"Workaround: `{mitigation['best']}` is loop-free (see the table for its speed cost)."]
    lines += ["", f"<sub>Generated by mtp-remote bug-report from run {doc.get('run_id')}.</sub>"]
    return masker(doc)("\n".join(lines)) + "\n"


def write_bug_report(run_id: str, *, runs_dir: Path = Path("runs"), output: Path | None = None) -> tuple[Path, str]:
    """Write the issue body for ``run_id`` (a diagnose run, or a mitigation run started from one); returns the
    path and the text. Raises ConfigError when the run or its summary is missing, when the run did not complete
    (its cause named), or when no profile of it has a :func:`reportable` verdict (its verdicts named)."""
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
    if not any(reportable(v.get("kind", "")) for v in doc.get("verdicts", [])):
        found = ", ".join(f"{v.get('profile')}: {v.get('kind')}" for v in doc.get("verdicts", [])) or "none"
        raise ConfigError(f"run {diag_id} has no {CORRUPT}, crashed:<cause> or hung:<cause> verdict (verdicts: "
                          f"{found}); a bug report is written for a profile that corrupts output or whose server "
                          f"failed while sampling", file=str(runs_dir / diag_id / "summary.json"))
    mit, bis = related_runs(runs_dir, diag_id)
    text = render_bug_report(doc, runs_dir / diag_id / "samples.jsonl", mit, bis)
    path = output or (run_dir / "bug-report.md")
    path.write_text(text)
    return path, text
