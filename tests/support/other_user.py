"""A second real unix user for the tests that play "another user on the host" (a shared workdir, a stranger's
process): ``mtp-other``, created with ``useradd`` when missing (a system user: no home, no login shell). Only
root can create it or act as it, so :func:`other_user` skips with the reason otherwise. The user is left on the
machine (tests running at the same time may use it); nothing else of it is made outside the tests' directories.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass

NAME = "mtp-other"


@dataclass(frozen=True)
class OtherUser:
    name: str
    uid: int
    gid: int

    def run(self, script: str, *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """``sh -c script`` as this user (its uid and gid, no supplementary groups); stdout and stderr as text."""
        return subprocess.run(["sh", "-c", script], user=self.uid, group=self.gid, extra_groups=[],
                              capture_output=True, text=True, check=check, timeout=timeout, cwd="/")

    def popen(self, script: str) -> subprocess.Popen:
        """``sh -c script`` started as this user, in its own session (so a test can signal its group)."""
        return subprocess.Popen(["sh", "-c", script], user=self.uid, group=self.gid, extra_groups=[],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
                                start_new_session=True)


def other_user() -> OtherUser | None | str:
    """The second user, or the reason there is none (a string): not root, or no ``useradd``."""
    if os.geteuid() != 0:
        return "not root: a second unix user cannot be created or acted as"
    try:
        pw = pwd.getpwnam(NAME)
    except KeyError:
        if shutil.which("useradd") is None:
            return "no useradd on this machine"
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
                           capture_output=True, text=True)
        if r.returncode not in (0, 9):  # 9: created meanwhile by a test running at the same time
            return f"useradd {NAME} failed: {r.stderr.strip()}"
        pw = pwd.getpwnam(NAME)
    return OtherUser(NAME, pw.pw_uid, pw.pw_gid)
