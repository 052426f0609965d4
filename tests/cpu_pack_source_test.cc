// Weights packed from their file (pread into a staging buffer) equal those
// packed through the mapping, for the f32 panels and the bf16 (AMX) layout,
// with row counts off the panel size, inputs off the chunk size (and off
// the AVX-512 transpose's 16), and enough rows for several staged groups
// per thread; and both hold the matrix.
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "engine/backend/cpu/kernels.h"
#include "engine/model/float16.h"
#include "engine/util/mapped_file.h"
#include "engine/util/thread_pool.h"
#include "gtest/gtest.h"
#include "tests/testing/hf_folder.h"

namespace tessera::cpu {
namespace {

struct Case {
  DType dtype;
  int64_t rows, cols;
};

// A file of `lead` bytes of padding, then the matrix.
std::vector<uint8_t> MatrixBytes(const Case& c, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint8_t> out(static_cast<size_t>(c.rows * c.cols) * DTypeSize(c.dtype));
  for (int64_t i = 0; i < c.rows * c.cols; ++i) {
    const float v = dist(rng);
    if (c.dtype == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = c.dtype == DType::kF16 ? FloatToHalf(v) : FloatToBf16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

class PackFromFile : public ::testing::TestWithParam<Case> {};

TEST_P(PackFromFile, EqualsPackingThroughTheMapping) {
  const Case c = GetParam();
  const std::vector<uint8_t> matrix = MatrixBytes(c, c.rows * 31 + c.cols);
  constexpr size_t kLead = 4099;  // an offset that is not page-aligned
  testing::TempDir dir;
  const std::string path = dir / "w.bin";
  {
    std::ofstream out(path, std::ios::binary);
    const std::vector<char> lead(kLead, 'x');
    out.write(lead.data(), kLead);
    out.write(reinterpret_cast<const char*>(matrix.data()),
              static_cast<std::streamsize>(matrix.size()));
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const FileRange source{file->get(), kLead};
  ThreadPool pool(2);
  for (const bool amx : {false, true}) {
    SCOPED_TRACE(amx ? "amx layout" : "panels");
    const size_t bytes =
        amx ? AmxPackedBytes(c.rows, c.cols) : PackedWeightBytes(c.dtype, c.rows, c.cols);
    std::vector<uint8_t> in_memory(bytes, 0x5A), from_file(bytes, 0xA5);
    const DType packed_type = amx ? DType::kBF16 : c.dtype;
    const WeightLayout layout = amx ? WeightLayout::kAmx : WeightLayout::kPanels;
    const Weight a{in_memory.data(), packed_type, c.rows, c.cols, layout};
    const Weight b{from_file.data(), packed_type, c.rows, c.cols, layout};
    if (amx) {
      PackWeightAmx(matrix.data(), c.dtype, a, pool);
      PackWeightAmx(matrix.data() + 1, c.dtype, b, pool, source);  // the file is what is read
    } else {
      PackWeight(matrix.data(), a, pool);
      PackWeight(matrix.data() + 1, b, pool, source);
    }
    ASSERT_EQ(in_memory, from_file);
    // And the layout holds the matrix, element by element through WeightAt
    // (full panels go through the AVX-512 transpose where the CPU has it).
    for (int64_t i = 0; i < c.rows * c.cols; ++i) {
      const float want =
          amx ? Bf16ToFloat(FloatToBf16(WeightAt(
                    Weight{matrix.data(), c.dtype, c.rows, c.cols, WeightLayout::kRowMajor}, i)))
              : WeightAt(Weight{matrix.data(), c.dtype, c.rows, c.cols, WeightLayout::kRowMajor},
                         i);
      ASSERT_EQ(WeightAt(b, i), want) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PackFromFile,
                         ::testing::Values(Case{DType::kBF16, 300, 1000}, Case{DType::kF16, 37, 70},
                                           Case{DType::kF32, 129, 64},
                                           Case{DType::kBF16, 16, 4096}, Case{DType::kF32, 48, 70},
                                           Case{DType::kBF16, 40, 64}));

}  // namespace
}  // namespace tessera::cpu
