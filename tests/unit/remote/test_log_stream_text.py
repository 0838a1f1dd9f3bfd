"""LogStream keeps the log text it received: all of it up to MAX_TEXT, then the last MAX_TEXT characters
(``complete`` False), without rebuilding one string per chunk."""

from __future__ import annotations

import codecs

import pytest

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


@pytest.mark.parametrize("encoder", [["base64"], ["od", "-An", "-v", "-tx1"]])
def test_a_polls_log_bytes_decode_the_same_from_base64_and_from_ods_hex(encoder):
    """The poll sends its log chunk as base64, or as POSIX od's hex on a host without base64; both give the
    log's bytes back, a bad byte counted as one byte and a cut character left for the next poll."""
    import subprocess

    from mtp_remote.remote.logfile import parse_poll

    data = b"ok \xff caf\xc3\xa9 \xe2\x80\x94 end \xe2\x80"
    enc = subprocess.run(encoder, input=data, capture_output=True, check=True).stdout.decode()
    tag = "b64" if encoder[0] == "base64" else "hex"
    stat = "123 (python) S 1 123 123 0 -1"
    polled = parse_poll(f"{stat}\n--log--\n{tag}\n{enc}")
    assert polled.alive and polled.nbytes == len(data) - 2
    assert polled.text == "ok \ufffd caf\u00e9 \u2014 end "
    gone = parse_poll(f"\n--log--\n{tag}\n{enc}")
    assert not gone.alive and gone.nbytes == len(data) and gone.text.endswith("end \ufffd")
