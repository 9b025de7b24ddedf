"""Runs a command and prints its peak resident set size as JSON (getrusage of the waited
child: the kernel's own high-water mark, no /usr/bin/time needed).

    python3 bench/rss.py LABEL -- COMMAND...
"""
import json
import resource
import subprocess
import sys
import time

label, rest = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
start = time.perf_counter()
proc = subprocess.run(rest, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - start
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
print(json.dumps({"label": label, "command": " ".join(rest), "exit": proc.returncode,
                  "peak_rss_mb": peak_kb / 1024, "seconds": seconds,
                  "stderr": proc.stderr.decode(errors="replace")[-300:]}))
