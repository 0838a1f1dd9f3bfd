# workdir.sh — find (and with MODE create, make) the directory this tool works in on the host (POSIX sh; lib.sh
# is prepended).
#
# usage: sh -c "$(cat lib.sh workdir.sh)" sh WORKDIR MODE [RUN_ID [lock]]
# WORKDIR as configured ("~" allowed). Every directory on its path must be one only root or we can change (owned
# by root or us; writable by others only with the sticky bit), and a symlink on it root's or ours: else it is
# refused ("not-private"), never followed. A private one (ours, no one else may write it, not a symlink) is used as
# it is; in a shared one (root's with mode 1777, or ours with the sticky bit) we work in WORKDIR/uid-UID, a directory of
# our own (0700), checked each time: a planted file, symlink or directory there is refused, never followed.
# MODE create: make what is missing (new directories 0700; an existing WORKDIR keeps its mode) with
# logs/RUN_ID, and check the directory takes a write (the test file is made with noclobber and removed, also
# when the write fails: a full disk leaves nothing). MODE read: create nothing.
# With "lock" as 4th argument (MODE create), the host lock is taken in the same step (see the end).
# stdout: "workdir PATH" (the directory we work in), then "result ok", "result missing" (read: nothing there
# yet), "result not-private TEXT", "result cannot-create" or "result not-writable".
set -u
need find head id ls mkdir rm
umask 077
# the configured path first: a directory on it (or a symlink) another user could rename or replace is refused
# before anything is read or made there (what we check must be what we then use)
if bad=$(untrusted_prefix "$(expand_home "$1")"); then
  say "workdir $(expand_home "$1")"
  say "result not-private $bad can be changed by another user, who could rename or replace our directory in it: use a directory of yours, or a shared one of root's with the sticky bit (mode 1777)"
  exit 0
fi
wd=$(workdir_of "$1")
say "workdir $wd"
if [ "$2" = read ]; then
  [ -e "$wd" ] || { say "result missing"; exit 0; }
  held_dir "$wd" || { say "result not-private $wd is not a directory of ours that only we can write"; exit 0; }
  say "result ok"; exit 0
fi
mkdir -p "$wd" 2>/dev/null
held_dir "$wd" || {
  if [ -e "$wd" ] || [ -L "$wd" ]; then say "result not-private $wd is not a directory of ours that only we can write"
  else say "result cannot-create"; fi
  exit 0; }
for d in logs "logs/$3"; do
  mkdir "$wd/$d" 2>/dev/null
  private_dir "$wd/$d" || {
    if [ -e "$wd/$d" ] || [ -L "$wd/$d" ]; then say "result not-private $wd/$d is not a directory of ours"
    else say "result cannot-create"; fi
    exit 0; }
done
t="$wd/.write-test.$$"
if ( set -C; printf x > "$t" ) 2>/dev/null; then rm -f "$t"; else rm -f "$t"; say "result not-writable"; exit 0; fi
say "result ok"
[ "${4:-}" = lock ] || exit 0
# the host lock (stdin: our lock line), created with noclobber; else who holds it (first line, at most 512
# bytes) and "lock-old" when the file is over a minute old (a corrupt lock is stale only then)
IFS= read -r mine
# written whole to a file of our own, then linked in place (atomic, and only when no lock is there): an interrupt
# mid-write leaves no empty lock that would refuse the resume for a minute (stop 25)
t="$wd/.lock.new.$$"
# a held lock is read through a second name of its own (a hard link to the same file): its holder may release it
# (rm) between our failed link and our read, and a read of the path then found nothing, a "corrupt" empty lock
# (stop 38). When the lock is gone by then, the link is tried again; a lock we may not link (another user's,
# fs.protected_hardlinks) is read in place.
s="$wd/.lock.seen.$$"
n=0
while :; do
  rm -f "$t" "$s"
  if ( set -C; printf '%s\n' "$mine" > "$t" ) 2>/dev/null && ln "$t" "$wd/lock" 2>/dev/null; then
    rm -f "$t"; say "lock acquired"; exit 0; fi
  rm -f "$t"
  [ ! -L "$wd/lock" ] && ln "$wd/lock" "$s" 2>/dev/null && break
  n=$((n + 1))
  if [ -e "$wd/lock" ] || [ -L "$wd/lock" ] || [ "$n" -ge 5 ]; then s="$wd/lock"; break; fi
done
say "lock held"
seen_done() { [ "$s" = "$wd/lock" ] || rm -f "$s"; }
owned "$s" || { seen_done; say "lock-foreign"; exit 0; }
[ -z "$(find "$s" -mmin +1 2>/dev/null)" ] || say "lock-old"
# seconds since the lock was last touched (its holder's heartbeat), by the host's own clock
m=$(stat -c %Y "$s" 2>/dev/null) && say "lock-age $(( $(date +%s) - m ))"
# the holder line, read once; its bytes hashed are what a takeover compares (the line may hold bytes that are not
# UTF-8), so the line judged and the hash are of the same read
l=$(head -c 512 "$s" 2>/dev/null | head -n 1)
seen_done
printf 'holder %s\n' "$l"
h=$(printf '%s\n' "$l" | sha256sum) && say "holder-sha ${h%% *}"
