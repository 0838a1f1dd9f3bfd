"""Issue 33 minor: the leaderless-group rule took any process titled ``sglang::…`` for one of our server's
children — a stranger's process (another unix user, ``mtp-other``) that set that title inside the process group
number our dead leader left was signalled. A title is now ours only on a process that runs as us. Local transport
(``stop.sh`` as over SSH); skipped when not root (a second user is needed)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.remote import process
from tests.support.other_user import OtherUser, other_user


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    try:
        return _stat(pid)[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_strangers_process_titled_like_an_sglang_child_is_never_signalled(tmp_path):
    alice = other_user()
    if not isinstance(alice, OtherUser):
        pytest.skip(alice)
    title = "import os; os.execvp('sleep', ['sglang::scheduler_TP0', '313'])"
    script = (f"sleep 314 >/dev/null 2>&1 </dev/null & echo $!; "
              f"setpriv --reuid={alice.uid} --regid={alice.gid} --clear-groups {sys.executable} -c \"{title}\" "
              f">/dev/null 2>&1 </dev/null & echo $!; echo $$")
    out = subprocess.run(["setsid", "sh", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    ours, hers, pgid = (int(x) for x in out)
    try:
        deadline = time.monotonic() + 5
        while (_alive(pgid) or Path(f"/proc/{hers}/cmdline").read_bytes()[:8] != b"sglang::") \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        assert Path(f"/proc/{hers}/status").read_text().count(f"\t{alice.uid}\t") >= 1
        wd = tmp_path / "wd"
        wd.mkdir(mode=0o700)
        sha = hashlib.sha256(Path(f"/proc/{ours}/cmdline").read_bytes()).hexdigest()
        start = min(int(_stat(ours)[19]), int(_stat(hers)[19])) - 1
        process.write_record(Context(), str(wd), process.ServerRecord(
            pid=pgid, pgid=pgid, start_ticks=start, cmdline=["sleep", "314"], profile="p", port=1,
            log_path="/nonexistent.log", run_id="r", started_at=0.0, cmdline_sha256=sha,
            boot_id=Path("/proc/sys/kernel/random/boot_id").read_text().strip()))
        res = process.stop_server(Context(), str(wd), "", term_s=2, kill_s=2, gpu_release_s=2)
        assert res.found == "group-only" and res.members == [ours] and res.strangers == [hers], res.describe()
        assert _alive(hers), "another user's process titled sglang::scheduler_TP0 was signalled"
        assert not _alive(ours)
    finally:
        for pid in (ours, hers):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
