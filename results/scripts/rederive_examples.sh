#!/usr/bin/env bash
# Re-derives every committed example's statistics and report from its runs with a
# pagebench binary (BIN, default target/debug/pagebench) into OUT (default /tmp/rederive), and
# says which files are identical to the committed ones. Every directory under results/example/
# holding a runs.csv is an example (nested ones too: busy/quiet, sandbox/A…). To compare two
# builds, run it with each BIN and two OUTs, then `diff -r` the OUTs (a report names its
# directory in its title and in one warning line).
#
# IN_PLACE=1 writes them into results/example/ instead (after an intended change of the
# statistics or the report), by paths relative to results/ so that no absolute path enters a
# report — for the examples that keep their records (runs/) only: the others' waterfalls and
# on-wire charts were drawn from records not committed, and a new report would lose them.
set -u
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$(realpath "${BIN:-$repo/target/debug/pagebench}")"
out=${OUT:-/tmp/rederive}
derived="summary.json summary.csv comparisons.csv"
cd "$repo/results/example"
if [ "${IN_PLACE:-0}" != 1 ]; then
  rm -rf "$out"; mkdir -p "$out"
fi
for d in $(find . -name runs.csv -not -path '*/runs/*' -printf '%h\n' | sed 's#^\./##' | sort); do
  name=$( [ "$d" = . ] && echo example || echo "$d")
  if [ "${IN_PLACE:-0}" = 1 ]; then
    if [ ! -d "$d/runs" ]; then
      echo "$name: kept as it is (its records are not committed)"
      continue
    fi
    dst="example/$d"; dst="${dst%/.}"
  else
    dst="$out/$name"; mkdir -p "$dst"
    # The inputs only: what the run wrote, not what was derived from it.
    # (diagnosis.md is kept as it was: `pagebench diagnose` reads records some examples lack.)
    for f in meta.json runs.csv resources.csv machine.json diagnosis.md diagnosis.json; do
      [ -f "$d/$f" ] && cp "$d/$f" "$dst/"
    done
    [ -d "$d/runs" ] && cp -r "$d/runs" "$dst/"
  fi
  ( [ "${IN_PLACE:-0}" = 1 ] && cd "$repo/results"; for f in $derived; do rm -f "$dst/$f"; done )
  err="$out.$(echo "$name" | tr / -).err"
  # In place, from results/: the paths a report names stay relative.
  ( [ "${IN_PLACE:-0}" = 1 ] && cd "$repo/results"
    "$bin" report "$dst" >/dev/null 2>"$err" || echo "$name: report failed: $(tail -1 "$err")" )
  [ "${IN_PLACE:-0}" = 1 ] && continue
  for f in $derived diagnosis.md report.md; do
    [ -f "$d/$f" ] || continue
    if cmp -s "$d/$f" "$dst/$f"; then echo "$name/$f identical"; else echo "$name/$f DIFFERS"; fi
  done
done
