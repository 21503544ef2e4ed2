#!/usr/bin/env bash
# The same plan quiet and beside a compiler building a large crate in a loop, interleaved by
# blocks (shards, ABBA); each study merged. Run under the measurement lock.
set -euo pipefail
OUT=${OUT:-/tmp/busy-study}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PB=$ROOT/target/release/pagebench
PLAN=(--profiles wired,mobile --workloads page10,page50 --protocols h2,h3 --runs 10 --seed 27)
rm -rf "$OUT" /tmp/busy-src; mkdir -p "$OUT/quiet" "$OUT/busy" /tmp/busy-src
git -C "$ROOT" archive HEAD | tar -x -C /tmp/busy-src
busy_pid=
start_busy() {
  setsid bash -c 'cd /tmp/busy-src; while true; do cargo clean -q; cargo build -q --release >/dev/null 2>&1; done' &
  busy_pid=$!
  sleep 20   # let the compiler get going
}
stop_busy() {
  kill -- -"$busy_pid" 2>/dev/null || true
  wait "$busy_pid" 2>/dev/null || true
  sleep 5
}
trap 'stop_busy' EXIT
run() { "$PB" matrix "${PLAN[@]}" --shard "$2/4" --out "$OUT/$1/s$2" --quiet; }
for k in 1 2 3 4; do
  if (( k % 2 )); then order=(quiet busy); else order=(busy quiet); fi
  for mode in "${order[@]}"; do
    echo "$(date +%T) shard $k $mode"
    [ "$mode" = busy ] && start_busy
    run "$mode" "$k"
    [ "$mode" = busy ] && stop_busy
  done
done
for mode in quiet busy; do
  "$PB" merge "$OUT/$mode/merged" "$OUT/$mode"/s1 "$OUT/$mode"/s2 "$OUT/$mode"/s3 "$OUT/$mode"/s4
done
echo "$(date +%T) done"
