"""What the scripts here share: a matrix's counted runs from runs.csv (the measured phase, the
last attempt of each planned run), grouped into series; the median of a column over the valid
ones; a verdict's short form; numbers with spaces between thousands. Imported by the scripts
beside it (each puts its own directory on sys.path, so they run from anywhere)."""
import csv, statistics
from collections import defaultdict


def last_attempts(d):
    """The rows of `d`/runs.csv that count: the measured phase's, the last attempt of each
    plan_id (in the order the plan ids first appear)."""
    last = {}
    for r in csv.DictReader(open(f"{d}/runs.csv")):
        if r["phase"] == "measure":
            if r["plan_id"] not in last or int(r["attempt"]) > int(last[r["plan_id"]]["attempt"]):
                last[r["plan_id"]] = r
    return list(last.values())


def series_by(rows, *cols):
    """`rows` grouped by the tuple of their `cols`."""
    series = defaultdict(list)
    for r in rows:
        series[tuple(r[c] for c in cols)].append(r)
    return series


def valid(rs):
    return [r for r in rs if r["outcome"] == "valid"]


def med(rs, col, scale=1.0):
    """The median of `col` / `scale` over the valid rows that have it (None: none has)."""
    v = [float(r[col]) / scale for r in valid(rs) if r.get(col)]
    return statistics.median(v) if v else None


def fmt(v, digits=0):
    return "—" if v is None else f"{v:,.{digits}f}".replace(",", " ")


def short_ratio(c):
    """A comparisons.csv row's ratio and its verdict in a word: `0.96 (n.s.)`."""
    short = {"faster": "faster", "slower": "slower"}.get(c["verdict"].split()[0], "n.s.")
    return f'{float(c["ratio"]):.2f} ({short})'
