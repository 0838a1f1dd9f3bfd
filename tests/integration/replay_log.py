"""Replay a corpus SGLang log into a file line by line, like a starting server, then exit or stay alive.

usage: python replay_log.py SOURCE DEST DELAY_S {exit|stay} [EXIT_CODE]
"""

import sys
import time

src, dest, delay, then = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
code = int(sys.argv[5]) if len(sys.argv) > 5 else 1
with open(src) as f, open(dest, "a") as out:
    for line in f:
        out.write(line)
        out.flush()
        time.sleep(delay)
if then == "exit":
    sys.exit(code)
time.sleep(600)
