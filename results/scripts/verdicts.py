#!/usr/bin/env python3
"""Two results directories of one plan (e.g. `matrix --jobs 1` and `--jobs auto`), comparison by
comparison: each side's ratio with its CI and verdict, and whether the verdicts agree; then the
walls, runs per minute and how many attempts each needed.
Usage: results/scripts/verdicts.py A_DIR B_DIR [label_a label_b]"""
import csv, json, sys
from datetime import datetime

KEY = ("profile", "workload", "server_a", "browser_a", "a", "server_b", "browser_b", "b")


def comparisons(d):
    return {tuple(r[k] for k in KEY): r for r in csv.DictReader(open(f"{d}/comparisons.csv"))}


def ratio(c):
    """A comparison's ratio with its CI and verdict: `0.96 [0.90–1.02] no significant difference`."""
    if not c:
        return "—"
    r, lo, hi = (float(c[k]) for k in ("ratio", "ratio_ci_low", "ratio_ci_high"))
    return f"{r:.2f} [{lo:.2f}–{hi:.2f}] {c['verdict']}"


def at(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def walk(d):
    """(wall minutes from the matrix's start to its end, attempts, planned runs)."""
    meta = json.load(open(f"{d}/meta.json"))
    rows = list(csv.DictReader(open(f"{d}/runs.csv")))
    minutes = (at(meta["ended_at"]) - at(meta["started_at"])) / 60
    return minutes, len(rows), len({r["plan_id"] for r in rows})


def main():
    a, b = sys.argv[1], sys.argv[2]
    la, lb = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("A", "B")
    ca, cb = comparisons(a), comparisons(b)
    print(f"| comparison | {la} | {lb} | same verdict |")
    print("|---|---|---|---|")
    same = 0
    for k in sorted(ca.keys() | cb.keys()):
        x, y = ca.get(k), cb.get(k)
        vx = x["verdict"] if x else "—"
        vy = y["verdict"] if y else "—"
        name = f"{k[0]}/{k[1]} {k[4]} vs {k[7]}"
        ok = vx == vy
        same += ok
        fx, fy = ratio(x), ratio(y)
        print(f"| {name} | {fx} | {fy} | {'yes' if ok else '**no**'} |")
    print(f"\n{same} of {len(ca.keys() | cb.keys())} verdicts the same.\n")
    for label, d in ((la, a), (lb, b)):
        minutes, attempts, planned = walk(d)
        print(f"- {label}: {minutes:.1f} min for {attempts} attempts ({planned} planned runs), "
              f"{attempts / minutes:.1f} attempts per minute")
        meta = json.load(open(f"{d}/meta.json"))
        print(f"  started {meta.get('started_at', '?')}, pagebench {meta.get('git_revision', '?')}")


if __name__ == "__main__":
    main()
