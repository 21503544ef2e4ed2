# Usage: python3 results/scripts/priorities_study.py DIR
#
# DIR: the priorities × Early Hints study, a matrix with four arms of the embedded server
#   --servers embedded,embedded:priorities=rfc9218,embedded:early-hints=true,
#             embedded:priorities=rfc9218:early-hints=true
# after `pagebench report DIR --metric lcp` and `--metric speed-index`.
#
# Prints, per profile, workload and metric (loadEventEnd, LCP, Speed Index), each arm's median
# per protocol, then the comparisons that answer the study's questions:
#   - pagebench's own (from comparisons.csv, Holm over each metric's matrix): every arm against
#     the first (ignore, no hints) per protocol, and h3 / h3-primed against h2 within each arm;
#   - what Early Hints add on top of rfc9218 (arm 4 against arm 2), which pagebench does not
#     compare (it compares arms with the first): ratio of medians with a 95 % bootstrap CI,
#     two-sided Mann-Whitney (normal approximation with the tie correction), Holm over this
#     script's family; DNF and invalid runs are left out here (the study had none: say if so).
import csv, math, random, sys

ARMS = ['embedded', 'embedded:priorities=rfc9218', 'embedded:early-hints=true',
        'embedded:priorities=rfc9218:early-hints=true']
SHORT = {ARMS[0]: 'ignore', ARMS[1]: 'rfc9218', ARMS[2]: 'hints', ARMS[3]: 'rfc9218+hints'}
METRICS = [('loadEventEnd', 'load_event_end_ms', ''), ('LCP', 'lcp_ms', '/by-lcp'),
           ('Speed Index', 'speed_index_ms', '/by-speed-index')]


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def mann_whitney_p(a, b):
    both = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks, i, ties = [0.0] * len(both), 0, 0.0
    while i < len(both):
        j = i
        while j + 1 < len(both) and both[j + 1][0] == both[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    n1, n2 = len(a), len(b)
    r1 = sum(r for r, (_, side) in zip(ranks, both) if side == 0)
    u = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(max(z, 0) / math.sqrt(2)))


def ratio_ci(a, b, rng, n=2000):
    rs = sorted(median([rng.choice(a) for _ in a]) / median([rng.choice(b) for _ in b])
                for _ in range(n))
    return rs[int(0.025 * n)], rs[int(0.975 * n) - 1]


def holm(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - k) * ps[i]))
        out[i] = running
    return out


def main(d):
    rows = [r for r in csv.DictReader(open(f'{d}/runs.csv'))
            if r['phase'] == 'measure' and r['outcome'] == 'valid']
    cells = sorted({(r['profile'], r['workload']) for r in rows})
    protocols = [p for p in ['h2', 'h3', 'h3-primed'] if any(r['variant'] == p for r in rows)]

    def values(server, profile, workload, protocol, column):
        return [float(r[column]) for r in rows if r['server'] == server and r['profile'] == profile
                and r['workload'] == workload and r['variant'] == protocol and r[column]]

    print('## Medians (ms) per arm\n')
    print('| profile | workload | metric | protocol | ' + ' | '.join(SHORT[a] for a in ARMS) + ' |')
    print('|---|---|---|---|' + '---|' * len(ARMS))
    for profile, workload in cells:
        for name, column, _ in METRICS:
            for p in protocols:
                meds = [values(a, profile, workload, p, column) for a in ARMS]
                print(f'| {profile} | {workload} | {name} | {p} | ' + ' | '.join(
                    f'{median(v):.0f} ({len(v)})' if v else '–' for v in meds) + ' |')

    print('\n## pagebench\'s comparisons (ratio [95 % CI], p after Holm, verdict)\n')
    print('| profile | workload | metric | a | b | ratio a ÷ b | p (Holm) | verdict |')
    print('|---|---|---|---|---|---|---|---|')
    for name, column, sub in METRICS:
        for c in csv.DictReader(open(f'{d}{sub}/comparisons.csv')):
            a = f"{SHORT.get(c['server_a'], c['server_a'])} {c['a']}"
            b = f"{SHORT.get(c['server_b'], c['server_b'])} {c['b']}"
            print(f"| {c['profile']} | {c['workload']} | {name} | {a} | {b} | "
                  f"{float(c['ratio']):.2f} [{float(c['ratio_ci_low']):.2f}, "
                  f"{float(c['ratio_ci_high']):.2f}] | {float(c['p_holm']):.2g} | {c['verdict']} |")

    print('\n## Early Hints on top of rfc9218 (arm 4 ÷ arm 2; this script\'s Holm family)\n')
    rng = random.Random(30)
    found = []
    for profile, workload in cells:
        for name, column, _ in METRICS:
            for p in protocols:
                a = values(ARMS[3], profile, workload, p, column)
                b = values(ARMS[1], profile, workload, p, column)
                if len(a) >= 3 and len(b) >= 3:
                    lo, hi = ratio_ci(a, b, rng)
                    found.append((profile, workload, name, p, median(a) / median(b), lo, hi,
                                  mann_whitney_p(a, b)))
    for f, ph in zip(found, holm([f[7] for f in found])):
        verdict = ('faster' if f[6] < 1 else 'slower' if f[5] > 1 else 'n.s.') if ph < 0.05 \
            else 'no significant difference'
        print(f'| {f[0]} | {f[1]} | {f[2]} | {f[3]} | {f[4]:.2f} [{f[5]:.2f}, {f[6]:.2f}] | '
              f'{ph:.2g} | {verdict} |')


if __name__ == '__main__':
    main(sys.argv[1])
