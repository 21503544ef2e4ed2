#!/usr/bin/env bash
# Re-derives every committed example's statistics and report from its runs with a pagebench
# binary (BIN, default target/debug/pagebench) into OUT (default /tmp/rederive), and says which
# files are identical to the committed ones. To compare two builds, run it with each BIN and
# two OUTs, then `diff -r` the OUTs (reports name their directory in one warning line).
set -u
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$(realpath "${BIN:-$repo/target/debug/pagebench}")"
out=${OUT:-/tmp/rederive}
rm -rf "$out"; mkdir -p "$out"
cd "$repo/results/example"
for d in . */; do
  d=${d%/}; [ -f "$d/runs.csv" ] || continue
  name=$( [ "$d" = . ] && echo example || echo "$d")
  dst="$out/$name"; cp -r "$d" "$dst"; rm -rf "$dst"/*/  2>/dev/null; cp -r "$d/runs" "$dst/" 2>/dev/null
  rm -f "$dst/summary.json" "$dst/summary.csv" "$dst/comparisons.csv"
  "$bin" report "$dst" >/dev/null 2>"$dst.err" || echo "$name: report failed: $(tail -1 $dst.err)"
  for f in summary.json summary.csv comparisons.csv report.md diagnosis.md; do
    [ -f "$d/$f" ] || continue
    if cmp -s "$d/$f" "$dst/$f"; then echo "$name/$f identical"; else echo "$name/$f DIFFERS"; fi
  done
done
