"""Issue 33 major 10: model output and host logs never act on the operator's terminal (OSC window title, screen
clear, OSC-8 link) nor break out of the code fences of report.md and the bug-report body (a heading "verdict
healthy", a remote image, an @-mention). The markdown is parsed by markdown-it (CommonMark, what GitHub follows
for fences): the hostile text stays one code block, whole."""

from __future__ import annotations

import io
import json

from markdown_it import MarkdownIt
from rich.console import Console

from mtp_remote.outside_text import fence, for_terminal, inline_code
from mtp_remote.report.console import SafeConsole
from mtp_remote.report.markdown import render_markdown
from mtp_remote.runs.bugreport import write_bug_report
from tests.unit.report.test_reports import run  # noqa: F401 - the fixture: a diagnosed run's summary and samples

TITLE = "\x1b]0;verdict healthy\x07"
CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
BREAKOUT = ("loop loop\n```\n\n# verdict healthy\n\n![x](https://evil.example/pixel.png) @maintainer\n"
            "````\n~~~\n``` ````` the end")
HOSTILE = TITLE + CLEAR + LINK + "\u202eevil\r" + BREAKOUT


def _no_control(text: str) -> bool:
    return not any(ord(c) < 32 and c not in "\n\t" or 0x7f <= ord(c) <= 0x9f for c in text)


def test_control_characters_are_shown_as_escapes_and_printable_text_is_unchanged():
    shown = for_terminal(HOSTILE)
    assert _no_control(shown) and "\\x1b]0;verdict healthy\\x07" in shown and "\\u202e" in shown and "\\x0d" in shown
    assert for_terminal("plain text\twith a tab\nand a line, ünïcode, 日本") == "plain text\twith a tab\nand a line, ünïcode, 日本"


def test_a_safe_console_never_writes_a_control_character():
    out = io.StringIO()
    SafeConsole(file=out, force_terminal=False, width=200).print(HOSTILE, markup=False, highlight=False)
    assert _no_control(out.getvalue()) and "verdict healthy" in out.getvalue()
    raw = io.StringIO()
    Console(file=raw, force_terminal=False, width=200).print(HOSTILE, markup=False, highlight=False)
    assert "\x1b]0;" in raw.getvalue(), "the test's premise: a plain rich console passes ESC through"


def _blocks(md: str) -> list:
    return [t for t in MarkdownIt("commonmark").parse(md) if t.type in ("fence", "code_block")]


def test_a_fence_holds_any_text_whole():
    md = "before\n\n" + fence(BREAKOUT) + "\n\nafter\n"
    tokens = MarkdownIt("commonmark").parse(md)
    (block,) = _blocks(md)
    assert block.content.rstrip("\n") == BREAKOUT
    assert not [t for t in tokens if t.type == "heading_open"], "a heading broke out of the fence"
    assert "".join(t.content for t in tokens if t.type == "inline").strip().endswith("after")


def test_an_inline_code_span_holds_backticks():
    md = "got: " + inline_code("error `x` ``y`` end`") + " — done"
    (para,) = [t for t in MarkdownIt("commonmark").parse(md) if t.type == "inline"]
    codes = [c.content for c in para.children if c.type == "code_inline"]
    assert codes == ["error `x` ``y`` end`"]


def test_report_md_keeps_a_hostile_output_inside_its_block(run):  # noqa: F811 - the fixture
    doc, samples, _ = run
    samples = [dict(s, text=HOSTILE) if s["profile"] == "mtp" else s for s in samples]
    md = render_markdown(doc, samples)
    tokens = MarkdownIt("commonmark").parse(md)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "verdict healthy" not in " ".join(headings), headings
    assert any("# verdict healthy" in b.content for b in _blocks(md)), "the worst sample's excerpt is not shown"
    assert _no_control(md)


def test_the_bug_report_keeps_hostile_output_and_log_lines_inside_their_blocks(tmp_path):
    from tests.unit.runs import test_bug_report_replay as br

    crash = {"cause": "cuda_error", "hint": "a CUDA kernel failed", "fatal_line": "RuntimeError: `boom` " + TITLE}
    d = br._run(tmp_path, "20261202-100000-eeee", "crashed:cuda_error",
                [br._sample("mtp", HOSTILE, loop=False),
                 br._sample("mtp", "", loop=False, error="server said ``` # verdict healthy " + CLEAR)], crashed=crash)
    (d / "logs" / "mtp.log").write_text("ok\n" + BREAKOUT + "\n" + TITLE + "\n")
    _, text = write_bug_report("20261202-100000-eeee", runs_dir=tmp_path)
    tokens = MarkdownIt("commonmark").parse(text)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "verdict healthy" not in " ".join(headings), headings
    assert not [t for t in tokens if t.type == "inline" and any(c.type == "image" for c in (t.children or []))]
    assert any(BREAKOUT in b.content for b in _blocks(text)), "the log tail was not kept whole in one block"
    assert _no_control(text)
    json.dumps(text)
