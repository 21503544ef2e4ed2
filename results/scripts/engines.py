#!/usr/bin/env python3
"""Chromium against Firefox in one matrix (`--browsers chromium,firefox`): per profile, workload
and protocol, each engine's medians (loadEventEnd, queueing, on-wire mid/peak, goodput) and the
matrix's verdicts (h3 ÷ h2 per engine, Firefox ÷ Chromium per protocol).
Usage: results/scripts/engines.py RESULTS_DIR  (reads runs.csv and comparisons.csv; prints Markdown)"""
import csv, statistics, sys
from collections import defaultdict

d = sys.argv[1]
last = {}
for r in csv.DictReader(open(f"{d}/runs.csv")):
    if r["phase"] == "measure":
        if r["plan_id"] not in last or int(r["attempt"]) > int(last[r["plan_id"]]["attempt"]):
            last[r["plan_id"]] = r
series = defaultdict(list)
for r in last.values():
    series[(r["profile"], r["workload"], r["browser"], r["variant"])].append(r)


def med(rs, col):
    v = [float(r[col]) for r in rs if r.get(col) and r["outcome"] == "valid"]
    return statistics.median(v) if v else None


def fmt(v, digits=0):
    return "—" if v is None else f"{v:,.{digits}f}".replace(",", " ")


verdicts = {}
for c in csv.DictReader(open(f"{d}/comparisons.csv")):
    key = (c["profile"], c["workload"], c["browser_a"], c["a"], c["browser_b"], c["b"])
    short = {"faster": "faster", "slower": "slower"}.get(c["verdict"].split()[0], "n.s.")
    verdicts[key] = f'{float(c["ratio"]):.2f} ({short})'

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
