// Quantization and dequantization against ggml's reference functions: the
// committed vectors of tests/data/quant (tools/quant-vectors/gen.py) hold
// ggml's quantized bytes and dequantized floats for 16 rows of 512 inputs.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/quant/quant.h"
#include "gtest/gtest.h"

namespace tessera::quant {
namespace {

const std::string kDir = std::string(TESSERA_SOURCE_DIR) + "/tests/data/quant/";

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct Vectors {
  int64_t rows = 0, cols = 0;
  std::vector<float> input;
};

Vectors LoadInput() {
  Vectors v;
  const std::vector<uint8_t> bytes = ReadAll(kDir + "input.f32");
  if (bytes.size() < 8) return v;
  uint32_t rows, cols;
  std::memcpy(&rows, bytes.data(), 4);
  std::memcpy(&cols, bytes.data() + 4, 4);
  if (bytes.size() != 8 + static_cast<size_t>(rows) * cols * 4) return v;
  v.rows = rows;
  v.cols = cols;
  v.input.resize(static_cast<size_t>(rows) * cols);
  std::memcpy(v.input.data(), bytes.data() + 8, v.input.size() * 4);
  return v;
}

std::vector<float> AsFloats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

class QuantVectors : public ::testing::TestWithParam<QuantType> {
 protected:
  void SetUp() override {
    v_ = LoadInput();
    ASSERT_EQ(v_.rows, 16);
    ASSERT_EQ(v_.cols, 512);
    name_ = std::string(Info(GetParam()).name);
    q_ = ReadAll(kDir + name_ + ".q");
    deq_ = AsFloats(ReadAll(kDir + name_ + ".deq"));
    row_bytes_ = RowBytes(GetParam(), v_.cols);
    ASSERT_EQ(q_.size(), static_cast<size_t>(row_bytes_ * v_.rows));
    ASSERT_EQ(deq_.size(), v_.input.size());
  }
  Vectors v_;
  std::string name_;
  std::vector<uint8_t> q_;
  std::vector<float> deq_;
  int64_t row_bytes_ = 0;
};

TEST_P(QuantVectors, DequantizeIsBitExact) {
  std::vector<float> out(v_.cols);
  for (int64_t r = 0; r < v_.rows; ++r) {
    DequantizeRow(GetParam(), q_.data() + r * row_bytes_, out.data(), v_.cols);
    const float* want = deq_.data() + r * v_.cols;
    EXPECT_EQ(std::memcmp(out.data(), want, v_.cols * sizeof(float)), 0) << name_ << " row " << r;
  }
}

// The types Tessera writes (CanQuantize) as well as reads.
class QuantizerVectors : public QuantVectors {};

TEST_P(QuantizerVectors, QuantizeIsByteExact) {
  std::vector<uint8_t> out(row_bytes_);
  for (int64_t r = 0; r < v_.rows; ++r) {
    std::memset(out.data(), 0xA5, out.size());
    QuantizeRow(GetParam(), v_.input.data() + r * v_.cols, out.data(), v_.cols);
    const uint8_t* want = q_.data() + r * row_bytes_;
    int64_t first_diff = -1;
    for (int64_t i = 0; i < row_bytes_ && first_diff < 0; ++i) {
      if (out[i] != want[i]) first_diff = i;
    }
    EXPECT_EQ(first_diff, -1) << name_ << " row " << r << ": first differing byte " << first_diff
                              << " (block " << first_diff / Info(GetParam()).block_bytes << ")";
  }
}

// The round trip loses no more than the type allows: an error bound that
// the vectors' own rows meet, checked independently of ggml's bytes.
TEST_P(QuantizerVectors, RoundTripErrorMatchesGgml) {
  std::vector<uint8_t> blocks(row_bytes_);
  std::vector<float> out(v_.cols);
  double ours = 0, theirs = 0;
  for (int64_t r = 0; r < v_.rows; ++r) {
    const float* x = v_.input.data() + r * v_.cols;
    QuantizeRow(GetParam(), x, blocks.data(), v_.cols);
    DequantizeRow(GetParam(), blocks.data(), out.data(), v_.cols);
    for (int64_t i = 0; i < v_.cols; ++i) {
      ours += std::pow(static_cast<double>(out[i]) - x[i], 2);
      theirs += std::pow(static_cast<double>(deq_[r * v_.cols + i]) - x[i], 2);
    }
  }
  EXPECT_LE(ours, theirs * 1.02 + 1e-30) << name_;
  EXPECT_GT(theirs, 0.0) << name_;  // the inputs are not all exactly representable
}

// The integer form the kernels take (UnpackAffine): a·q + b, with a and b
// the exact products, gives ggml's dequantized values (== so that a zero
// of either sign matches).
TEST_P(QuantVectors, AffineFormGivesTheDequantizedValues) {
  const AffineForm form = AffineFormOf(GetParam());
  const int64_t groups = v_.cols / form.group, supers = groups / form.groups_per_super;
  std::vector<uint8_t> q(v_.cols);
  std::vector<int8_t> sa(groups), sb(groups);
  std::vector<uint16_t> A(supers), B(supers);
  const AffineRow out{q.data(), sa.data(), sb.data(), A.data(), B.data()};
  for (int64_t r = 0; r < v_.rows; ++r) {
    UnpackAffine(GetParam(), q_.data() + r * row_bytes_, v_.cols, out);
    for (int64_t c = 0; c < v_.cols; ++c) {
      const int64_t g = c / form.group, s = g / form.groups_per_super;
      const float a = HalfToFloat(A[s]) * static_cast<float>(sa[g]);
      const float b = HalfToFloat(B[s]) * static_cast<float>(sb[g]);
      const int value = (form.values != nullptr ? form.values[q[c]]
                         : form.signed_q        ? static_cast<int8_t>(q[c])
                                                : q[c]) -
                        form.zero;
      const volatile float product = a * static_cast<float>(value);  // no fused multiply-add
      const float w = product + b;
      ASSERT_EQ(w, deq_[r * v_.cols + c]) << name_ << " row " << r << " col " << c;
    }
  }
}

TEST(QuantInfo, NamesAndIds) {
  EXPECT_EQ(QuantTypeFromName("Q4_K"), QuantType::kQ4_K);
  EXPECT_EQ(QuantTypeFromName("q8_0"), QuantType::kQ8_0);
  EXPECT_EQ(QuantTypeFromName("q4_k_m"), std::nullopt);
  EXPECT_EQ(QuantTypeFromGgml(14), QuantType::kQ6_K);
  EXPECT_EQ(QuantTypeFromGgml(1), std::nullopt);
  EXPECT_EQ(RowBytes(QuantType::kQ4_K, 512), 288);
  EXPECT_EQ(RowBytes(QuantType::kQ5_0, 64), 44);
  EXPECT_EQ(QuantTypeFromGgml(11), QuantType::kQ3_K);
  EXPECT_EQ(QuantTypeFromGgml(23), QuantType::kIQ4_XS);
  EXPECT_EQ(QuantTypeFromName("IQ4_NL"), QuantType::kIQ4_NL);
  EXPECT_EQ(RowBytes(QuantType::kQ2_K, 512), 168);
  EXPECT_EQ(RowBytes(QuantType::kIQ4_XS, 512), 272);
  EXPECT_TRUE(CanQuantize(QuantType::kQ6_K));
  EXPECT_FALSE(CanQuantize(QuantType::kQ3_K));
}

std::string TypeName(const ::testing::TestParamInfo<QuantType>& info) {
  return std::string(Info(info.param).name);
}

INSTANTIATE_TEST_SUITE_P(WrittenTypes, QuantizerVectors,
                         ::testing::Values(QuantType::kQ4_0, QuantType::kQ4_1, QuantType::kQ5_0,
                                           QuantType::kQ5_1, QuantType::kQ8_0, QuantType::kQ4_K,
                                           QuantType::kQ5_K, QuantType::kQ6_K),
                         TypeName);

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantVectors,
                         ::testing::Values(QuantType::kQ4_0, QuantType::kQ4_1, QuantType::kQ5_0,
                                           QuantType::kQ5_1, QuantType::kQ8_0, QuantType::kQ4_K,
                                           QuantType::kQ5_K, QuantType::kQ6_K, QuantType::kQ2_K,
                                           QuantType::kQ3_K, QuantType::kIQ4_NL,
                                           QuantType::kIQ4_XS),
                         TypeName);

}  // namespace
}  // namespace tessera::quant
