#!/usr/bin/env python3
"""Per stall condition x protocol: median load, ratio vs unstalled (bootstrap CI), time behind
schedule, longest spell, lateness p99, and how many the gate rejects."""
import csv, random, statistics as st, sys
out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/stall"
conds = dict(l.split() for l in open(f"{out}.conds"))
rows = [r for r in csv.DictReader(open(f"{out}/runs.csv")) if r["phase"] == "measure"]
def f(x):
    try: return float(x)
    except ValueError: return None
by = {}
for r in rows:
    tag = r["plan_id"].split("-")[2]
    by.setdefault((conds[tag], r["protocol"]), []).append(r)
random.seed(1)
def boot(a, b, n=4000):
    rs = sorted(st.median(random.choices(a, k=len(a))) / st.median(random.choices(b, k=len(b))) for _ in range(n))
    return rs[int(0.025 * n)], rs[int(0.975 * n)]
order = list(dict.fromkeys(conds.values()))
print("| stall | protocol | n | median load (ms) | vs unstalled (95 % CI) | behind (ms, median) | behind % of load | longest spell (ms) | lateness p99 down (µs) | gate rejects |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in order:
    for p in ("h2", "h3"):
        rs = by.get((c, p), [])
        if not rs: continue
        load = [f(r["completion_ms"]) for r in rs if f(r["completion_ms"])]
        base = [f(r["completion_ms"]) for r in by[("none", p)] if f(r["completion_ms"])]
        beh = [f(r.get("behind_ms", "")) or 0 for r in rs]
        lng = [f(r.get("behind_longest_ms", "")) or 0 for r in rs]
        lat = [f(r["lateness_p99_down_us"]) or 0 for r in rs]
        share = [b / l * 100 for b, l in zip(beh, load)]
        rej = sum(1 for r in rs if "link" in r["invalid_kinds"])
        ratio = st.median(load) / st.median(base)
        lo, hi = boot(load, base) if c != "none" else (1, 1)
        print(f"| {c} | {p} | {len(rs)} | {st.median(load):.0f} | {ratio:.3f} ({lo:.2f}–{hi:.2f}) | {st.median(beh):.1f} | {st.median(share):.2f} | {st.median(lng):.1f} | {st.median(lat):.0f} | {rej} of {len(rs)} |")
