#!/usr/bin/env python3
"""Chromium against Firefox in one matrix (`--browsers chromium,firefox`): per profile, workload
and protocol, each engine's medians (loadEventEnd, queueing, on-wire mid/peak, goodput) and the
matrix's verdicts (h3 ÷ h2 per engine, Firefox ÷ Chromium per protocol).
Usage: results/scripts/engines.py RESULTS_DIR  (reads runs.csv and comparisons.csv; prints Markdown)"""
import csv, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runs_table import fmt, last_attempts, med, series_by, short_ratio  # noqa: E402

d = sys.argv[1]
series = series_by(last_attempts(d), "profile", "workload", "browser", "variant")

verdicts = {}
for c in csv.DictReader(open(f"{d}/comparisons.csv")):
    key = (c["profile"], c["workload"], c["browser_a"], c["a"], c["browser_b"], c["b"])
    verdicts[key] = short_ratio(c)

cells = []
for (p, w, b, v) in series:
    if (p, w) not in cells:
        cells.append((p, w))
print("| profile | workload | engine | h2: load / queueing / on-wire mid·peak | h3: load / queueing / on-wire mid·peak | h3 ÷ h2 | valid h2, h3 |")
print("|---|---|---|---|---|---|---|")
for (p, w) in cells:
    for b in ["chromium", "firefox"]:
        cols = []
        for v in ["h2", "h3"]:
            rs = series.get((p, w, b, v), [])
            if w == "download":
                cols.append(f'{fmt(med(rs, "completion_ms"))} ms, {fmt(med(rs, "goodput_mbit"), 1)} Mbit/s')
            else:
                cols.append(f'{fmt(med(rs, "load_event_end_ms"))} / {fmt(med(rs, "queueing_median_ms"))} / {fmt(med(rs, "onwire_mid"))}·{fmt(med(rs, "onwire_peak"))}')
        valid = [sum(r["outcome"] == "valid" for r in series.get((p, w, b, v), [])) for v in ["h2", "h3"]]
        ratio = verdicts.get((p, w, b, "h3", b, "h2"), "—")
        print(f"| {p} | {w} | {b} | {cols[0]} | {cols[1]} | {ratio} | {valid[0]}, {valid[1]} |")
print()
print("| profile | workload | Firefox ÷ Chromium, h2 | Firefox ÷ Chromium, h3 |")
print("|---|---|---|---|")
for (p, w) in cells:
    r = [verdicts.get((p, w, "firefox", v, "chromium", v), "—") for v in ["h2", "h3"]]
    print(f"| {p} | {w} | {r[0]} | {r[1]} |")
