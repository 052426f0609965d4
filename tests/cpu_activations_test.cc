// The vector activation kernels of every path this CPU can run (SwiGlu, Gelu,
// GeGlu on AVX2 and AVX-512) against double-precision references, on random
// values, lengths with partial vectors and non-finite inputs; and the
// backend's ops equal to the kernel of its selected path.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/kernels.h"
#include "gtest/gtest.h"

namespace tessera::cpu {
namespace {

using GluFn = void (*)(const float*, const float*, int64_t, float*);
using InPlaceFn = void (*)(float*, int64_t);

struct Path {
  std::string name;
  bool available;
  GluFn swiglu;
  InPlaceFn gelu;
  GluFn geglu;
};

std::vector<Path> Paths() {
  return {{"avx2", CpuHasAvx2Kernels(), SwiGluAvx2, GeluAvx2, GeGluAvx2},
          {"avx512", CpuHasAvx512Kernels(), SwiGluAvx512, GeluAvx512, GeGluAvx512}};
}

double SiluRef(double g) { return g / (1 + std::exp(-g)); }
double GeluRef(double v) {
  return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
}

// The scalar formulas in float, which define the non-finite cases.
float SiluScalar(float g) { return g / (1.0f + std::exp(-g)); }
float GeluScalar(float v) {
  return 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

// Random gates (wide spread) followed by extremes, 211 values: 26 full AVX2
// vectors and a partial one, 13 AVX-512 vectors and a partial one.
std::vector<float> Inputs() {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(192);
  for (auto& x : v) x = dist(rng);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-1e30f, -100.0f, -90.0f, -88.5f, 88.5f, 90.0f, 1e30f, -inf, inf,
                  std::nanf(""), 0.0f, -0.0f, 1e-30f, 1e-40f, -20.0f, 20.0f, 3.0f, -3.0f, 88.0f}) {
    v.push_back(x);
  }
  return v;
}

// Relative tolerances: silu's e^-g has the polynomial's 2e-7 plus rounding;
// gelu's argument 2y is itself rounded, which |2y| amplifies in e^-2y before
// the result becomes negligible.
constexpr double kSiluTol = 1e-6;
constexpr double kGeluTol = 4e-6;

void ExpectLike(float got, float scalar, double ref, float in, double tol, const char* what) {
  if (!std::isfinite(in)) {
    EXPECT_EQ(std::isnan(got), std::isnan(scalar)) << what << "(" << in << ")";
    if (!std::isnan(scalar)) {
      EXPECT_EQ(got, scalar) << what << "(" << in << ")";
    }
    return;
  }
  // Relative to the result, or to 1e-6 where it is smaller: in the far tails
  // the result is negligible, and the double reference itself cancels to 0.
  EXPECT_NEAR(got, ref, tol * std::max(std::abs(ref), 1e-6)) << what << "(" << in << ")";
}

TEST(ActivationKernels, EveryPathMatchesTheReference) {
  const std::vector<float> x = Inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> up(x.size());
  for (size_t i = 0; i < up.size(); ++i) up[i] = 0.25f + 0.01f * static_cast<float>(i % 13);
  int ran = 0;
  for (const Path& p : Paths()) {
    if (!p.available) continue;
    SCOPED_TRACE(p.name);
    ++ran;
    std::vector<float> swiglu(x.size()), gelu = x, geglu(x.size());
    p.swiglu(x.data(), up.data(), n, swiglu.data());
    p.gelu(gelu.data(), n);
    p.geglu(x.data(), up.data(), n, geglu.data());
    for (size_t i = 0; i < x.size(); ++i) {
      ExpectLike(swiglu[i], SiluScalar(x[i]) * up[i], SiluRef(x[i]) * up[i], x[i], kSiluTol, "swiglu");
      ExpectLike(gelu[i], GeluScalar(x[i]), GeluRef(x[i]), x[i], kGeluTol, "gelu");
      ExpectLike(geglu[i], GeluScalar(x[i]) * up[i], GeluRef(x[i]) * up[i], x[i], kGeluTol, "geglu");
    }
  }
  if (ran == 0) GTEST_SKIP() << "this CPU runs neither AVX2 nor AVX-512 kernels";
}

// Every length from 0 to 40 writes exactly [0, count): the tail lanes past
// count stay untouched.
TEST(ActivationKernels, TailsWriteOnlyTheirLength) {
  const std::vector<float> x = Inputs();
  for (const Path& p : Paths()) {
    if (!p.available) continue;
    SCOPED_TRACE(p.name);
    for (int64_t count = 0; count <= 40; ++count) {
      std::vector<float> out(48, 7.0f), in_place(x.begin(), x.begin() + 48);
      p.swiglu(x.data(), x.data(), count, out.data());
      p.gelu(in_place.data(), count);
      for (int64_t i = count; i < 48; ++i) {
        EXPECT_EQ(out[i], 7.0f) << count;
        EXPECT_EQ(in_place[i], x[i]) << count;
      }
    }
  }
}

// The backend's ops run the selected path's kernel, bit for bit, split over
// threads.
TEST(ActivationKernels, BackendRunsTheSelectedPath) {
  const CpuKernelPath path = SelectedKernelPath();
  if (path == CpuKernelPath::kPortable) GTEST_SKIP() << "portable path: scalar formulas";
  const Path p = Paths()[path == CpuKernelPath::kAvx2 ? 0 : 1];  // a copy: Paths() is a temporary
  std::mt19937_64 rng(9);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> g(100003), u(g.size());
  for (auto& v : g) v = dist(rng);
  for (auto& v : u) v = dist(rng);
  const int64_t n = static_cast<int64_t>(g.size());
  CpuBackend backend(2);
  std::vector<float> want(g.size()), got(g.size());
  p.swiglu(g.data(), u.data(), n, want.data());
  backend.SwiGlu(g.data(), u.data(), n, got.data());
  EXPECT_EQ(want, got);
  p.geglu(g.data(), u.data(), n, want.data());
  backend.GeGlu(g.data(), u.data(), n, got.data());
  EXPECT_EQ(want, got);
  want = g;
  got = g;
  p.gelu(want.data(), n);
  backend.Gelu(got.data(), n);
  EXPECT_EQ(want, got);
}

}  // namespace
}  // namespace tessera::cpu
