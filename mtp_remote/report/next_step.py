"""The ``next:`` line a run ends with (terminal, report.html, a fleet's per-host lines): one sentence with the
command or runbook to use next, from the run's summary. Every command in it runs as printed: it names the host,
the ``-i``/``-p`` the run was given, and ``--runs-dir`` when the run is not where the command looks by default
(``tests/integration/test_printed_commands.py`` runs them). Pure: a summary document in, text out.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ..config.paths import DEFAULT_PLAYBOOK, default_runs_dir
from ..records.summary import DesignRecord, Summary


#: Runbook for each kind of ending (docs/runbooks/).
RUNBOOK = {"corrupt": "docs/runbooks/mtp-output-looping.md", "launch": "docs/runbooks/server-will-not-start.md",
           "crashed": "docs/runbooks/server-crashed-while-sampling.md",
           "failed": "docs/runbooks/nightly-run-failed.md"}


def inventory_option(inventory=None) -> str:
    """`` -i INVENTORY`` (shell-quoted) for a printed command when the inventory was given on the command line,
    else '' (the command then finds the same inventory as the run did)."""
    return f" -i {shlex.quote(str(inventory))}" if inventory else ""


def _same_files(doc: Summary, inventory=None) -> str:
    """The options that make a printed command read what this run read: ``-i`` for an inventory given on the
    command line, ``-p`` for a playbook other than the default (a resume or mitigate with another playbook is
    refused as a different experiment)."""
    opts = inventory_option(inventory)
    file = doc.playbook.file
    if file and str(file) != DEFAULT_PLAYBOOK:
        opts += f" -p {shlex.quote(str(file))}"
    return opts


def runs_dir_option(run_dir) -> str:
    """`` --runs-dir DIR`` (shell-quoted) for a printed command that names this run by its id, when the run's
    directory is not where that command looks by default (:func:`~mtp_remote.config.paths.default_runs_dir`),
    else ''. Without it ``mitigate --from RUN``, ``bug-report RUN`` or ``compare`` after a run with
    ``--runs-dir elsewhere`` said "no run RUN"."""
    if run_dir is None:
        return ""
    runs = Path(run_dir).parent
    try:
        same = runs.resolve() == default_runs_dir().resolve()
    except OSError:
        same = False
    return "" if same else f" --runs-dir {shlex.quote(str(runs))}"


def next_step(doc: Summary | dict, run_dir, *, inventory=None) -> str:
    """What to do next after a run, from its summary: one sentence with the command or runbook to use; every
    command in it runs as printed (the host, the ``-i``/``-p`` the run was given, and ``--runs-dir`` when the
    run is not where the command looks by default). ``inventory``: the ``-i`` the run was given."""
    doc = Summary.of(doc)
    kinds = {v.profile: v.kind for v in doc.verdicts}
    run = doc.run_id
    rd = runs_dir_option(run_dir)
    if not doc.completed:
        if doc.resume:
            return f"fix the cause, then continue: {doc.resume}"
        return f"fix the cause and run again (nothing to resume); see {RUNBOOK['failed']}"
    corrupt = [p for p, k in kinds.items() if k == "spec-corrupts-output"]
    failed = [p for p, k in kinds.items() if k.startswith(("launch-failed", "crashed", "hung"))]
    if failed:
        return _failed_step(doc, kinds, failed, run_dir, rd)
    # -H: without it, mitigate and --resume act on the inventory's default host, not the one this run was on
    host = doc.host.name
    on = (f" -H {host}" if host else "") + _same_files(doc, inventory)
    if doc.attach:  # attached endpoints: the same --attach, no host; nothing of theirs can be relaunched
        on = "".join(f" --attach {shlex.quote(a)}" for a in doc.attach) + _same_files(doc, inventory)
        if corrupt:
            return (f"an attached speculative endpoint corrupts output: take it out of rotation or serve it without "
                    f"speculation; report it upstream with `mtp-remote bug-report {run}{rd}` (mitigate needs "
                    f"launches: run it on a host of the inventory); see docs/runbooks/loops-confirmed.md")
    if corrupt:
        return (f"find the cheapest cure: `mtp-remote mitigate --from {run}{on}{rd}` (then `bisect`, "
                f"`bug-report {run}{rd}`); see docs/runbooks/loops-confirmed.md")
    if "inconclusive" in kinds.values():
        return _inconclusive_step(doc, run, on, rd)
    return f"nothing to fix; compare with an earlier run: `mtp-remote compare RUN {run}{rd}`"


def _failed_step(doc: Summary, kinds: dict, failed: list[str], run_dir, rd: str) -> str:
    """The next step when a profile failed: its log classified, and for a server that failed while serving a
    bug report -- except a hang with requests in flight on a loaded host, which is the host's load to look at
    before anything goes upstream."""
    run = doc.run_id
    first = kinds[failed[0]]
    runbook = RUNBOOK["launch"] if first.startswith("launch-failed") else RUNBOOK["crashed"]
    if first.startswith("launch-failed"):
        report = ""
    elif first.startswith("hung"):
        report = ("; a hang may be the host's load, not SGLang (the evidence says what was in flight): check the "
                  "host's load average (`uptime`), run again on a quiet host or raise `timeouts.stall_s`; only a "
                  f"hang on a quiet host goes upstream: `mtp-remote bug-report {run}{rd}`")
    else:
        report = f"; a server that fails while serving is a bug worth reporting: `mtp-remote bug-report {run}{rd}`"
    return (f"{', '.join(failed)} failed: `mtp-remote classify-log {run_dir}/logs/{failed[0]}.log`{report}; "
            f"see {runbook}")


def _inconclusive_step(doc: Summary, run, on: str, rd: str) -> str:
    """The next step of an inconclusive run: what closes a greedy-only plan's open gate (the verdict's
    ``greedy_next``: how many distinct identical prompts), always a number of samples, or (a greedy-only playbook,
    whose samples repeat themselves and cannot bound a loop rate) a playbook with a temperature above 0."""
    pb = doc.playbook
    open_rows = [c for v in doc.verdicts if v.kind == "inconclusive" for c in v.comparisons]
    need = [c.samples_needed for c in open_rows if c.samples_needed]
    greedy = [c.greedy_next for c in open_rows if c.greedy_next]
    if greedy and not need:  # a greedy-only plan's open gate: more samples of the same prompts change nothing
        return f"{greedy[0]}, then run again: `mtp-remote diagnose{on}`"
    temps = [float(t) for t in pb.temperatures or []]
    if temps and not any(t > 0 for t in temps):
        return ("greedy samples (T = 0) repeat the same output, so more of them cannot bound a loop rate: add a "
                "temperature above 0 to the playbook (`temperatures: [0.0, 0.7]`, as in "
                f"{DEFAULT_PLAYBOOK}) and run again, or run that playbook: "
                f"`mtp-remote diagnose{_without_playbook(on)} -p {DEFAULT_PLAYBOOK}`")
    prompts = len(pb.prompts or [])
    design = doc.design or DesignRecord()
    first = design.first_rounds
    stages = [first * 2 ** s for s in range(int(design.resumes or 0) + 1)] if first else []
    later = [j for j in stages if j > int(design.rounds or first or 0)]
    now = int(design.rounds or pb.samples or 1)
    if design and not later:
        return (f"this run's design has no look left (compare.resumes, fixed at its first run): start a new run "
                f"with twice the samples: `mtp-remote diagnose{on} --samples {2 * now}`")
    if need and prompts:  # --samples is per prompt at T > 0; the evidence counts samples per arm
        want = -(-max(need) // prompts)
        per = next((j for j in later if j >= want), later[-1]) if later else want
        look = " (the design's next look that gets there)" if later and per >= want else \
            " (the design's last look)" if later else ""
        return (f"add samples: `mtp-remote diagnose --resume {run}{on}{rd} --samples {per}`{look} ({per} per prompt "
                f"x {prompts} prompts = {per * prompts} per arm at each T > 0; the evidence asks for about "
                f"{max(need)})")
    per = later[0] if later else 2 * now
    look = " (the design's next look)" if later else " (twice this run's)"
    return (f"add samples: `mtp-remote diagnose --resume {run}{on}{rd} --samples {per}`{look}; the evidence gives no "
            f"count of its own, so the next look is the step")


def _without_playbook(on: str) -> str:
    """``on`` without its ``-p FILE`` (the command names another playbook)."""
    words = shlex.split(on)
    if "-p" in words:
        i = words.index("-p")
        del words[i:i + 2]
    return "".join(f" {shlex.quote(w)}" for w in words)
