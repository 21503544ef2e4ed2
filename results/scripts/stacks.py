#!/usr/bin/env python3
"""Per stack of a `--servers` matrix: medians per series from runs.csv (the last attempt of each
planned run, measured runs, valid ones), and the h3/h2 and stack/embedded verdicts from
comparisons.csv (Holm over the matrix). Markdown on stdout.
Usage: results/scripts/stacks.py RESULTS_DIR"""
import csv, os, statistics, sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runs_table import last_attempts  # noqa: E402

d = sys.argv[1]
series, planned = defaultdict(list), defaultdict(int)
for r in last_attempts(d):
    k = (r["profile"], r["workload"], r["server"], r["variant"])
    planned[k] += 1
    if r["outcome"] == "valid":
        series[k].append(r)


def med(rows, col, fmt="{:.0f}"):
    v = [float(x[col]) for x in rows if x[col] not in ("", None)]
    return fmt.format(statistics.median(v)) if v else "—"


verdicts = {}
for c in csv.DictReader(open(f"{d}/comparisons.csv")):
    key = (c["profile"], c["workload"], c["server_a"], c["a"], c["server_b"], c["b"])
    v = c["verdict"].replace("no significant difference", "n.s.")
    if not c["ratio"]:
        verdicts[key] = v
        continue
    p_holm = f", p_holm {float(c['p_holm']):.2g}" if c["p_holm"] else ""
    verdicts[key] = f"{float(c['ratio']):.2f} ({v}{p_holm})"

cols = ["series", "valid", "load or transfer ms", "goodput Mbit/s", "handshake RTTs",
        "QUIC lost / TCP retrans", "server RTT ms", "h3 ÷ h2 (same server)", "÷ embedded (same protocol)"]
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * len(cols))
for k in sorted(series, key=lambda k: (["wired", "mobile", "bad-mobile"].index(k[0]) if k[0] in ["wired", "mobile", "bad-mobile"] else 9, k[1], ["embedded", "caddy", "quiche", "aioquic"].index(k[2]) if k[2] in ["embedded", "caddy", "quiche", "aioquic"] else 9, k[3])):
    rows = series[k]
    p, w, s, v = k
    time_col = "transfer_ms" if w.startswith(("download", "upload")) else "load_event_end_ms"
    lost = med(rows, "quic_lost_packets") if v.startswith("h3") else med(rows, "tcp_retransmits")
    h3h2 = verdicts.get((p, w, s, "h3", s, "h2"), "") if v == "h3" else ""
    vs = verdicts.get((p, w, s, v, "embedded", v), "") if s != "embedded" else ""
    print(f"| {p}/{w}/{s}/{v} | {len(rows)} of {planned[k]} | {med(rows, time_col)} | "
          f"{med(rows, 'goodput_mbit', '{:.1f}')} | {med(rows, 'handshake_rtts', '{:.1f}')} | "
          f"{lost} | {med(rows, 'server_rtt_ms', '{:.1f}')} | {h3h2} | {vs} |")
