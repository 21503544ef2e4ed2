#!/usr/bin/env python3
"""Per-run overhead of a matrix from its runs.csv: medians and p95 of the browser's launch,
settle and teardown, of the time each run waited for its browser (browser_wait_ms: all of launch
+ settle when the browser starts at the run's start, what is left of them when it was launched
during the previous run's teardown), of the browser overhead on the run's critical path (wait +
teardown), and of the dead time between loads (from one run's start to the next's, less the
page's own loadEventEnd: everything that is not the load).
Usage: results/scripts/overhead.py RESULTS/runs.csv [more runs.csv …]"""
import csv, statistics, sys
from datetime import datetime

def q(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1))]

def at(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000

rows = []
for path in sys.argv[1:]:
    mine = [r for r in csv.DictReader(open(path)) if r["launch_ms"]]
    mine.sort(key=lambda r: at(r["started_at"]))
    for a, b in zip(mine, mine[1:] + [None]):
        a["_gap"] = (at(b["started_at"]) - at(a["started_at"])) if b else None
    rows += mine
for r in rows:
    w = r.get("browser_wait_ms") or ""
    r["_wait"] = float(w) if w else float(r["launch_ms"]) + float(r["settle_ms"])
    r["_critical"] = r["_wait"] + float(r["teardown_ms"])
    c = r["completion_ms"]
    r["_dead"] = r["_gap"] - float(c) if r["_gap"] is not None and c else None
cols = [("launch_ms", "launch"), ("settle_ms", "settle"), ("teardown_ms", "teardown"),
        ("_wait", "wait for the browser"), ("_critical", "browser overhead on the critical path (wait + teardown)"),
        ("_dead", "dead time between loads (next start - start - loadEventEnd)"), ("wall_ms", "run wall")]
for c, name in cols:
    v = [float(r[c]) for r in rows if r[c] not in (None, "")]
    # The dead time after a cell's last run includes the link's switch to the next profile.
    if c == "_dead":
        v = [x for x in v if x < 20000]
    print(f"{name}: median {statistics.median(v):.0f} ms, p95 {q(v, 0.95):.0f} ms ({len(v)} runs)")
pre = sum(1 for r in rows if r.get("browser_wait_ms") and float(r["browser_wait_ms"]) < float(r["launch_ms"]) + float(r["settle_ms"]) - 1)
print(f"{len(rows)} runs; {pre} waited less than their browser's launch + settle (launched ahead)")
