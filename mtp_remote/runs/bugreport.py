"""``bug-report RUN_ID``: an upstream issue body (markdown) from a diagnose run and what followed it.

Reads documents only (never the network): the diagnose run's ``summary.json``, ``samples.jsonl`` and
``logs/``, and the ``mitigation.json`` / ``bisect.json`` of later runs started ``--from`` it (or the run itself
when RUN_ID is a mitigation run). Written for a profile that corrupts output (``spec-corrupts-output``) and for
one whose server crashed or hung while sampling (``crashed:<cause>``/``hung:<cause>``: a crash is a bug worth
reporting too). Sections: environment (SGLang, torch, GPU, driver, model architectures), the minimal
reproducing command (bisect's beside the as-deployed launch line, else the latter), the evidence (the loop
table and the lossless tests' evidence, or the crash's cause and the log's last lines), the exact request to
replay -- a greedy (T = 0) one that shows the fault when there is one (a T > 0 request replays only with
``--enable-deterministic-inference``, which the report says) -- (endpoint, the prompt text after the template,
sampling parameters with the seed and ``max_tokens``, a non-streaming ``curl`` line) with the output it got from
its start, and the baseline's answer to the same request from its start with the first diverging token position
(and the top-1/top-2 logprob margins there); then the mitigation table. The title names loops only when the
speculative arm loops more than the baseline, else the lossless evidence (greedy divergence, KL). Secrets are masked (API keys, secret env values, keys in log-like text) and so are host
names, addresses, users and home directories: the body is meant to be pasted in public.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from ..responses import chat_request, generate_request
from ..config.validation import is_name
from ..errors import ConfigError
from ..files import load_json_file, loads_json, read_bounded
from ..outside_text import fence, inline_code
from ..remote.commands import mask_log_secrets
from ..analysis.divergence import first_divergence
from ..analysis.settled import LOOP_STOP
from ..records.base import R
from ..records.sample import Sample
from ..search.records import BisectDoc, MitigationDoc
from ..records.summary import CrashRecord, Environment, ProfileRecord, Summary, VerdictRecord
from ..search.mitigation_report import HEADERS, table_rows

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


def _read(path: Path, record: type[R]) -> R | None:
    """The document at ``path`` as ``record``; None when it is missing, unreadable or not that document."""
    try:
        return record.of(load_json_file(path))
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


def related_runs(runs_dir: Path, run_id: str) -> tuple[MitigationDoc | None, BisectDoc | None]:
    """The newest mitigation and bisect documents started from ``run_id`` (or being it)."""
    mit = bis = None
    for d in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        m, b = _read(d / "mitigation.json", MitigationDoc), _read(d / "bisect.json", BisectDoc)
        if m and run_id in (m.from_run, m.run_id):
            mit = m
        if b and run_id in (b.from_run, b.run_id):
            bis = b
    return mit, bis


def _samples(samples_path: Path) -> list[Sample]:
    out = []
    if samples_path.exists():
        for line in samples_path.open(encoding="utf-8", errors="replace"):
            try:
                out.append(Sample.of(loads_json(line)))
            except ValueError:
                continue
    return out


def _loops(s: Sample) -> bool:
    return s.loops and bool(s.text)


def baseline_twin(sample: Sample, samples: list[Sample], doc: Summary) -> Sample | None:
    """The baseline's answer to ``sample``'s request (same prompt, seed and temperature), or None."""
    base = doc.playbook.baseline
    return next((b for b in samples if b.profile == base and b.prompt_id == sample.prompt_id
                 and b.seed == sample.seed and not b.error and float(b.temperature) == float(sample.temperature)),
                None)


def _diverges(s: Sample, samples: list[Sample], doc: Summary) -> bool:
    twin = baseline_twin(s, samples, doc)
    return bool(twin and s.output_ids and twin.output_ids and first_divergence(s.output_ids, twin.output_ids)
                is not None)


def quoted_sample(samples: list[Sample | dict], profile: str, kind: str,
                  doc: Summary | dict | None = None) -> Sample | None:
    """The sample the report quotes (the latest attempt of each request of ``profile``). For corruption, one
    a maintainer can replay: a greedy (T = 0) output that loops, else a greedy one that diverges from the
    baseline's answer to the same request (``doc`` names the baseline), else the first looping output at
    T > 0 (reproducible only with deterministic inference). For a crash the first request that failed (the one
    in flight when the server died), else its last answered one."""
    samples = [Sample.of(s) for s in samples]
    doc = Summary.of(doc or {})
    mine = [s for s in samples if s.profile == profile]
    if kind == CORRUPT:
        greedy = [s for s in mine if float(s.temperature) == 0 and s.text]
        return (next((s for s in greedy if _loops(s)), None)
                or next((s for s in greedy if _diverges(s, samples, doc)), None)
                or next((s for s in mine if _loops(s)), None))
    return next((s for s in mine if s.error), mine[-1] if mine else None)


def looping_excerpt(samples_path: Path, profile: str, chars: int = EXCERPT_CHARS) -> str | None:
    """A short excerpt of the first looping output of ``profile``, starting where its loop starts."""
    mine = [s for s in _samples(samples_path) if s.profile == profile and _loops(s)]
    s = next((s for s in mine if float(s.temperature) == 0), mine[0] if mine else None)
    if s is None:
        return None
    m = s.metrics
    text = s.text
    start = _loop_start(s)
    head = f"[{s.prompt_id}, T={s.temperature}, seed {s.seed}, finish_reason={s.finish_reason}, "
    head += f"{s.completion_tokens} tokens; loop of {m.loop_unit_tokens} tokens x "
    head += f"{m.loop_repeats} from char {start}]\n"
    cut = text[start:start + chars]
    return head + ("…" if start else "") + cut + ("…" if start + chars < len(text) else "")


def _loop_start(s: Sample) -> int:
    at = int((s.metrics.loop_start_char if s.metrics else None) or 0)
    return max(0, at - (len("<think>\n") if s.think_opened_by_prompt else 0))


def request_of(sample: Sample | dict, doc: Summary | dict) -> tuple[dict, bool]:
    """``({"endpoint", "body"}, exact)``: the request ``sample`` was answered for -- as stored with it
    (``exact``), or, for samples stored before requests were, rebuilt from the run's playbook (prompt text,
    template, ``top_p``, ``max_tokens``; the sample's own seed) the way the runner builds it."""
    sample = Sample.of(sample)
    if sample.request:
        return sample.request, True
    pb = Summary.of(doc).playbook
    prompt = next((p.text for p in pb.prompts if p.id == sample.prompt_id), "")
    t, top_p, n = float(sample.temperature), float(pb.top_p or 1.0), int(pb.max_tokens or 2048)
    if pb.api == "generate":
        text = (pb.prompt_template or "{prompt}").replace("{prompt}", prompt)
        return generate_request(text, temperature=t, max_new_tokens=n, top_p=top_p, seed=sample.seed,
                                top2=t == 0), False
    return chat_request(prompt, temperature=t, max_tokens=n, top_p=top_p, seed=sample.seed), False


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


def replay_section(sample: Sample, doc: Summary, samples: list[Sample], *, port: int = 30000) -> list[str]:
    """Markdown lines: the exact request of ``sample`` (endpoint, prompt text after the template, sampling
    parameters, seed, max tokens, a ``curl`` line against the launch command's server on ``port``), what the
    speculative server answered from the start of its output, and what the baseline answered to the same
    request."""
    req, exact = request_of(sample, doc)
    body = dict(req["body"])
    for k in ("return_logprob", "logprob_start_len", "top_logprobs_num"):  # our measurement, not the bug
        body.pop(k, None)
    streamed = bool(body.pop("stream", None))
    body.pop("stream_options", None)
    if isinstance(body.get("sampling_params"), dict):
        body["sampling_params"] = {k: v for k, v in body["sampling_params"].items() if k != "stream_interval"}
    endpoint = req["endpoint"]
    lines = ["### Replay the request", "",
             (f"Request `{sample.prompt_id}` sample {sample.sample_index} at T={sample.temperature:g}, "
              f"as mtp-remote sent it{'' if exact else ' (rebuilt from the run playbook: stored before requests were)'}: "
              f"`POST {endpoint}` to the server started with the command above (on port {port})."), ""]
    if "text" in body:
        lines += ["Prompt text, after the chat template (what `/generate` receives):", "", fence(body["text"]), ""]
        params = body.get("sampling_params", {})
    else:
        msgs = body.get("messages", [])
        lines += ["Messages (the server applies the model's chat template):", "",
                  fence("\n".join(_message_line(m) for m in msgs)), ""]
        if body.get("tools"):
            names = [(t.get("function") or {}).get("name") for t in body["tools"] if isinstance(t, dict)]
            lines += [f"Tools ({len(names)}, definitions in the curl body): {', '.join(map(str, names))}", ""]
        params = {k: v for k, v in body.items() if k not in ("messages", "model", "tools")}
    seed_key = "sampling_seed" if "sampling_seed" in params else "seed"
    max_key = "max_new_tokens" if "max_new_tokens" in params else "max_tokens"
    lines += [f"Sampling parameters: `{json.dumps(params, sort_keys=True)}` (seed `{params.get(seed_key)}` as "
              f"`{seed_key}`, `{max_key}` {params.get(max_key)})", "",
              (f"The `curl` below is non-streaming (one JSON answer at the end"
               f"{'; mtp-remote streamed this request, which changes no token' if streamed else ''})."), "",
              fence(f"curl -s http://127.0.0.1:{port}{endpoint} -H 'Content-Type: application/json' \\\n"
                    f"  -d {shlex.quote(json.dumps(body, ensure_ascii=False))}"), "", _replay_note(sample), ""]
    text = sample.text or ""
    if sample.error:
        lines += [f"This request was in flight when the server failed; it got: {inline_code(sample.error[:300])}", ""]
    elif text:
        start = _loop_start(sample) if sample.loops else None
        shown = max(OUTPUT_CHARS, (start or 0) + EXCERPT_CHARS)
        note = (f"; the loop starts at char {start}" if start is not None else "")
        lines += [(f"Output from its start ({sample.completion_tokens} tokens, finish_reason="
                   f"{sample.finish_reason}{note}):"), "", fence(text[:shown] + ("…" if len(text) > shown else "")), ""]
        if sample.finish_reason == LOOP_STOP:
            lines += [LOOP_STOP_NOTE, ""]
    twin = baseline_twin(sample, samples, doc)
    if twin is not None:
        loops = "loops" if twin.loops else "does not loop"
        lines += [(f"The same request to the server without speculation: {twin.completion_tokens} tokens, "
                   f"finish_reason={twin.finish_reason}, {loops}."), ""]
        if text and not sample.error:
            lines += divergence_lines(sample, twin)
    return lines


#: ``loop-stop`` explained where a quoted output ends with it.
LOOP_STOP_NOTE = (f"`{LOOP_STOP}` is mtp-remote's finish reason, not SGLang's: mtp-remote aborted the request once "
                  "its loop had repeated enough to be settled (the playbook's loop stop), to save the tokens left; "
                  "replayed, SGLang goes on looping to `length`.")


def _replay_note(sample: Sample) -> str:
    """Whether the request replays token for token: greedy does; a T > 0 one only with deterministic inference."""
    if float(sample.temperature) == 0:
        return ("Greedy (T=0): the server without speculation answers it the same on every replay, so the output "
                "below is what a replay shows.")
    return ("T > 0: SGLang (0.5.9) honours a request's `sampling_seed` only when the server runs with "
            "`--enable-deterministic-inference`; add it to the launch line to replay this sample token for token. "
            "Without it the replay samples afresh (the fault shows at its rate, not in this output).")


def divergence_lines(spec: Sample | dict, base: Sample | dict) -> list[str]:
    """Markdown lines: where the speculative output ``spec`` first departs from the baseline's ``base`` (token
    position in the output, both tokens, the top-1 minus top-2 logprob margins there when the samples carry
    them) and the baseline's output from its start. Empty when the outputs are the same token for token."""
    spec, base = Sample.of(spec), Sample.of(base)
    a, b = spec.output_ids or [], base.output_ids or []
    first = first_divergence(a, b) if a and b else None
    if first is None:
        return []
    ta, tb = spec.text or "", base.text or ""
    char = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
    tok_a, tok_b = (ids[first] if first < len(ids) else "end of output" for ids in (a, b))
    out = [(f"**First diverging token: position {first}** of the output (0-based; char {char} of the text): "
            f"speculative `{tok_a}`, baseline `{tok_b}` (token ids).")]
    margins = [(name, s.top2_margins) for name, s in (("speculative", spec), ("baseline", base))]
    shown = [f"{name} {m[first]:.3g} nats" for name, m in margins if m and first < len(m)]
    if shown:
        out[-1] += (" Top-1 minus top-2 logprob there: " + ", ".join(shown).replace("inf nats", "one token only")
                    + " (a near tie is numerical noise; a wide margin is not).")
    shown_chars = max(OUTPUT_CHARS, char + EXCERPT_CHARS)
    out += ["", (f"Baseline output from its start ({base.completion_tokens} tokens, finish_reason="
                 f"{base.finish_reason}):"), "", "```", tb[:shown_chars] + ("…" if len(tb) > shown_chars else ""),
            "```", ""]
    return out


def _port(prof: ProfileRecord) -> int:
    """The ``--port`` of a profile's launch line; for an attached endpoint (its line read back without host and
    port) the port its ``/server_info`` reports; SGLang's default 30000 without either."""
    argv = prof.argv_masked or []
    for i, a in enumerate(argv):
        if a == "--port" and i + 1 < len(argv) and str(argv[i + 1]).isdigit():
            return int(argv[i + 1])
        if str(a).startswith("--port=") and a[7:].isdigit():
            return int(a[7:])
    served = (prof.server_info or {}).get("port")
    return served if isinstance(served, int) and not isinstance(served, bool) else 30000


def log_tail(run_dir: Path, profile: str, lines: int = LOG_TAIL_LINES) -> str | None:
    """The last ``lines`` lines of ``profile``'s server log kept with the run (``logs/<profile>.log``), read within
    the input bound; None when there is none — or when ``profile`` (from a received run directory's summary) is
    not a profile name (``../../x`` would read a file outside the run: never)."""
    if not is_name(profile):
        return None
    p = run_dir / "logs" / f"{profile}.log"
    try:
        return "\n".join(read_bounded(p).decode("utf-8", "replace").splitlines()[-lines:])
    except (OSError, ValueError):
        return None


def masker(doc: Summary | dict):
    """A function masking this run's host name, address, user and home directories in text."""
    host = Summary.of(doc).host
    names = [v for v in (host.name, host.address) if v]

    def mask(text: str) -> str:
        text = mask_log_secrets(text)
        for n in sorted(set(names), key=len, reverse=True):
            text = re.sub(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", "<host>", text)
        text = re.sub(r"/(home|Users)/[^/\s'\"]+", r"/\1/<user>", text)
        text = re.sub(r"/root(?=/)", "/<home>", text)
        return re.sub(r"\b[\w.-]+@[\w.-]+\b", "<user>@<host>", text)

    return mask


def loop_excess(verdict: VerdictRecord | None, samples: list[Sample]) -> bool:
    """Whether any cell of ``verdict`` has more loops under speculation than in the baseline (for a summary
    without per-cell comparisons: whether any of the profile's ``samples`` loops)."""
    rows = verdict.comparisons if verdict else []
    if rows:
        return any(r.spec_loops > r.base_loops for r in rows)
    return any(_loops(s) for s in samples if s.profile == (verdict.profile if verdict else None))


def lossless_names(verdict: VerdictRecord | None) -> list[str]:
    """The names of the lossless tests behind ``verdict`` that carry evidence (``greedy``, ``kl``...)."""
    return [str(t.name) for t in (verdict.lossless if verdict else []) if t.evidence]


def environment_of(doc: Summary | dict, mitigation: MitigationDoc | dict | None) -> Environment:
    """The host's facts for the Environment section: what the diagnose run recorded (``environment``, read once
    per run as preflight reads them), with a mitigation run's own reading over it where it knows more."""
    doc = Summary.of(doc)
    facts = doc.environment.to_dict() if doc.environment else {}
    mine = MitigationDoc.of(mitigation).facts if mitigation else None
    facts.update({k: v for k, v in (mine.items() if mine else []) if v})
    return Environment.of(facts)


def _any_version(doc: Summary) -> str | None:
    """The SGLang version any profile's server reported (a hung profile's server never answered
    ``/server_info``; the host's other servers ran the same SGLang)."""
    return next((v for v in ((p.server_info or {}).get("version") for p in doc.profiles) if v), None)


def render_bug_report(doc: Summary | dict, samples_path: Path, mitigation: MitigationDoc | dict | None,
                      bisect: BisectDoc | dict | None) -> str:
    """The markdown body (masked)."""
    doc = Summary.of(doc)
    mitigation = MitigationDoc.of(mitigation) if mitigation else None
    bisect = BisectDoc.of(bisect) if bisect else None
    verdicts = doc.verdicts
    bad = next((v for v in verdicts if v.kind == CORRUPT), None) or \
        next((v for v in verdicts if reportable(v.kind)), verdicts[0] if verdicts else None)
    profile = bad.profile if bad else None
    kind = bad.kind if bad else CORRUPT
    prof = doc.profile(profile) or ProfileRecord(profile=profile or "")
    info = prof.server_info or {}
    facts = environment_of(doc, mitigation)
    sim = " (mtp-remote's simulated engine, not a real SGLang)" if doc.simulated else ""
    samples = _samples(samples_path)
    if kind == CORRUPT and loop_excess(bad, samples):
        title = f"Speculative decoding corrupts output: `{profile}` loops where the same server without speculation does not"
    elif kind == CORRUPT:
        title = (f"Speculative decoding corrupts output: `{profile}`'s output differs from the same server without "
                 f"speculation ({' and '.join(lossless_names(bad)) or 'lossless'} evidence; no loops in either)")
    else:
        what = "hung" if kind.startswith("hung:") else "crashed"
        title = (f"Speculative decoding: the `{profile}` server {what} while serving (`{kind}`), where the same "
                 f"server without speculation served every request")
    lines = [f"## {title}{sim}", ""]
    if bad:
        lines += [f"**Verdict** (mtp-remote {doc.tool_version}): `{bad.kind}` — {bad.evidence}", ""]
    lines += ["### Environment", "",
              f"- SGLang: {facts.sglang or info.get('version') or _any_version(doc) or 'unknown'}",
              f"- torch: {facts.torch or 'unknown'}",
              f"- GPU: {facts.gpus and ', '.join(facts.gpus) or 'unknown'}",
              f"- driver: {facts.driver or 'unknown'}",
              (f"- model: `{doc.host.model_path}`; architectures: "
              f"{', '.join(facts.architectures or []) or 'unknown'}"), ""]
    lines += ["### Minimal reproducing command", ""]
    deployed = "python -m sglang.launch_server " + " ".join(shlex.quote(a) for a in prof.argv_masked)
    if bisect and bisect.command:
        good = bisect.good_spec
        origin = ("the baseline" if not good else
                  f"the good launch line given with `--good {good}`" if " " in str(good) or str(good).startswith("-")
                  else f"the `{good}` profile (`--good {good}`)")
        lines += [(f"Found by delta debugging over the flag differences from {origin} "
                  f"({len(bisect.tests)} test launches): the trigger is "
                  f"`{', '.join(bisect.minimal or [])}`."), ""]
        lines += [fence(bisect.command), "", "As deployed (the profile's launch line):", ""]
    lines += [fence(deployed), ""]
    if kind != CORRUPT:
        return _finish(lines + _failure_evidence(doc, prof, bad, samples, samples_path), doc, mitigation)
    lines += ["### Evidence", "", ("Same prompts and seeds against the server without speculation (baseline). "
              "Loops: repetition to the end of the output (corpus definition); p: one-sided Fisher exact, "
              "Holm-adjusted."), "", ("| profile | T | loops spec | loops baseline | p | accept len (non-loop) | "
              "tokens/s vs baseline (non-loop) |"), "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        for r in v.comparisons:
            acc = r.accept_length_nonloop or r.accept_length
            sr = r.speed_ratio_nonloop
            p = r.p_adjusted  # None at T = 0: greedy cells are judged by the lossless test, not by loops
            lines.append(f"| {v.profile} | {r.temperature:g} | {r.spec_loops}/{r.spec_n} | "
                         f"{r.base_loops}/{r.base_n} | {'–' if p is None else f'{p:.2g}'} | "
                         f"{'–' if acc is None else f'{acc:.2f}'} | {'–' if sr is None else f'{sr:.2f}x'} |")
    found = [t for t in (bad.lossless if bad else []) if t.evidence]
    if found:
        lines += ["", "Lossless evidence (speculative decoding must not change the output distribution: greedy output "
                  "token for token, logprobs as a prefill re-scoring gives them):", ""]
        lines += [f"- {t.name}: {t.evidence}" for t in found]
    excerpt = looping_excerpt(samples_path, profile) if profile else None
    if excerpt:
        lines += ["", "### Excerpt of a looping output", "", fence(excerpt)]
    quoted = quoted_sample(samples, profile, kind, doc) if profile else None
    if quoted is not None:
        lines += [""] + replay_section(quoted, doc, samples, port=_port(prof))
    return _finish(lines, doc, mitigation)


def _failure_evidence(doc: Summary, prof: ProfileRecord, bad: VerdictRecord, samples: list[Sample],
                      samples_path: Path) -> list[str]:
    """The Evidence of a server that failed while sampling: what it served, its fatal line and mtp-remote's
    reading, the log's last lines and the request in flight (or its last answered one) to replay."""
    crash, kind, profile = prof.crashed or CrashRecord(), bad.kind, bad.profile
    lines = ["### Evidence", "",
             (f"The server became ready and served {prof.n_requests} request(s), then failed while "
              f"sampling: `{kind}`. Its fatal line: {inline_code(crash.fatal_line or 'not logged')}. "
              f"mtp-remote's reading: {crash.hint or bad.evidence or 'see the log'}"), ""]
    tail = log_tail(samples_path.parent, profile) if profile else None
    if tail:
        lines += [f"Last {LOG_TAIL_LINES} lines of its log:", "", fence(tail), ""]
    quoted = quoted_sample(samples, profile, kind) if profile else None
    if quoted is not None:
        lines += replay_section(quoted, doc, samples, port=_port(prof))
    return lines


def _finish(lines: list[str], doc: Summary, mitigation: MitigationDoc | None) -> str:
    """The mitigation table and the footer after ``lines``; the whole body masked."""
    if mitigation and mitigation.rows:
        lines += ["", "### Mitigations tried", "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table_rows(mitigation)]
        if mitigation.recommendation:
            lines += ["", mitigation.recommendation.replace("**", "")]
        elif mitigation.best:
            lines += ["", f"Workaround: `{mitigation.best}` is loop-free (see the table for its speed cost)."]
    lines += ["", f"<sub>Generated by mtp-remote bug-report from run {doc.run_id}.</sub>"]
    return masker(doc)("\n".join(lines)) + "\n"


def write_bug_report(run_id: str, *, runs_dir: Path = Path("runs"), output: Path | None = None) -> tuple[Path, str]:
    """Write the issue body for ``run_id`` (a diagnose run, or a mitigation run started from one); returns the
    path and the text. Raises ConfigError when the run or its summary is missing, when the run did not complete
    (its cause named), or when no profile of it has a :func:`reportable` verdict (its verdicts named)."""
    if not is_name(run_id):
        raise ConfigError(f"{run_id!r} is not a run id", field="RUN_ID")
    run_dir = runs_dir / run_id
    own = _read(run_dir / "mitigation.json", MitigationDoc) or _read(run_dir / "bisect.json", BisectDoc)
    diag_id = own.from_run if own and own.from_run else run_id
    doc = _read(runs_dir / diag_id / "summary.json", Summary)
    if doc is None:
        raise ConfigError(f"no diagnose run {diag_id!r} in {runs_dir}/ (summary.json missing)"
                          + ("" if diag_id == run_id else f"; {run_id} was started from it"), field="RUN_ID")
    if not doc.completed:  # no verdict, no evidence: an issue body would be empty
        raise ConfigError(f"run {diag_id} {doc.status}: {doc.cause_line}; it has no verdict to report "
                          f"(a bug report needs a completed diagnose run with a spec-corrupts-output verdict)",
                          file=str(runs_dir / diag_id / "summary.json"))
    if not any(reportable(v.kind) for v in doc.verdicts):
        found = ", ".join(f"{v.profile}: {v.kind}" for v in doc.verdicts) or "none"
        raise ConfigError(f"run {diag_id} has no {CORRUPT}, crashed:<cause> or hung:<cause> verdict (verdicts: "
                          f"{found}); a bug report is written for a profile that corrupts output or whose server "
                          f"failed while sampling", file=str(runs_dir / diag_id / "summary.json"))
    mit, bis = related_runs(runs_dir, diag_id)
    text = render_bug_report(doc, runs_dir / diag_id / "samples.jsonl", mit, bis)
    path = output or (run_dir / "bug-report.md")
    path.write_text(text)
    return path, text
