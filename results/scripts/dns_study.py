"""The DNS study's tables (docs/dns.md) from its three results directories: `first` (h2, h3,
h3-dns first views, --dns resolver), `repeat` (h2, h3-discovered repeat views, --dns resolver)
and `none` (h2, h3 first views, --dns none). Ratios of medians of the valid runs' headline, with
10,000-resample percentile bootstrap 95 % CIs. Usage: dns_study.py [DIR] (default
results/example/dns)."""
import csv, random, statistics as st, sys
random.seed(7)
BASE = sys.argv[1] if len(sys.argv) > 1 else 'results/example/dns'
def load(d):
    rows=[r for r in csv.DictReader(open(f'{BASE}/{d}/runs.csv')) if r['phase']=='measure']
    out={}
    for r in rows:
        out.setdefault((r['profile'],r['workload'],r['variant']),[]).append(r)
    return out
def vals(rs): return [float(r['completion_ms']) for r in rs if r['outcome']=='valid' and r['completion_ms']]
def med(v): return st.median(v)
def ci(a,b,n=10000):
    rs=[]
    for _ in range(n):
        x=[random.choice(a) for _ in a]; y=[random.choice(b) for _ in b]
        rs.append(med(x)/med(y))
    rs.sort(); return rs[int(0.025*n)], rs[int(0.975*n)]
def ratio(a,b):
    lo,hi=ci(a,b); r=med(a)/med(b)
    mark = '' if lo<=1<=hi else (' faster' if hi<1 else ' slower')
    return f"{r:.2f} [{lo:.2f}–{hi:.2f}]{mark}"
first=load('first'); rep=load('repeat'); none=load('none')
profiles=['wired','intercontinental','mobile']; works=['page10','page50','site-django-tutorial07']
print("| profile | workload | h2 | h3 (forced) | h3-dns | h3-dns ÷ h3 | h3-dns ÷ h2 | h3 ÷ h2 | fell back (h3-dns) |")
print("|---|---|---|---|---|---|---|---|---|")
for p in profiles:
  for w in works:
    h2=vals(first[(p,w,'h2')]); h3=vals(first[(p,w,'h3')]); hd=vals(first[(p,w,'h3-dns')])
    fb=sum(1 for r in first[(p,w,'h3-dns')] if 'not_announced' in r['invalid_kinds'])
    print(f"| {p} | {w} | {med(h2):.0f} | {med(h3):.0f} | {med(hd):.0f} | {ratio(hd,h3)} | {ratio(hd,h2)} | {ratio(h3,h2)} | {fb} of {len(first[(p,w,'h3-dns')])} |")
print()
print("| profile | workload | h2 repeat | h3-discovered repeat | ÷ h2 repeat |")
print("|---|---|---|---|---|")
for p in profiles:
  for w in works:
    if (p,w,'h2') not in rep: continue
    a=vals(rep[(p,w,'h3-discovered')]); b=vals(rep[(p,w,'h2')])
    inv=sum(1 for r in rep[(p,w,'h3-discovered')] if r['outcome']!='valid')
    print(f"| {p} | {w} | {med(b):.0f} | {med(a):.0f}{' ('+str(inv)+' invalid)' if inv else ''} | {ratio(a,b)} |")
print()
print("| profile | workload | h2: resolver ÷ none | h3: resolver ÷ none | h2 lookup (ms) |")
print("|---|---|---|---|---|")
for p in profiles:
  for w in works:
    if (p,w,'h2') not in none: continue
    lk=[float(r['dns_ms']) for r in first[(p,w,'h2')] if r.get('dns_ms')]
    print(f"| {p} | {w} | {ratio(vals(first[(p,w,'h2')]),vals(none[(p,w,'h2')]))} | {ratio(vals(first[(p,w,'h3')]),vals(none[(p,w,'h3')]))} | {med(lk):.0f} |" if lk else f"| {p} | {w} | - |")
