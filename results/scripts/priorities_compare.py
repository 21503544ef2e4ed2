# Usage: python3 results/scripts/priorities_compare.py IGNORE_DIR RFC9218_DIR (results of two matrices)
# Medians of loadEventEnd, LCP and Speed Index per series, ignore vs rfc9218, with the ratio's
# 95 % bootstrap CI (seeded) and Mann-Whitney's two-sided p (normal approximation).
import csv, random, math, sys
def rows(d):
    return [r for r in csv.DictReader(open(f'{d}/runs.csv')) if r['phase']=='measure' and r['outcome']=='valid']
def med(v):
    v=sorted(v); n=len(v); return v[n//2] if n%2 else (v[n//2-1]+v[n//2])/2
def mw_p(a,b):
    allv=sorted([(x,0) for x in a]+[(x,1) for x in b]); ranks={}
    i=0
    while i<len(allv):
        j=i
        while j<len(allv) and allv[j][0]==allv[i][0]: j+=1
        for k in range(i,j): ranks.setdefault(k,(i+j+1)/2)
        i=j
    ra=sum(ranks[k] for k,(x,g) in enumerate(allv) if g==0)
    n1,n2=len(a),len(b); u=ra-n1*(n1+1)/2; mu=n1*n2/2; sd=math.sqrt(n1*n2*(n1+n2+1)/12)
    z=(u-mu)/sd if sd else 0; return math.erfc(abs(z)/math.sqrt(2))
A,B=rows(sys.argv[1]),rows(sys.argv[2])
rnd=random.Random(30)
print('| profile | protocol | metric | ignore (ms) | rfc9218 (ms) | rfc9218 ÷ ignore [95 % CI] | p | n |')
print('|---|---|---|---|---|---|---|---|')
for prof in sorted({r['profile'] for r in A}):
  for proto in ['h2','h3','h3-primed']:
    for m,name in [('load_event_end_ms','loadEventEnd'),('lcp_ms','LCP'),('speed_index_ms','Speed Index')]:
      a=[float(r[m]) for r in A if r['profile']==prof and r['variant']==proto and r[m]]
      b=[float(r[m]) for r in B if r['profile']==prof and r['variant']==proto and r[m]]
      if not a or not b: continue
      boots=sorted(med([rnd.choice(b) for _ in b])/med([rnd.choice(a) for _ in a]) for _ in range(4000))
      lo,hi=boots[int(0.025*4000)],boots[int(0.975*4000)]
      print(f'| {prof} | {proto} | {name} | {med(a):.0f} | {med(b):.0f} | {med(b)/med(a):.2f} [{lo:.2f}, {hi:.2f}] | {mw_p(a,b):.3f} | {len(a)}/{len(b)} |')
