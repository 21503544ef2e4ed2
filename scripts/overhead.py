#!/usr/bin/env python3
"""Per-run overhead of a matrix: medians and p95 of Chromium launch, settle and teardown from
runs.csv, and their share of the run wall time.  Usage: scripts/overhead.py RESULTS/runs.csv"""
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["launch_ms"]]
for c in ["launch_ms", "settle_ms", "teardown_ms", "wall_ms"]:
    v = sorted(float(r[c]) for r in rows)
    print(f"{c}: median {statistics.median(v):.0f}, p95 {v[int(0.95 * (len(v) - 1))]:.0f}")
o = sum(float(r[c]) for r in rows for c in ["launch_ms", "settle_ms", "teardown_ms"])
print(f"{len(rows)} runs, overhead {100 * o / sum(float(r['wall_ms']) for r in rows):.1f} % of run wall")
