#!/usr/bin/env python3
"""First visit against repeat view (`--views first,repeat`): per profile and protocol, the
navigation connection's round trips, the round trips to the navigation's first byte (what 0-RTT
shortens; from runs.csv's first_byte_rtts, or for matrices written before that column from each
record's navigation entry and the profile's RTT), resumption and 0-RTT, requests sent in 0-RTT,
loadEventEnd per view, and the matrix's repeat ÷ first verdicts.
Usage: results/scripts/views.py RESULTS_DIR  (reads runs.csv and comparisons.csv; prints Markdown)"""
import csv, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runs_table import fmt, last_attempts, med, series_by, short_ratio, valid  # noqa: E402

d = sys.argv[1]
rows = last_attempts(d)
rtt_ms = {p["name"]: p["rtt_ms"] for p in json.load(open(f"{d}/meta.json"))["profiles"]}
for r in rows:
    record = f"{d}/runs/{r['run_id']}.json"
    if not r.get("first_byte_rtts") and r["outcome"] == "valid" and os.path.exists(record):
        nav = json.load(open(record))["observation"]["navigation"]
        r["first_byte_rtts"] = str(nav["responseStart"] / rtt_ms[r["profile"]])
series = series_by(rows, "profile", "workload", "view", "variant")


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
print("| profile | protocol | first: connect RTTs / first byte RTTs / load (ms) | repeat: connect RTTs / first byte RTTs / load (ms) | repeat: resumed / 0-RTT / early requests | RTTs saved to the first byte | repeat ÷ first | valid first, repeat |")
print("|---|---|---|---|---|---|---|---|")
for (p, w) in cells:
    for v in variants:
        f, r = series.get((p, w, "first", v), []), series.get((p, w, "repeat", v), [])
        if not f and not r:
            continue
        hf, hr = med(f, "handshake_rtts"), med(r, "handshake_rtts")
        bf, br = med(f, "first_byte_rtts"), med(r, "first_byte_rtts")
        saved = None if bf is None or br is None else bf - br
        row = [
            f'{fmt(hf, 1)} / {fmt(bf, 2)} / {fmt(med(f, "load_event_end_ms"))}',
            f'{fmt(hr, 1)} / {fmt(br, 2)} / {fmt(med(r, "load_event_end_ms"))}',
            f'{fmt(med(r, "resumed_connections"))} / {fmt(med(r, "zero_rtt_connections"))} / {fmt(med(r, "early_requests"))}',
            fmt(saved, 2),
            verdicts.get((p, w, v), "—"),
            f"{len(valid(f))}/{len(f)}, {len(valid(r))}/{len(r)}",
        ]
        print(f"| {p} | {v} | " + " | ".join(row) + " |")
