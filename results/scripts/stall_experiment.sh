#!/usr/bin/env bash
# Periodic emulator stalls of known size on one cell (default mobile page50), h2 and h3, conditions interleaved by round:
# how much time behind schedule changes a load (justifies the gate's 1 % / RTT/4 rule).
set -euo pipefail
REPS=${REPS:-6}
OUT=${OUT:-/tmp/stall}
read -r -a CONDS <<< "${CONDS:-none 1ms/100ms 2ms/100ms 2ms/20ms 5ms/100ms 5ms/25ms 15ms/100ms 30ms/200ms}"
PROFILE=${PROFILE:-mobile}
WORKLOAD=${WORKLOAD:-page50}
n=${#CONDS[@]}
rounds=$((REPS * n))
args=()
: > "$OUT.conds"
for ((r = 1; r <= rounds; r++)); do
  c=${CONDS[$(( (r - 1) % n ))]}
  tag=$(printf 'r%02d' "$r")
  echo "$tag $c" >> "$OUT.conds"
  [ "$c" = none ] && continue
  args+=(--inject-fault "$PROFILE-$WORKLOAD-$tag-*=stall-every:$c@0ms")
done
rm -rf "$OUT"
cd "$(dirname "$0")/../.."
target/release/pagebench matrix --profiles "$PROFILE" --workloads "$WORKLOAD" --protocols h2,h3 \
  --runs "$rounds" --seed 31 --retry-invalid 0 --out "$OUT" "${args[@]}"
