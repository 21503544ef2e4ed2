# Usage: python3 results/scripts/priorities_compare.py DIR
# DIR: a matrix with the arms `--servers embedded,embedded:priorities=rfc9218`, and its
# `pagebench report DIR --metric lcp` and `--metric speed-index`. Per series: the median of
# loadEventEnd, LCP and Speed Index of each arm, and pagebench's own comparison of the arms
# (ratio rfc9218 ÷ ignore with its 95 % CI, p after Holm over the matrix, verdict).
import csv, sys

ARM = 'embedded:priorities=rfc9218'
METRICS = [('loadEventEnd', 'load_event_end_ms', ''), ('LCP', 'lcp_ms', '/by-lcp'),
           ('Speed Index', 'speed_index_ms', '/by-speed-index')]

def median(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

d = sys.argv[1]
runs = [r for r in csv.DictReader(open(f'{d}/runs.csv'))
        if r['phase'] == 'measure' and r['outcome'] == 'valid']
print('| profile | protocol | metric | ignore (ms) | rfc9218 (ms) | rfc9218 ÷ ignore [95 % CI] | p (Holm) | verdict |')
print('|---|---|---|---|---|---|---|---|')
for name, column, sub in METRICS:
    for c in csv.DictReader(open(f'{d}{sub}/comparisons.csv')):
        if c['a'] != c['b'] or c['server_a'] != ARM or c['server_b'] != 'embedded':
            continue
        def m(server):
            return median([float(r[column]) for r in runs if r['server'] == server
                           and r['profile'] == c['profile'] and r['variant'] == c['a'] and r[column]])
        print(f"| {c['profile']} | {c['a']} | {name} | {m('embedded'):.0f} | {m(ARM):.0f} | "
              f"{float(c['ratio']):.2f} [{float(c['ratio_ci_low']):.2f}, {float(c['ratio_ci_high']):.2f}] | "
              f"{float(c['p_holm']):.2g} | {c['verdict']} |")
