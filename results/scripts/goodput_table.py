#!/usr/bin/env python3
"""The fast-link tables of docs/devices.md: `python3 results/scripts/goodput_table.py DIR`.

Per series of a matrix (profile, engine, device, protocol): median goodput in Mbit/s [bootstrap
95 % CI of the median, seed 47] (valid/attempts), the cores the browser, server and emulator used
over the run's window, the browser's busiest thread; then h1÷h2 and h3÷h2 of the goodput medians
with bootstrap CIs; then the docs' markdown table, with the verdicts (on the download's time,
Holm over the matrix's comparisons) from the matrix's comparisons.csv."""
import csv, sys, random, statistics as st
rows = list(csv.DictReader(open(sys.argv[1] + '/runs.csv')))
random.seed(47)
def boot(xs, f=st.median, n=4000):
    bs = sorted(f([random.choice(xs) for _ in xs]) for _ in range(n))
    return bs[int(0.025 * n)], bs[int(0.975 * n)]
series = {}
for r in rows:
    k = (r['profile'], r['browser'], r['device'], r['protocol'])
    s = series.setdefault(k, {'att': 0, 'g': [], 'cores': [], 'busy': []})
    s['att'] += 1
    if r['outcome'] != 'valid': continue
    s['g'].append(float(r['goodput_mbit']))
    wall = float(r['wall_ms'] or 'nan')
    cpu = sum(float(r[c] or 0) for c in ('browser_cpu_ms', 'server_cpu_ms', 'emulator_cpu_ms'))
    s['cores'].append(cpu / wall)
    s['busy'].append(float(r['browser_busiest_pct'] or 'nan'))
for k in sorted(series):
    s = series[k]; g = s['g']
    if not g: print(k, 'no valid'); continue
    lo, hi = boot(g)
    print('%-10s %-9s %-10s %-3s %6.0f [%4.0f-%4.0f] (%d/%d) cores %.2f busiest %.0f' % (*k, st.median(g), lo, hi, len(g), s['att'], st.median(s['cores']), st.median(s['busy'])))
def ratio(a, b, n=4000):
    bs = sorted(st.median([random.choice(a) for _ in a]) / st.median([random.choice(b) for _ in b]) for _ in range(n))
    return st.median(a) / st.median(b), bs[int(0.025 * n)], bs[int(0.975 * n)]
for k in sorted(series):
    if k[3] != 'h2': continue
    for p in ('h1', 'h3'):
        o = series.get(k[:3] + (p,))
        if o and o['g'] and series[k]['g']:
            print('%s %s÷h2 %.2f [%.2f-%.2f]' % (' '.join(k[:3]), p, *ratio(o['g'], series[k]['g'])))

# The docs' table: one row per engine and device, goodput per protocol, the goodput ratios and
# the verdicts (on the download's time, Holm) the matrix's comparisons.csv gives for each pair.
verdicts = {}
for c in csv.DictReader(open(sys.argv[1] + '/comparisons.csv')):
    if (c['browser_a'], c['device_a']) == (c['browser_b'], c['device_b']):
        key = (c['profile'], c['browser_a'], c['device_a'], c['a'], c['b'])
        said = 'n.s.' if c['verdict'] == 'no significant difference' else '%s %s' % (c['a'], c['verdict'])
        verdicts[key] = '%s (Holm p %.3f)' % (said, float(c['p_holm']))
print('\n| engine, device | h1 | h2 | h3 | h1 ÷ h2 | h3 ÷ h2 | h3 vs h2 | h1 vs h2 |')
print('|---|---|---|---|---|---|---|---|')
for k in sorted(series):
    if k[3] != 'h2' or not series[k]['g']:
        continue
    cells, ratios, said = [], [], []
    for p in ('h1', 'h2', 'h3'):
        g = series.get(k[:3] + (p,), {'g': [], 'att': 0})
        if g['g']:
            lo, hi = boot(g['g'])
            cells.append('%.0f [%.0f–%.0f] (%d/%d)' % (st.median(g['g']), lo, hi, len(g['g']), g['att']))
        else:
            cells.append('—')
    for p in ('h1', 'h3'):
        o = series.get(k[:3] + (p,))
        ratios.append('%.2f [%.2f–%.2f]' % ratio(o['g'], series[k]['g']) if o and o['g'] else '—')
        said.append(verdicts.get(k[:3] + (p, 'h2')) or verdicts.get(k[:3] + ('h2', p)) or '—')
    print('| %s, %s | %s | %s | %s | %s | %s | %s | %s |' % (k[1].capitalize(), k[2], *cells, *ratios, said[1], said[0]))
