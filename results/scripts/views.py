#!/usr/bin/env python3
"""First visit against repeat view (`--views first,repeat`): per profile and protocol, the
navigation connection's round trips, resumption and 0-RTT, requests sent in 0-RTT, TTFB and
loadEventEnd per view, and the matrix's repeat ÷ first verdicts.
Usage: results/scripts/views.py RESULTS_DIR  (reads runs.csv and comparisons.csv; prints Markdown)"""
import csv, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runs_table import fmt, last_attempts, med, series_by, short_ratio, valid  # noqa: E402

d = sys.argv[1]
series = series_by(last_attempts(d), "profile", "workload", "view", "variant")


def share(rs, col):
    v = valid(rs)
    return sum(1 for r in v if r.get(col) and float(r[col]) > 0) / len(v) if v else None


verdicts = {}
for c in csv.DictReader(open(f"{d}/comparisons.csv")):
    if c["a"] == c["b"] and c.get("view_a") == "repeat" and c.get("view_b") == "first":
        verdicts[(c["profile"], c["workload"], c["a"])] = short_ratio(c)

cells = []
for (p, w, view, v) in series:
    if (p, w) not in cells:
        cells.append((p, w))
variants = ["h1", "h2", "h3", "h3-discovered"]
print("| profile | protocol | first: connect RTTs / TTFB / load (ms) | repeat: connect RTTs / TTFB / load (ms) | repeat: resumed / 0-RTT / early requests | saved per connection (RTT) | repeat ÷ first | valid first, repeat |")
print("|---|---|---|---|---|---|---|---|")
for (p, w) in cells:
    for v in variants:
        f, r = series.get((p, w, "first", v), []), series.get((p, w, "repeat", v), [])
        if not f and not r:
            continue
        hf, hr = med(f, "handshake_rtts"), med(r, "handshake_rtts")
        saved = None if hf is None or hr is None else hf - hr
        row = [
            f'{fmt(hf, 1)} / {fmt(med(f, "ttfb_median_ms"))} / {fmt(med(f, "load_event_end_ms"))}',
            f'{fmt(hr, 1)} / {fmt(med(r, "ttfb_median_ms"))} / {fmt(med(r, "load_event_end_ms"))}',
            f'{fmt(med(r, "resumed_connections"))} / {fmt(med(r, "zero_rtt_connections"))} / {fmt(med(r, "early_requests"))}',
            fmt(saved, 1),
            verdicts.get((p, w, v), "—"),
            f"{len(valid(f))}/{len(f)}, {len(valid(r))}/{len(r)}",
        ]
        print(f"| {p} | {v} | " + " | ".join(row) + " |")
