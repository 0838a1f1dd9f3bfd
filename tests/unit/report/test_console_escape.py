"""Host-supplied text (a foreign argv, a lock line, a path) may hold rich markup: it is printed literally."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mtp_remote.host.ops import StatusReport, StopCommandResult
from mtp_remote.host.preflight import Check
from mtp_remote.remote.foreign import ForeignProcess
from mtp_remote.remote.process import StopResult
from mtp_remote.report.console import RichHooks, checks_table, print_stop, status_table

EVIL = "python -m sglang.launch_server [/] [bold red]x[/bold red] [link=file:///etc]y"


def _render(*things) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=400, color_system=None)
    for t in things:
        con.print(t)
    return buf.getvalue()


def test_markup_in_foreign_argv_paths_and_details_is_printed_literally():
    f = ForeignProcess(pid=7, ppid=1, pgid=7, user="[/]", age_s=1, gpu_mib=0, kind="server", args=EVIL)
    st = StatusReport(host="h", server={"pid": 1, "profile": "p", "port": 1, "run_id": "r", "log_path": "/w/[/]x.log"},
                      server_state="running", port_in_use=False, foreign=[f])
    out = _render(status_table(st), checks_table("h", [Check("lock", "warn", "held by [/] [bold]me[/bold]")]))
    assert EVIL in out and "/w/[/]x.log" in out and "held by [/] [bold]me[/bold]" in out
    buf = io.StringIO()
    con = Console(file=buf, width=400, color_system=None)
    print_stop(con, StopCommandResult(StopResult(pid=0, found="gone", reason="[/]gone.log"), [f]))
    RichHooks(con).on_progress("taking over a stale lock ([/]x, 1 s old)")
    assert "([/]gone.log)" in buf.getvalue() and "[/]x" in buf.getvalue() and "user [/]" in buf.getvalue()


@pytest.mark.parametrize("kind,runbook", [
    ("launch-failed:cuda_oom", "docs/runbooks/server-will-not-start.md"),
    ("crashed:scheduler_died", "docs/runbooks/server-crashed-while-sampling.md"),
    ("hung:stalled", "docs/runbooks/server-crashed-while-sampling.md"),
])
def test_the_next_step_after_a_failed_profile_names_the_runbook_for_when_it_failed(kind, runbook):
    from pathlib import Path

    from mtp_remote.report.next_step import next_step

    doc = {"run_id": "r1", "status": "completed", "verdicts": [{"profile": "mtp", "kind": kind}]}
    hint = next_step(doc, "runs/r1")
    report = {"launch-failed": "",
              "crashed": "; a server that fails while serving is a bug worth reporting: `mtp-remote bug-report r1`",
              # a hang may be the host's load (issue 30): not sent upstream before that is ruled out
              "hung": "; a hang may be the host's load, not SGLang (the evidence says what was in flight): check "
                      "the host's load average (`uptime`), run again on a quiet host or raise `timeouts.stall_s`; "
                      "only a hang on a quiet host goes upstream: `mtp-remote bug-report r1`"}[kind.split(":")[0]]
    assert hint == f"mtp failed: `mtp-remote classify-log runs/r1/logs/mtp.log`{report}; see {runbook}"
    assert (Path(__file__).resolve().parents[3] / runbook).is_file()
