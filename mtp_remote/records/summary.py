"""The run summary (``summary.json``, schema :data:`SCHEMA_VERSION`): one versioned document per run directory that
every report is rendered from, for a completed run (cells, verdicts, calibration, timing) and for one that could
not be done (``status`` ``failed``/``interrupted`` and its ``cause``).

Times are ISO-8601 UTC strings, durations seconds, rates in [0, 1]. Built by ``report.document`` (completed) and
``report.records`` (failed), with ``environment``, ``design`` and ``attach`` added by ``experiment.diagnose`` and
``fleet``/``regression`` by the nightly; read by ``report/``, ``runs/``, ``fleet/``, ``search/``. Fields are
declared in the order the writers write them, so a summary read and saved again is the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from .base import Number, Record

SCHEMA_VERSION = 1


class HostFacts(Record):
    """The host as the report header names it (``report.document.host_facts``): masked environment, faults
    injected on a simulated host (None on a real engine). A failed run's may hold only ``name``."""

    name: str | None = None
    transport: str | None = None
    engine: str | None = None
    simulated: bool | None = None
    address: str | None = None
    port: int | None = None
    model_path: str | None = None
    faults: str | None = None
    profile_faults: dict[str, str] | None = None
    env: dict[str, str] = Field(default_factory=dict)


class EngineFacts(Record):
    """What served the run, from the servers' own ``/server_info``: label, version, simulated?, model path."""

    label: str | None = None
    version: str | None = None
    simulated: bool | None = None
    model_path: str | None = None


class ProfileFlags(Record):
    """A playbook profile as the summary records it: its flags and whether it speculates."""

    flags: list[str] = Field(default_factory=list)
    speculative: bool = False


class PromptFacts(Record):
    """A playbook prompt as the summary records it (``config.playbook.Prompt``): id, text, expected answer."""

    id: str = ""
    text: str | None = None  # None for a prompt given as ``file`` or ``messages`` (kept as read)
    expected: str | None = None


class PlaybookFacts(Record):
    """The playbook as the run used it (a failed run's may hold only ``name`` and ``file``)."""

    name: str | None = None
    file: str | None = None
    baseline: str = "baseline"
    base_flags: list[str] = Field(default_factory=list)
    profiles: dict[str, ProfileFlags] = Field(default_factory=dict)
    prompts: list[PromptFacts] = Field(default_factory=list)
    temperatures: list[Number] = Field(default_factory=list)
    samples: int | None = None
    greedy_samples: int | None = None
    max_tokens: int | None = None
    api: str | None = None
    top_p: Number | None = None
    seed: int | None = None
    prompt_template: str | None = None
    alpha: Number | None = None
    margin: Number | None = None


class LaunchOutcome(Record):
    """The wait for ready of one launch (``serving.base`` Ready/Crashed/TimedOut as written): ``kind`` (ready,
    crashed, timed_out, skipped), seconds waited, the milestones seen, the classified cause, its hint, the fatal
    line and the log's tail."""

    kind: str | None = None
    profile: str | None = None
    elapsed_s: Number | None = None
    milestones: list[dict] | None = Field(default_factory=list)
    cause: str | None = None
    hint: str | None = None
    fatal_line: str | None = None
    log_tail: list[str] | None = Field(default_factory=list)


class CrashRecord(Record):
    """Why a server failed while sampling (a profile's ``crashed``): the classified cause, a hint, the fatal line."""

    cause: str | None = None
    hint: str | None = None
    fatal_line: str | None = None


class ProfileRecord(Record):
    """One profile's launch and sampling (``experiment.runner.ProfileRun`` as written): ``outcome`` the wait for
    ready, ``crashed`` a failure while sampling, ``server_info`` the server's own ``/server_info``, durations in
    seconds, ``occupancy`` the requests-in-flight meter, ``stopping`` the early-stopping decisions."""

    profile: str
    speculative: bool = False
    argv_masked: list[str] = Field(default_factory=list)
    outcome: LaunchOutcome | None = None
    launch_error: str | None = None
    cause: str | None = None
    hint: str | None = None
    stop: str | None = None
    gpu_release_s: Number | None = None
    ready_s: Number | None = None
    sampling_s: Number | None = None
    stop_s: Number | None = None
    wall_s: Number | None = None
    server_info: dict | None = Field(default_factory=dict)
    decode: list[dict] | None = Field(default_factory=list)
    n_requests: int = 0
    n_resumed: int = 0
    stopping: dict | None = Field(default_factory=dict)
    n_failed: int = 0
    occupancy: dict | None = Field(default_factory=dict)
    crashed: CrashRecord | None = None
    tunnel_channels: int | None = None
    ssh_drops: int = 0
    n_resent: int = 0
    reused_server: str | None = None
    loop_stops: int = 0
    idle_after_stops_s: Number | None = None
    attached: dict | None = None
    context: dict | None = Field(default_factory=dict)
    greedy_fallback: str | None = None
    launched: bool = False


class CellRecord(Record):
    """One (profile, temperature) cell (``analysis.cells.CellSummary`` as written): loops with their 95 % Wilson
    interval, acceptance and speed (all samples and non-looping ones), think-closed and length-finish rates."""

    profile: str
    temperature: Number
    speculative: bool = False
    n: int = 0
    n_errors: int = 0
    loops: int = 0
    loop_rate: Number = 0.0
    loop_ci: list[Number] = Field(default_factory=lambda: [0.0, 1.0])
    accept_length: Number | None = None
    accept_length_nonloop: Number | None = None
    tokens_per_s: Number | None = None
    tokens_per_s_nonloop: Number | None = None
    think_closed_rate: Number | None = None
    finish_length_rate: Number = 0.0
    mean_completion_tokens: Number = 0.0
    steps_per_s: Number | None = None
    mean_seq_rep_4: Number | None = None
    loop_onsets: list[int] = Field(default_factory=list)
    mean_kl_k3: Number | None = None
    near_loops: int = 0
    loop_stops: int = 0


class Comparison(Record):
    """One temperature's comparison of a speculative arm with the baseline (``analysis.verdict``'s rows, built
    there as this record): loop counts and rates with their 95 % intervals, speed ratios, acceptance, the loop
    test's p (adjusted over the family of ``family`` tests), the excess bound and its confidence, the samples
    that would decide; greedy divergence at T = 0 (``greedy_*``)."""

    temperature: Number | None = None
    spec_loops: int = 0
    spec_n: int = 0
    base_loops: int = 0
    base_n: int = 0
    spec_loop_rate: Number | None = None
    base_loop_rate: Number | None = None
    spec_loop_ci: list[Number] | None = None
    base_loop_ci: list[Number] | None = None
    spec_near_loops: int = 0
    base_near_loops: int = 0
    speed_ratio: Number | None = None
    speed_ratio_nonloop: Number | None = None
    accept_length: Number | None = None
    accept_length_nonloop: Number | None = None
    in_family: bool = False
    p_vs_base: Number | None = None  # with an A/A arm: the sequential p against the baseline ...
    p_vs_aa: Number | None = None  # ... and against its A/A relaunch; ``p`` is the larger (the A/A contrast)
    aa_loops: int | None = None  # the A/A arm's loops and samples at this temperature
    aa_n: int | None = None
    p: Number | None = None
    p_look: int | None = None
    bound: Number | None = None
    bound_look: int | None = None
    bound_confidence: Number | None = None
    samples_needed: int | None = None
    p_adjusted: Number | None = None
    greedy_pairs: int | None = None
    greedy_diverged: int | None = None
    greedy_near_tie_flips: int | None = None
    greedy_hard_flips: int | None = None
    greedy_spec_only_loops: int | None = None
    greedy_first_divergence: int | None = None
    greedy_min_lcs_ratio: Number | None = None
    greedy_bound: dict | None = None
    greedy_next: str | None = None  # a greedy-only plan's open gate: what closes it (the ``next:`` line)
    family: int | None = None  # the tests Holm adjusted together (T > 0 rows)


class LosslessTest(Record):
    """One lossless test of a verdict (``analysis.lossless``): name (greedy, answers, kl...), its p (after the
    family's adjustment) and raw p, whether the effect is large enough, the sentence of evidence (empty: no
    finding), its counts and whether it was judged."""

    name: str = ""
    p_value: Number | None = None
    raw_p: Number | None = None
    effect_ok: bool | None = None
    evidence: str | None = None
    counts: dict = Field(default_factory=dict)
    judged: bool | None = None


class VerdictRecord(Record):
    """One speculative profile's verdict (``analysis.verdict.Verdict.to_dict``): kind, one sentence of evidence,
    the deciding p-value and temperature, the comparisons per temperature, warnings, the KL probe and the
    lossless tests."""

    profile: str
    kind: str
    evidence: str | None = None
    p_value: Number | None = None
    temperature: Number | None = None
    comparisons: list[Comparison] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    kl_probe: dict | None = None
    lossless: list[LosslessTest] = Field(default_factory=list)


def aa_profile_name(baseline: str) -> str:
    """Name of the A/A arm that repeats profile ``baseline`` (``compare.calibration``): ``<baseline>-aa``."""
    return f"{baseline}-aa"


class Calibration(Record):
    """The A/A arm's measurements (``analysis.divergence.Calibration.to_dict``) and the arms they come from:
    ``profile`` (the A/A arm) and ``baseline`` (the arm it repeats)."""

    greedy_pairs: int | None = None
    greedy_diverged: int | None = None
    greedy_hard: int | None = None
    greedy_prompts: int | None = None
    greedy_hard_prompts: int | None = None
    aa_loops: dict | None = None
    near_tie_margin: Number | None = None
    kl_floor_mean: Number | None = None
    kl_floor_se: Number | None = None
    kl_floor_n: int | None = None
    speed_ratio: Number | None = None
    speed_spread: Number | None = None
    profile: str | None = None
    baseline: str | None = None


class Cause(Record):
    """Why a run could not be done: the error's one line, its type and the tail of its evidence."""

    message: str | None = None
    type: str | None = None
    evidence: str | None = None


class SamplingBudget(Record):
    """The fixed budget (profiles × temperatures × prompts × samples) against what early stopping used."""

    early_stop: bool | None = None
    budget: int | None = None
    used: int | None = None
    saved: int | None = None
    used_fraction: Number | None = None


class LoopStopTotals(Record):
    """Tokens generated and not generated (samples stopped at their settled loop), in all and per profile."""

    enabled: bool = False
    generated_tokens: int = 0
    tokens_saved: int = 0
    loop_stops: int = 0
    kl_probe_tokens: int = 0
    without_stop_at_most: int | None = None
    by_profile: dict[str, dict] = Field(default_factory=dict)


class TimeRow(Record):
    """One profile's time (seconds), or the run's total: launch until ready, sampling, the stop (and of it the
    GPU release), the tool's own; the total adds the command's and ``outside_profiles_s``."""

    profile: str | None = None
    wall_s: Number | None = None
    launch_ready_s: Number | None = None
    sampling_s: Number | None = None
    stop_s: Number | None = None
    gpu_release_s: Number | None = None
    tool_s: Number | None = None
    command_s: Number | None = None
    outside_profiles_s: Number | None = None


class TimeSplit(Record):
    """Where the run's time went: per profile and in total (:class:`TimeRow`)."""

    profiles: list[TimeRow] = Field(default_factory=list)
    total: TimeRow = Field(default_factory=TimeRow)


class Environment(Record):
    """The host's software and hardware (``remote.envfacts.EnvFacts``): SGLang and torch versions, GPU names,
    driver, the model's architectures, simulated?"""

    sglang: str | None = None
    torch: str | None = None
    gpus: list[str] | None = None
    driver: str | None = None
    architectures: list[str] | None = None
    simulated: bool | None = None


class DesignRecord(Record):
    """The sequential design as the run's first launch recorded it (``analysis.stopping.Design.to_dict`` plus
    ``first_rounds_by_t``), and in a summary the rounds sampled to and the looks reached."""

    first_rounds: int | None = None
    rounds: int | None = None
    resumes: int | None = None
    reserve: Number | None = None
    alpha: Number | None = None
    margin: Number | None = None
    greedy_margin: Number | None = None
    spending: str | None = None
    sequential: bool | None = None
    family: int | None = None
    looks: list[int] | None = None
    alpha_per_look: dict | None = None  # {look: alpha} (keys strings once read back)
    bound_alpha_per_stage: dict | None = None  # {stage end: alpha}
    first_rounds_by_t: dict | None = None  # {temperature: rounds}
    looks_reached: list[int] | None = None


class FleetTag(Record):
    """Set by a fleet nightly on each host's summary: the inventory group and the fleet run's id."""

    group: str | None = None
    fleet_id: str | None = None


class RegressionCheck(Record):
    """One tested quantity of the nightly regression check (``regression.check_regressions``): ``kind``
    (``loop_rate``: tonight's loops ``run``/``n`` vs ``history_loops``/``history_n``, the cell pooled over its
    ``history_runs`` earlier good runs; ``speed``: the speculative cell's tokens/s over the baseline's tonight
    (``ratio``) against the ``history_runs`` earlier good runs' mean and sd; ``launch``: launched before, failed
    tonight), the cell (``profile``, ``temperature``), ``p``/``p_adjusted`` (Holm over the night's tests of that
    kind, each p doubled: the two kinds share the night's level), ``regressed`` and a ``note``. Written by
    :mod:`mtp_remote.fleet.regression` with the fields of its kind, in this order; read back from
    ``summary.json``'s ``regression``."""

    kind: str = ""
    profile: str = ""
    temperature: Number | None = None
    run: int | None = None
    n: int | None = None
    history_loops: int | None = None
    history_n: int | None = None
    history_rho: Number | None = None
    ratio: Number | None = None
    tokens_per_s: Number | None = None
    history_runs: int | None = None
    history_mean: Number | None = None
    history_sd: Number | None = None
    p: Number | None = None
    p_adjusted: Number | None = None
    regressed: bool = False
    note: str | None = None

    def label(self) -> str:
        """``mtp T=0.7 (loop_rate)``: the cell and the kind."""
        t = "" if self.temperature is None else f" T={self.temperature:g}"
        return f"{self.profile}{t} ({self.kind})"


class Regression(Record):
    """The nightly regression check against the earlier good runs (``fleet.regression``): the newest one's run
    id (None: no earlier good run), the month's level and tonight's, the checks and the labels of those that regressed."""

    baseline_run: str | None = None
    alpha: Number | None = None
    night_alpha: Number | None = None
    checks: list[RegressionCheck] = Field(default_factory=list)
    regressed: list[str] = Field(default_factory=list)


class Summary(Record):
    """``summary.json``. A completed run fills every field; a failed or interrupted one has the header, its
    ``cause``, ``n_samples`` and ``resume`` (the command that continues it) and empty profiles, cells and
    verdicts."""

    schema_version: int = SCHEMA_VERSION
    kind: str | None = None  # a fleet nightly's summary says ``nightly-fleet``; a host's run has none
    tool: str = "mtp-remote"
    tool_version: str | None = None
    run_id: str | None = None
    status: str = "completed"
    cause: Cause | str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: Number | None = None
    host: HostFacts = Field(default_factory=HostFacts)
    engine: EngineFacts | None = None
    simulated: bool | None = None
    playbook: PlaybookFacts = Field(default_factory=PlaybookFacts)
    profiles: list[ProfileRecord] = Field(default_factory=list)
    cells: list[CellRecord] = Field(default_factory=list)
    verdicts: list[VerdictRecord] = Field(default_factory=list)
    calibration: Calibration | None = None
    n_samples: int = 0
    resume: str | None = None
    sampling: SamplingBudget | None = None
    generated_tokens: int | None = None
    tokens_saved: int | None = None
    kl_probe_tokens: int | None = None
    loop_stop: LoopStopTotals | None = None
    time_split: TimeSplit | None = None
    exit_code: int | None = None
    files: dict[str, str] = Field(default_factory=dict)
    environment: Environment | None = None
    design: DesignRecord | None = None
    attach: list[str] | None = None
    fleet: FleetTag | None = None
    regression: Regression | None = None

    @property
    def completed(self) -> bool:
        """The run ran to its verdicts (``status`` completed; documents before ``status`` existed count)."""
        return self.status == "completed"

    @property
    def cause_line(self) -> str | None:
        """The one-line cause of a run that did not complete (None for a completed one)."""
        return self.cause.message if isinstance(self.cause, Cause) else self.cause

    def profile(self, name: str | None) -> ProfileRecord | None:
        """The profile record named ``name`` (None: not in this run)."""
        return next((p for p in self.profiles if p.profile == name), None)

    def verdict(self, profile: str | None) -> VerdictRecord | None:
        """The verdict of ``profile`` (None: not judged in this run)."""
        return next((v for v in self.verdicts if v.profile == profile), None)

    def cells_by_key(self) -> dict[tuple[str, float], CellRecord]:
        """``{(profile, temperature): cell}`` in the document's order."""
        return {(c.profile, float(c.temperature)): c for c in self.cells}

    def to_json(self) -> str:
        """The file's text (indented, one trailing newline); values JSON does not know are written as strings."""
        return json.dumps(self.to_dict(), indent=2, default=str) + "\n"

    def save(self, run_dir: Path) -> Path:
        """Write ``run_dir/summary.json``; returns its path."""
        path = run_dir / "summary.json"
        path.write_text(self.to_json())
        return path
