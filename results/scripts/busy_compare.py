#!/usr/bin/env python3
"""Quiet vs busy side by side: counted medians, attempts, rejections, contention."""
import csv, statistics as st, sys
base = sys.argv[1] if len(sys.argv) > 1 else "/tmp/busy-study"
def load(mode):
    rows = [r for r in csv.DictReader(open(f"{base}/{mode}/merged/runs.csv")) if r["phase"] == "measure"]
    last = {}
    for r in rows:
        if r["plan_id"] not in last or int(r["attempt"]) > int(last[r["plan_id"]]["attempt"]):
            last[r["plan_id"]] = r
    out = {}
    for r in rows:
        out.setdefault((r["profile"], r["workload"], r["protocol"]), {"att": [], "cnt": []})["att"].append(r)
    for r in last.values():
        out[(r["profile"], r["workload"], r["protocol"])]["cnt"].append(r)
    return out
def med(rs, c):
    v = [float(r[c]) for r in rs if r[c] not in ("", None)]
    return st.median(v) if v else float("nan")
q, b = load("quiet"), load("busy")
print("| series | counted median quiet → busy (ms) | moved | attempts (rejected) quiet / busy | disturbed quiet / busy | browser CPU / run-queue ms quiet → busy | server CPU ms | others' CPU ms | emulator run-queue ms | behind ms (max) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(q):
    Q, B = q[k], b[k]
    mq = med([r for r in Q["cnt"] if r["outcome"] == "valid"], "completion_ms")
    mb = med([r for r in B["cnt"] if r["outcome"] == "valid"], "completion_ms")
    rej = lambda S: sum(1 for r in S["att"] if "link" in r["invalid_kinds"])
    dist = lambda S: sum(1 for r in S["att"] if r["disturbed"] == "1")
    bm = lambda S: max(float(r["behind_ms"] or 0) for r in S["att"])
    print(f"| {'/'.join(k)} | {mq:.0f} → {mb:.0f} | {100*(mb/mq-1):+.1f} % | {len(Q['att'])} ({rej(Q)}) / {len(B['att'])} ({rej(B)}) | {dist(Q)} / {dist(B)} | "
          f"{med(Q['cnt'],'browser_cpu_ms'):.0f}/{med(Q['cnt'],'browser_runq_ms'):.0f} → {med(B['cnt'],'browser_cpu_ms'):.0f}/{med(B['cnt'],'browser_runq_ms'):.0f} | "
          f"{med(Q['cnt'],'server_cpu_ms'):.0f} → {med(B['cnt'],'server_cpu_ms'):.0f} | {med(Q['cnt'],'others_cpu_ms'):.0f} → {med(B['cnt'],'others_cpu_ms'):.0f} | "
          f"{med(Q['cnt'],'emulator_runq_ms'):.1f} → {med(B['cnt'],'emulator_runq_ms'):.1f} | {bm(Q):.1f} / {bm(B):.1f} |")
