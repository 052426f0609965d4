#!/usr/bin/env bash
# Checks that no function of a binary outside the instruction-set kernels
# uses AVX or AVX-512 instructions.
#
# The kernel files (engine/backend/cpu/*_avx2.cc, *_avx512*.cc, *_amx.cc,
# *_avxvnni.cc) hold code for AVX2, AVX-512 and so on, which runs only where
# the CPU has them. Their own functions are either internal (anonymous
# namespace) or name their instruction set (QuantLinearAvx2, ...). An
# out-of-line copy of a shared inline or template function (say
# std::vector<uint8_t>::_M_default_append) is a weak symbol: had such a file
# compiled its copy for AVX-512 and the linker kept that copy rather than a
# portable one, the portable code would call AVX-512 instructions and die of
# SIGILL on a CPU without them (lld once chose an AMX file's copy for a test
# executable, when the files were compiled with -mavx512f and so on). The
# files now compile only their own code for those extensions, inside
# instruction-set regions (engine/backend/cpu/isa_target.h), and this check
# guards that.
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
