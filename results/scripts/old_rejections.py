#!/usr/bin/env python3
"""Link rejections per protocol in the committed examples (old gate: lateness p99 > 1 ms), and
how many had a fault other than lateness (which the new gate still rejects)."""
import csv, os
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
for d in ["engines", "stacks", "hol", "adaptive", "views"]:
    rows = [r for r in csv.DictReader(open(f"{ROOT}/results/example/{d}/runs.csv")) if r["phase"] == "measure"]
    out = []
    for p in sorted({r["protocol"] for r in rows}):
        rs = [r for r in rows if r["protocol"] == p]
        link = [r for r in rs if "link" in r["invalid_kinds"]]
        other = [r for r in link if any(k.strip() and "lateness" not in k and "late" not in k
                 for k in r["invalid_reason"].split(";"))]
        out.append(f"{p} {len(link)}/{len(rs)} → {len(other)}")
    print(d, " | ".join(out))
