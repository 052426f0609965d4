#!/usr/bin/env bash
# Compares two builds of tessera-microbench on the same benchmarks, run
# alternately ROUNDS times (old, new, old, new, ...) so that both see the
# same spells of a noisy host, and prints per benchmark the best and the
# median of each build and the speed-ups of new over old (items_per_second
# where a benchmark reports it, its real time per iteration otherwise). On
# a host whose speed swings from run to run, the best runs are the least
# disturbed.
#
#   scripts/bench-ab.sh OLD_BINARY NEW_BINARY FILTER [ROUNDS]
#
# e.g. keep a copy of build/bench/tessera-microbench before a change, then
#   scripts/bench-ab.sh /tmp/microbench-old build/bench/tessera-microbench \
#     'BM_QuantKernel/1/[0-3]/(1|16|64)/' 6
# Environment (TESSERA_BENCH_MODEL, ...) passes through to both.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,15p "$0" >&2; exit 2; }
OLD=$1 NEW=$2 FILTER=$3 ROUNDS=${4:-6}
for bin in "$OLD" "$NEW"; do
  [ -x "$bin" ] || { echo "bench-ab: $bin is not an executable" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for round in $(seq "$ROUNDS"); do
  for side in old new; do
    bin=$OLD
    [ "$side" = new ] && bin=$NEW
    "$bin" --benchmark_filter="$FILTER" --benchmark_format=json \
      --benchmark_out="$WORK/$side.$round.json" --benchmark_out_format=json > /dev/null
  done
done
python3 - "$WORK" <<'PY'
import glob, json, statistics, sys

def runs(side):
    """name -> (unit, higher_is_better, [values])"""
    out = {}
    for path in sorted(glob.glob("%s/%s.*.json" % (sys.argv[1], side))):
        for b in json.load(open(path))["benchmarks"]:
            if b.get("run_type") == "aggregate":
                continue
            name = b["name"].split("/min_time")[0].split("/iterations")[0]
            if "items_per_second" in b:
                giga = b["items_per_second"] >= 1e8
                entry = out.setdefault(name, ("G items/s" if giga else "items/s", True, []))
                entry[2].append(b["items_per_second"] / (1e9 if giga else 1.0))
            else:
                entry = out.setdefault(name, (b["time_unit"], False, []))
                entry[2].append(b["real_time"])
    return out

old, new = runs("old"), runs("new")
print("%-36s %-10s %9s %9s %9s %9s %7s %7s" % ("benchmark", "unit", "old best", "new best",
                                              "old med", "new med", "best", "median"))
for name, (unit, higher, o) in old.items():
    if name not in new:
        continue
    n = new[name][2]
    best = max if higher else min
    speed = (lambda a, b: b / a) if higher else (lambda a, b: a / b)
    print("%-36s %-10s %9.3f %9.3f %9.3f %9.3f %6.3fx %6.3fx" % (
        name, unit, best(o), best(n), statistics.median(o), statistics.median(n),
        speed(best(o), best(n)), speed(statistics.median(o), statistics.median(n))))
print("speed-ups of new over old (above 1: new is faster), %d rounds" %
      len(next(iter(old.values()))[2]))
PY
