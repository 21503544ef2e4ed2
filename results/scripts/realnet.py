#!/usr/bin/env python3
"""Per series of a real-network matrix: medians of the headline time, the longest stall, the
queue delay (down) and the competing flows' bytes, and h3/h2 with the matrix's Holm verdict.
Usage: results/scripts/realnet.py RESULTS_DIR  (reads runs.csv and comparisons.csv; prints Markdown)"""
import csv, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runs_table import fmt, last_attempts, med, series_by  # noqa: E402

d = sys.argv[1]
# Only measured runs, the last attempt of each planned run.
series = series_by(last_attempts(d), "profile", "workload", "variant")

verdicts = {}
for c in csv.DictReader(open(f"{d}/comparisons.csv")):
    if {c["a"], c["b"]} == {"h2", "h3"} and c["ratio"]:
        ratio = float(c["ratio"]) if c["a"] == "h3" else 1 / float(c["ratio"])
        verdicts[(c["profile"], c["workload"])] = (ratio, float(c["p_holm"]), c["verdict"])

order = []
for (p, w, v) in series:
    if (p, w) not in order:
        order.append((p, w))
print("| profile | workload | h2: time (ms) / stall / queue delay | h3: time (ms) / stall / queue delay | competing MB per load (h2 / h3) | h3 ÷ h2 (Holm p) |")
print("|---|---|---|---|---|---|")
for p, w in sorted(order, key=lambda x: (x[1], x[0])):
    cells = []
    cross = []
    for v in ["h2", "h3"]:
        rs = series.get((p, w, v), [])
        valid = sum(1 for r in rs if r["outcome"] == "valid")
        cells.append(
            f"{fmt(med(rs, 'completion_ms'))} / {fmt(med(rs, 'stall_ms'))} / "
            f"{fmt(med(rs, 'queue_delay_down_ms'), 1)}" + ("" if valid == len(rs) else f" ({valid} of {len(rs)} valid)")
        )
        cross.append(fmt(med(rs, "cross_bytes", 1e6), 1))
    ratio, p_holm, verdict = verdicts.get((p, w), (None, None, ""))
    rt = "—" if ratio is None else f"{ratio:.2f} ({p_holm:.2g}{', ' + verdict if verdict and 'no significant' not in verdict else ''})"
    print(f"| {p} | {w} | {cells[0]} | {cells[1]} | {' / '.join(cross)} | {rt} |")
