#!/usr/bin/env python3
"""How much of each series' headline the round-trip accounting explains, from a results
directory's run records (valid measured runs only):

    python3 results/scripts/round_trips.py DIR [load|fcp|lcp]

`load` (the default) reads each run's `round_trips`; `fcp` and `lcp` the accounting of that
paint along its render path (`paint_round_trips`). One row per series: runs, median headline,
median k, the median terms (ms), the median of |unexplained| / headline, and how many runs
leave more than 10 % unexplained."""
import json, os, statistics, sys
from collections import defaultdict

def accounting(r, which):
    if which == "load":
        return r.get("round_trips")
    return (r.get("paint_round_trips") or {}).get(which)

def main(d, which="load"):
    if which not in ("load", "fcp", "lcp"):
        sys.exit(f"round_trips.py: accounting {which!r}: use load, fcp or lcp")
    by = defaultdict(list)
    for f in os.listdir(os.path.join(d, "runs")):
        r = json.load(open(os.path.join(d, "runs", f)))
        t = accounting(r, which)
        if r.get("phase") != "measure" or r.get("outcome") != "valid" or not t:
            continue
        key = (r["profile"], r["workload"], r.get("server", "embedded"), r.get("variant", r["protocol"]))
        by[key].append(t)
    print("| profile | workload | server | protocol | runs | headline (ms) | k | RTT | set-up RTT | requests | flight RTT | server | behind | at rate | queue | browser | unexplained | median \\|unexplained\\| ÷ headline | runs > 10 % |")
    print("|" + "---|" * 19)
    med = statistics.median
    for key in sorted(by):
        ts = by[key]
        share = [abs(t["remainder_ms"]) / t["headline_ms"] for t in ts]
        m = lambda k: med(t.get(k, 0.0) for t in ts)
        print(f"| {' | '.join(key)} | {len(ts)} | {m('headline_ms'):.0f} | {m('critical_rtts'):.2f} | {m('rtt_ms'):.1f} | "
              f"{m('setup_rtts'):.2f} | {m('request_rtts'):.0f} | {m('flight_rtts'):.2f} | {m('server_ms'):.1f} | "
              f"{m('behind_ms'):.1f} | {m('wire_ms'):.1f} | {m('queue_ms'):.1f} | {m('browser_ms'):.1f} | "
              f"{m('remainder_ms'):.1f} | {100 * med(share):.1f} % | {sum(s > 0.1 for s in share)} |")

if __name__ == "__main__":
    main(*sys.argv[1:3])
