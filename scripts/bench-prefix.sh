#!/usr/bin/env bash
# Prefix caching and priority scheduling on the 110M llama model of
# scripts/bench-serving.sh. Three servers run side by side (only one is
# loaded at a time): prefix caching on, off (--no-prefix-caching), and on
# with --scheduling-policy priority. Each workload runs TESSERA_BENCH_REPS
# times (default 3) alternating on/off, and the medians are compared:
#   A. a 1,024-token system prompt shared by every request + 32-token
#      questions, concurrency 16: TTFT p50 at least 5x lower with the cache,
#      output tokens/s not lower;
#   B. 4-turn chats (64-token questions, 64-token answers, each turn resends
#      the history): prefill tokens computed at least 60% lower;
#   C. 10% high-priority requests under saturation (priority server, 8
#      sequences and 64 tokens per step, 32 in flight): high-priority TTFT p99 at most 2x
#      its unloaded value (high-priority requests alone, one at a time); the
#      fcfs server under the same load for comparison. The 32 clients start
#      over 2 s (--ramp-up) so that the load is a steady saturation; the same
#      run with all 32 sent at once is shown too: there the ~4 urgent
#      requests of the burst arrive together, and on a compute-bound machine
#      the k-th of them waits for the k-1 prefills before it whatever the
#      order, so its TTFT is about k times the unloaded one;
#   D. nothing shared (distinct random prompts): the cache's cost, on vs off
#      output tokens/s within 2%, and TTFT p50 at most 2% higher with it.
# Prints one line per run and a summary. Environment: TESSERA_BENCH_REPS,
# TESSERA_THREADS (all cores), TESSERA_BUILD_DIR (build),
# TESSERA_BENCH_MODEL_FLAGS (tessera-make-model's shape flags, default the
# 110M model's "--dim 768 --layers 12 --heads 12 --ffn 2048"; a smaller shape
# for machines where the 110M model's prefill takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
REPS=${TESSERA_BENCH_REPS:-3}
THREADS=${TESSERA_THREADS:-0}
for bin in tools/tessera-make-model server/tessera-server client/tessera-cli client/bench/tessera-bench; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "bench-prefix: build $BUILD_DIR/$bin first (scripts/build.sh)" >&2; exit 1; }
done

WORK=$(mktemp -d)
MODEL=$WORK/llama-f16.gguf
read -r -a SHAPE <<< "${TESSERA_BENCH_MODEL_FLAGS:---dim 768 --layers 12 --heads 12 --ffn 2048}"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BUILD_DIR/tools/tessera-make-model" --arch llama "${SHAPE[@]}" \
  --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --dtype f16 --tied --out "$MODEL" > /dev/null

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start NAME FLAGS...: starts a server; its address goes to $WORK/NAME.addr.
start() {
  local name=$1 port
  shift
  port=$(free_port)
  "$BUILD_DIR/server/tessera-server" --model "$MODEL" --port "$port" --metrics-port 0 --http-port 0 \
    --threads "$THREADS" "$@" > "$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  "$BUILD_DIR/client/tessera-cli" --server "127.0.0.1:$port" info --wait 120 > /dev/null
  echo "127.0.0.1:$port" > "$WORK/$name.addr"
}

start on
start off --no-prefix-caching
# A step in flight is what an urgent request waits for: the priority server
# takes small steps (64 tokens), so that this wait stays short.
start prio --scheduling-policy priority --max-num-seqs 8 --max-batched-tokens 64 \
  --priority-aging-seconds 60

# bench LABEL SERVER ARGS...: one tessera-bench run, its JSON kept as
# $WORK/LABEL.json and a one-line summary printed.
bench() {
  local label=$1 server=$2
  shift 2
  "$BUILD_DIR/client/bench/tessera-bench" --server "$(cat "$WORK/$server.addr")" --json \
    --ignore-eos "$@" > "$WORK/$label.json"
  /usr/bin/python3 - "$WORK/$label.json" "$label" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
hi = r["by_priority"].get("-1", {}).get("ttft_seconds", {}).get("p99")
print(f"  {sys.argv[2]:<18} ttft_p50 {r['ttft_seconds']['p50']*1e3:9.1f} ms  "
      f"out_tok/s {r['output_tokens_per_second']:8.1f}  prefill_computed {r['prefill_tokens_computed']:7d}"
      + (f"  high_ttft_p99 {hi*1e3:8.1f} ms" if hi is not None else "") +
      (f"  failed {r['failed']}" if r["failed"] else ""))
EOF
}

for rep in $(seq 1 "$REPS"); do
  seed=$((rep * 1000))
  echo "== repetition $rep of $REPS"
  for mode in on off; do
    bench "A-$mode-$rep" $mode --concurrency 16 --num-requests 32 --warmup 2 \
      --shared-prefix-len 1024 --input-len 32 --max-tokens 32 --seed $seed
  done
  for mode in on off; do
    bench "B-$mode-$rep" $mode --concurrency 4 --num-requests 32 --warmup 0 \
      --multi-turn 4 --input-len 64 --max-tokens 64 --seed $seed
  done
  bench "C-unloaded-$rep" prio --concurrency 1 --num-requests 10 --warmup 1 \
    --priority-mix 1 --input-len 128 --max-tokens 64 --seed $((seed + 1))
  bench "C-loaded-$rep" prio --concurrency 32 --ramp-up 2 --num-requests 160 --warmup 0 \
    --priority-mix 0.1 --input-len 128 --max-tokens 64 --seed $((seed + 2))
  bench "C-burst-$rep" prio --concurrency 32 --num-requests 160 --warmup 0 \
    --priority-mix 0.1 --input-len 128 --max-tokens 64 --seed $((seed + 2))
  bench "C-fcfs-$rep" on --concurrency 32 --ramp-up 2 --num-requests 160 --warmup 0 \
    --priority-mix 0.1 --input-len 128 --max-tokens 64 --seed $((seed + 3))
  # Different seeds on the two servers would change the prompts; the same
  # seed per repetition keeps them equal, and no prompt repeats across runs.
  # The order alternates between repetitions, so that whatever favours the
  # first (or second) run of a pair does not favour one side.
  order="on off"
  [ $((rep % 2)) -eq 0 ] && order="off on"
  for mode in $order; do
    bench "D-$mode-$rep" $mode --concurrency 16 --num-requests 64 --warmup 0 \
      --input-len 256 --max-tokens 64 --seed $((seed + 4))
  done
done

echo
echo "== summary (medians of $REPS; A and D judged by the median of each repetition's on/off ratio; spread is (max - min) / median)"
/usr/bin/python3 - "$WORK" "$REPS" <<'EOF'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
def runs(label):
    return [json.load(open(f"{work}/{label}-{r}.json")) for r in range(1, reps + 1)]
def med(label, key):
    values = [key(r) for r in runs(label)]
    m = statistics.median(values)
    spread = (max(values) - min(values)) / m if m else 0.0
    return m, spread
ttft = lambda r: r["ttft_seconds"]["p50"]
tps = lambda r: r["output_tokens_per_second"]
computed = lambda r: r["prefill_tokens_computed"]
high_p99 = lambda r: r["by_priority"]["-1"]["ttft_seconds"]["p99"]
def paired(on_label, off_label, key):
    """Median over repetitions of on / off, each pair measured back to back:
    the machine's drift between repetitions cancels out."""
    return statistics.median(key(a) / key(b) for a, b in zip(runs(on_label), runs(off_label)))
def line(name, value, ok):
    print(f"{name:<58} {value:<34} {'PASS' if ok else 'FAIL'}")

on, s_on = med("A-on", ttft); off, s_off = med("A-off", ttft); r = paired("A-off", "A-on", ttft)
line("A. shared 1,024-token prefix: TTFT p50 off / on >= 5",
     f"paired {r:.1f}x ({off*1e3:.0f} / {on*1e3:.0f} ms, spread {s_on:.0%}, {s_off:.0%})", r >= 5)
on, s_on = med("A-on", tps); off, s_off = med("A-off", tps)
line("A. output tokens/s on >= off", f"{on:.1f} vs {off:.1f} (spread {s_on:.0%}, {s_off:.0%})", on >= off)
on, s_on = med("B-on", computed); off, _ = med("B-off", computed)
line("B. 4-turn chats: prefill tokens computed >= 60% lower",
     f"{on:.0f} vs {off:.0f}: {1 - on/off:.0%} lower", 1 - on / off >= 0.6)
unloaded, s_u = med("C-unloaded", high_p99); loaded, s_l = med("C-loaded", high_p99)
fcfs, s_f = med("C-fcfs", high_p99); burst, _ = med("C-burst", high_p99)
line("C. 10% high priority, saturated: high TTFT p99 <= 2x unloaded",
     f"{loaded*1e3:.0f} vs {unloaded*1e3:.0f} ms = {loaded/unloaded:.2f}x (spread {s_l:.0%}, {s_u:.0%})",
     loaded <= 2 * unloaded)
print(f"{'   (fcfs under the same load: high TTFT p99)':<58} {fcfs*1e3:.0f} ms = {fcfs/unloaded:.1f}x unloaded")
print(f"{'   (priority, all 32 sent at once: high TTFT p99)':<58} {burst*1e3:.0f} ms = {burst/unloaded:.1f}x unloaded")
# D's servers run back to back in each repetition: the verdict is the median
# of the paired ratios; the medians of each side are shown beside it.
on, s_on = med("D-on", tps); off, s_off = med("D-off", tps); r = paired("D-on", "D-off", tps)
line("D. no hits: output tokens/s on vs off within 2%",
     f"paired {r - 1:+.1%} ({on:.1f} vs {off:.1f}, spread {s_on:.0%}, {s_off:.0%})", abs(r - 1) <= 0.02)
on, s_on = med("D-on", ttft); off, s_off = med("D-off", ttft); r = paired("D-on", "D-off", ttft)
line("D. no hits: TTFT p50 on at most 2% above off",
     f"paired {r - 1:+.1%} ({on*1e3:.0f} vs {off*1e3:.0f} ms, spread {s_on:.0%}, {s_off:.0%})", r - 1 <= 0.02)
EOF
