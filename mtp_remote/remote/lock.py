"""The host lock's commands: a stale lock taken over by compare-and-swap, and our lock released.

The lock (``<workdir>/lock``: owner, run id, epoch seconds, the driver's PID, its instance —
:mod:`.lockbeat`) is created by ``workdir.sh`` in the
step that checks the workdir (:mod:`.hostscripts`); who holds it and whether it is stale is judged by the
caller (:meth:`~mtp_remote.serving.process.ProcessServer.acquire_lock`). Here is what runs on the host.
"""

from __future__ import annotations

import shlex

from . import hostscripts

#: Replace the lock only if it still holds the line we judged stale, under a mkdir mutex (a mutex left by a
#: crashed contender is broken after 60 s). stdin: the sha256 of the line seen (its bytes: a line that is not
#: UTF-8 is compared as it is), then ours. Prints "acquired", or "held", the current line's sha256 and the line, or
#: "gone" when the lock was released meanwhile (it is then taken as a new one, not judged as an empty line).
_LOCK_TAKEOVER = (
    'umask 077; IFS= read -r seen; IFS= read -r mine; m="$1.takeover"; n=0; '
    'line() { head -c 512 "$1" 2>/dev/null | head -n 1; }; '
    'held() { [ -e "$1" ] || { echo gone; return; }; l=$(line "$1"); echo held; h=$(printf "%s\\n" "$l" | sha256sum); echo "${h%% *}"; printf "%s\\n" "$l"; }; '
    'until mkdir "$m" 2>/dev/null; do n=$((n + 1)); '
    '  if [ $n -ge 100 ]; then if [ -n "$(find "$m" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then rmdir "$m"; n=0; '
    '    else held "$1"; exit 0; fi; fi; sleep 0.05 2>/dev/null || sleep 1; done; '
    'cur=$(line "$1"); cur=$(printf "%s\\n" "$cur" | sha256sum); cur=${cur%% *}; '
    'if [ ! -e "$1" ] || [ "$cur" = "$seen" ]; then rm -f "$1.new.$$"; (set -C; printf "%s\\n" "$mine" > "$1.new.$$") 2>/dev/null '
    '&& mv -f "$1.new.$$" "$1" && echo acquired || { rm -f "$1.new.$$"; held "$1"; }; '
    'else held "$1"; fi; rmdir "$m"')


def take_over(c, path: str, seen_sha: str, mine: str) -> str:
    """Replace the lock at ``path`` by the line ``mine`` if its line still hashes to ``seen_sha`` (sha256 of its
    bytes, as ``workdir.sh`` reports it: ``holder-sha``): "acquired", or "held", the sha256 of the line it holds
    now and that line (its next two lines), or "gone" (its holder released it meanwhile)."""
    return c.run(f"sh -c {shlex.quote(_LOCK_TAKEOVER)} sh {shlex.quote(path)}", hide=True, warn=True,
                 in_stream=hostscripts.WholeStdin(f"{seen_sha}\n{mine}\n")).stdout


def release(c, workdir: str, run_id: str) -> None:
    """Remove ``<workdir>/lock`` if run ``run_id`` holds it."""
    path = shlex.quote(f"{workdir}/lock")
    c.run(f"grep -q {shlex.quote(' ' + run_id + ' ')} {path} 2>/dev/null && rm -f {path}", hide=True, warn=True,
          in_stream=False)
