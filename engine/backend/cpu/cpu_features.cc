// CPU feature checks of the kernel levels (kernels.h, quant_linear.h), read
// from CPUID and XGETBV directly: a feature counts only when the CPU has it
// and the operating system saves its registers. Compiled for the baseline
// ISA, as everything that runs before a kernel level is chosen.
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>

#include "engine/backend/cpu/kernels.h"
#include "engine/backend/cpu/quant_linear.h"

namespace tessera::cpu {
namespace {

struct Features {
  bool intel = false;  // vendor GenuineIntel
  bool avx2 = false, fma = false, f16c = false, avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, gfni = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
};

bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

uint64_t ReadXcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

Features Detect() {
  Features f;
  uint32_t a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[12];
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.intel = std::memcmp(vendor, "GenuineIntel", 12) == 0;
  }
  if (!__get_cpuid(1, &a, &b, &c, &d) || !Bit(c, 27) /* OSXSAVE */) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool ymm = (xcr0 & 0x6) == 0x6;     // SSE and AVX state
  const bool zmm = ymm && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  if (!ymm || !Bit(c, 28) /* AVX */) return f;
  f.fma = Bit(c, 12);
  f.f16c = Bit(c, 29);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const uint32_t leaf7_max_sub = a;
  f.avx2 = Bit(b, 5);
  f.avx512f = zmm && Bit(b, 16);
  f.avx512dq = zmm && Bit(b, 17);
  f.avx512bw = zmm && Bit(b, 30);
  f.avx512vl = zmm && Bit(b, 31);
  f.avx512_vnni = zmm && Bit(c, 11);
  f.gfni = Bit(c, 8);
  f.amx_bf16 = tiles && Bit(d, 22);
  f.amx_tile = tiles && Bit(d, 24);
  f.amx_int8 = tiles && Bit(d, 25);
  if (leaf7_max_sub >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avx_vnni = Bit(a, 4);
    f.avx512_bf16 = zmm && Bit(a, 5);
  }
  return f;
}

const Features& Host() {
  static const Features features = Detect();
  return features;
}

// The environment variable `name` as a switch: "0" off, "1" on, anything
// else (or unset) `fallback`.
bool EnvSwitch(const char* name, bool fallback) {
  const char* env = std::getenv(name);
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  if (env != nullptr && std::strcmp(env, "1") == 0) return true;
  return fallback;
}

// TESSERA_CPU_QUANT_PREFETCH: off/0, ahead/1 or next; anything else (or
// unset) the vendor's default.
QuantPrefetch QuantPrefetchFromEnv() {
  const QuantPrefetch fallback = Host().intel ? QuantPrefetch::kAhead : QuantPrefetch::kNextTiles;
  const char* env = std::getenv("TESSERA_CPU_QUANT_PREFETCH");
  if (env == nullptr) return fallback;
  const std::string_view v(env);
  if (v == "off" || v == "0") return QuantPrefetch::kOff;
  if (v == "ahead" || v == "1") return QuantPrefetch::kAhead;
  if (v == "next") return QuantPrefetch::kNextTiles;
  return fallback;
}

std::atomic<QuantPrefetch>& QuantWeightPrefetchMode() {
  static std::atomic<QuantPrefetch> mode{QuantPrefetchFromEnv()};
  return mode;
}

// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): Linux hands out the
// 8 KiB tile state only on request.
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

}  // namespace

bool CpuHasAvx512Kernels() {
  const Features& f = Host();
  return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c;
}

bool CpuHasAvx2Kernels() {
  const Features& f = Host();
  return f.avx2 && f.fma && f.f16c;
}

bool CpuHasAvx512Bf16() { return CpuHasAvx512Kernels() && Host().avx512_bf16; }

bool CpuHasAvx512Vnni() { return CpuHasAvx512Kernels() && Host().avx512_vnni; }

bool CpuHasAvxVnni() { return CpuHasAvx2Kernels() && Host().avx_vnni; }

bool CpuHasGfni() { return Host().gfni; }

bool UseGfniKernel() {
  static const bool use = Host().gfni && EnvSwitch("TESSERA_CPU_GFNI", Host().intel);
  return use;
}

QuantPrefetch QuantWeightPrefetch() {
  return QuantWeightPrefetchMode().load(std::memory_order_relaxed);
}

void SetQuantWeightPrefetch(QuantPrefetch mode) {
  QuantWeightPrefetchMode().store(mode, std::memory_order_relaxed);
}

namespace {

std::atomic<bool>& QuantEightRowPassesMode() {
  static std::atomic<bool> on{EnvSwitch("TESSERA_CPU_QUANT_8ROWS", true)};
  return on;
}

}  // namespace

bool QuantEightRowPasses() { return QuantEightRowPassesMode().load(std::memory_order_relaxed); }

void SetQuantEightRowPasses(bool on) {
  QuantEightRowPassesMode().store(on, std::memory_order_relaxed);
}

namespace {

std::atomic<KvItemPrefetch>& KvItemPrefetchMode() {
  static std::atomic<KvItemPrefetch> mode{[] {
    const char* env = std::getenv("TESSERA_CPU_KV_PREFETCH");
    if (env != nullptr && std::strcmp(env, "0") == 0) return KvItemPrefetch::kOff;
    if (env != nullptr && std::strcmp(env, "1") == 0) return KvItemPrefetch::kOn;
    return KvItemPrefetch::kAuto;
  }()};
  return mode;
}

}  // namespace

void SetKvItemPrefetch(KvItemPrefetch mode) {
  KvItemPrefetchMode().store(mode, std::memory_order_relaxed);
}

bool UseKvItemPrefetch(int64_t step_kv_bytes) {
  switch (KvItemPrefetchMode().load(std::memory_order_relaxed)) {
    case KvItemPrefetch::kOff: return false;
    case KvItemPrefetch::kOn: return true;
    default: return step_kv_bytes > LastLevelCacheBytes();
  }
}

namespace {

// The size of cache `index` of CPU 0 from sysfs ("32768K"), 0 if unknown.
int64_t SysfsCacheBytes(int index) {
  const std::string path =
      "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size";
  std::ifstream in(path);
  int64_t size = 0;
  char unit = 0;
  if (!(in >> size) || size <= 0) return 0;
  in >> unit;
  if (unit == 'K') return size << 10;
  if (unit == 'M') return size << 20;
  return size;
}

}  // namespace

// sysfs first: glibc's sysconf gives an AMD EPYC's L3 summed over its
// core complexes (320 MiB for a 32 MiB L3 on a Zen 4 guest).
int64_t LastLevelCacheBytes() {
  static const int64_t bytes = [] {
    int64_t largest = 0;
    for (int index = 0; index < 8; ++index) largest = std::max(largest, SysfsCacheBytes(index));
    if (largest > 0) return largest;
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? int64_t{l3} : int64_t{32} << 20;
  }();
  return bytes;
}

bool AmxAvailable() {
  static const bool ok = [] {
    const Features& f = Host();
    // The AMX files are built for AVX512F/BW/VL/DQ and AVX512-BF16 too
    // (TESSERA_ISA_AMX): every CPU with AMX has them, but check, as for
    // every other level.
    if (!f.amx_tile || !f.amx_bf16 || !CpuHasAvx512Bf16()) return false;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

bool AmxInt8Available() { return AmxAvailable() && Host().amx_int8 && Host().avx512_vnni; }

}  // namespace tessera::cpu
