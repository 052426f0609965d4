#!/usr/bin/env bash
# Checks that no function of a binary outside the instruction-set kernels
# uses AVX or AVX-512 instructions.
#
# The kernel files (engine/backend/cpu/*_avx2.cc, *_avx512*.cc, *_amx.cc,
# *_avxvnni.cc) are compiled with -mavx2, -mavx512f and so on, and run only
# where the CPU has them. Their own functions are either internal (anonymous
# namespace) or name their instruction set (QuantLinearAvx2, ...). But an
# out-of-line copy of a shared inline or template function (say
# std::vector<uint8_t>::_M_default_append) that such a file instantiates is a
# weak symbol: if the linker keeps that copy rather than a portable one, the
# portable code calls AVX-512 instructions and dies of SIGILL on a CPU without
# them. Which copy wins depends on the linker and the link order (lld chose
# the AMX file's copy for one test executable where ld.bfd did not).
#
# usage: isa_leak_check.sh BINARY...
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: isa_leak_check.sh BINARY..." >&2; exit 2; }

failures=0
for bin in "$@"; do
  [ -f "$bin" ] || { echo "FAIL: $bin does not exist"; failures=$((failures + 1)); continue; }
  # Every function with a ymm, zmm or opmask operand, demangled, by name.
  wide=$(objdump -d --no-show-raw-insn -C "$bin" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
    /%[yz]mm[0-9]|%k[1-7]/ { seen[fn] = 1 }
    END { for (f in seen) print f }')
  if [ -z "$wide" ]; then
    echo "FAIL: $bin: no AVX code found at all (is this a build of the engine's kernels?)"
    failures=$((failures + 1))
    continue
  fi
  kernels=$(grep -cE "Avx2|Avx512|Amx|AvxVnni" <<< "$wide")
  leaked=$(grep -vF "(anonymous namespace)" <<< "$wide" | grep -vE "Avx2|Avx512|Amx|AvxVnni" || true)
  if [ -n "$leaked" ]; then
    echo "FAIL: $bin: functions outside the kernels use AVX instructions:"
    sed 's/^/    /' <<< "$leaked"
    failures=$((failures + 1))
  else
    echo "ok: $bin ($kernels kernel functions use AVX; nothing else does)"
  fi
done
exit $((failures > 0))
