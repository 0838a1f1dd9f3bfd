"""LogStream keeps the log text it received: all of it up to MAX_TEXT, then the last MAX_TEXT characters
(``complete`` False), without rebuilding one string per chunk."""

from __future__ import annotations

import codecs

from mtp_remote.remote import follow


class _Done:
    runner = None


def _stream() -> follow.LogStream:
    s = follow.LogStream.__new__(follow.LogStream)  # no command: the sinks are fed by hand
    s._sink, s._err, s._err_text, s._tail_pid, s._head = follow._Sink(), follow._Sink(), "", None, ""
    s._chunks, s._nchars, s.nbytes, s.offset = [], 0, 0, 0
    s._utf8, s._joined = codecs.getincrementaldecoder("utf-8")("replace"), False
    s.supported = s.complete = True
    s.children, s._promise = None, _Done()
    return s


def test_the_first_line_is_the_tail_pid_and_the_rest_is_the_log_verbatim():
    s = _stream()
    s._sink.write("4242\nfirst line\nsecond, no newline yet")
    assert s.read(0) == "first line\nsecond, no newline yet"
    s._sink.write(" — done é\n".encode().decode("latin-1"))  # the command runs with encoding latin-1: one char a byte
    s.read(0)
    assert s._tail_pid == 4242
    assert s.text == "first line\nsecond, no newline yet — done é\n"
    assert s.nbytes == len(s.text.encode()) and s.complete


def test_past_the_cap_the_text_is_the_last_max_text_characters(monkeypatch):
    monkeypatch.setattr(follow, "MAX_TEXT", 1000)
    s = _stream()
    s._sink.write("1\n")
    s.read(0)
    lines = [f"line {i:05d}\n" for i in range(400)]  # 4,400 characters
    for ln in lines:
        s._sink.write(ln)
        s.read(0)
    assert s.text == "".join(lines)[-1000:] and not s.complete
    assert s.nbytes == 4400


def test_children_reported_on_stderr_are_parsed_once_complete():
    s = _stream()
    s._err.write("children child 11 500\nchildren chi")
    s.read(0)
    assert s.children is None
    s._err.write("ld 12 501\nchildren result ok\n")
    s.read(0)
    assert s.children == [[11, 500], [12, 501]]
