// GGUF reader/writer round trips, the real stories260K file, float16
// conversions and the random-model writer. Corrupt inputs are covered in
// gguf_corrupt_test.cc.
#include "engine/model/gguf.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "engine/model/float16.h"
#include "engine/model/model_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

const std::string kStories = std::string(TESSERA_SOURCE_DIR) + "/models/stories260K.gguf";

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

GgufValue Scalar(GgufValueType t, decltype(GgufValue::value) v) {
  GgufValue out;
  out.type = t;
  out.value = std::move(v);
  return out;
}

GgufValue Array(GgufValueType elem, decltype(GgufValue::value) v) {
  GgufValue out;
  out.type = GgufValueType::kArray;
  out.array_type = elem;
  out.value = std::move(v);
  return out;
}

// Every scalar type and every array element type, with edge values.
std::vector<std::pair<std::string, GgufValue>> AllValueTypes() {
  using T = GgufValueType;
  return {
      {"s.u8", Scalar(T::kUint8, uint64_t{255})},
      {"s.i8", Scalar(T::kInt8, int64_t{-128})},
      {"s.u16", Scalar(T::kUint16, uint64_t{65535})},
      {"s.i16", Scalar(T::kInt16, int64_t{-32768})},
      {"s.u32", Scalar(T::kUint32, uint64_t{4000000000u})},
      {"s.i32", Scalar(T::kInt32, int64_t{-2000000000})},
      {"s.f32", Scalar(T::kFloat32, 1.5)},
      {"s.bool", Scalar(T::kBool, true)},
      {"s.str", Scalar(T::kString, std::string("h\xc3\xa9llo"))},
      {"s.u64", Scalar(T::kUint64, uint64_t{0x8000000000000005ull})},
      {"s.i64", Scalar(T::kInt64, int64_t{-(int64_t{1} << 62)})},
      {"s.f64", Scalar(T::kFloat64, 3.141592653589793)},
      {"a.u8", Array(T::kUint8, std::vector<uint64_t>{0, 1, 255})},
      {"a.i8", Array(T::kInt8, std::vector<int64_t>{-128, 0, 127})},
      {"a.u16", Array(T::kUint16, std::vector<uint64_t>{65535})},
      {"a.i16", Array(T::kInt16, std::vector<int64_t>{-32768, 32767})},
      {"a.u32", Array(T::kUint32, std::vector<uint64_t>{1, 4294967295u})},
      {"a.i32", Array(T::kInt32, std::vector<int64_t>{-5, 7})},
      {"a.f32", Array(T::kFloat32, std::vector<double>{0.5, -2.0, 1e-3f})},
      {"a.bool", Array(T::kBool, std::vector<bool>{true, false, true})},
      {"a.str", Array(T::kString, std::vector<std::string>{"a", "", "\xc3\xbc"})},
      {"a.u64", Array(T::kUint64, std::vector<uint64_t>{~uint64_t{0}})},
      {"a.i64", Array(T::kInt64, std::vector<int64_t>{std::numeric_limits<int64_t>::min()})},
      {"a.f64", Array(T::kFloat64, std::vector<double>{1e300, -0.25})},
      {"a.empty", Array(T::kUint32, std::vector<uint64_t>{})},
  };
}

void ExpectSameValue(const GgufValue& a, const GgufValue& b, const std::string& key) {
  EXPECT_EQ(a.type, b.type) << key;
  if (a.type == GgufValueType::kArray) {
    EXPECT_EQ(a.array_type, b.array_type) << key;
  }
  EXPECT_TRUE(a.value == b.value) << key;
}

TEST(Float16Test, HalfRoundTripsExhaustively) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (is_nan) {
      ASSERT_TRUE(std::isnan(f)) << h;
      // Quiet NaNs survive bit-exactly; signalling ones come back quieted.
      ASSERT_EQ(FloatToHalf(f), h | 0x200) << h;
    } else {
      ASSERT_EQ(FloatToHalf(f), h) << h;
    }
  }
}

TEST(Float16Test, HalfKnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie with odd 65504 goes up to inf
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie rounds to even 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 ulp tie -> even 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
}

// Nearest-even reference: all non-negative finite halves are increasing in
// their bit patterns, so binary-search the neighbours of |f|.
uint16_t ReferenceHalf(float f) {
  static const std::vector<double> halves = [] {
    std::vector<double> v;
    for (uint32_t h = 0; h <= 0x7bff; ++h) v.push_back(HalfToFloat(static_cast<uint16_t>(h)));
    return v;
  }();
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  const auto hi = std::lower_bound(halves.begin(), halves.end(), a);
  if (hi != halves.end() && *hi == a) return sign | static_cast<uint16_t>(hi - halves.begin());
  const uint16_t up = static_cast<uint16_t>(hi - halves.begin());  // < 0x7c00 here
  const double up_value = up <= 0x7bff ? halves[up] : 65536.0;
  const uint16_t down = up - 1;
  const double d_down = a - halves[down], d_up = up_value - a;
  if (d_down < d_up || (d_down == d_up && (down & 1) == 0)) return sign | down;
  return sign | up;
}

TEST(Float16Test, HalfMatchesReferenceOnFloatSweep) {
  // Every 997th float bit pattern (~4.3M values) plus dense ranges around the
  // overflow and subnormal boundaries.
  auto check = [](uint32_t bits) {
    if (::testing::Test::HasFailure()) return;  // report only the first mismatch
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f) || std::isinf(f)) return;
    ASSERT_EQ(FloatToHalf(f), ReferenceHalf(f)) << std::hex << bits;
  };
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 997) check(static_cast<uint32_t>(bits));
  for (uint32_t bits = 0x477fe000; bits < 0x47800100; ++bits) check(bits);
  for (uint32_t bits = 0x33000000 - 4096; bits < 0x33000000 + 4096; ++bits) check(bits);
  for (uint32_t bits = 0x38800000 - 65536; bits < 0x38800000 + 65536; ++bits) check(bits);
}

TEST(Float16Test, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  // A NaN whose payload lives only in the low bits must not become inf.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::bit_cast<float>(0x7f800001u)))));
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      ASSERT_EQ(FloatToBf16(f), b);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f) || std::isinf(f)) continue;
    const uint32_t lo = bits & 0xffff0000u;
    const double lo_v = std::fabs(static_cast<double>(std::bit_cast<float>(lo)));
    const double hi_v = (lo & 0x7fffffffu) == 0x7f7f0000u
                            ? std::ldexp(1.0, 128)
                            : std::fabs(static_cast<double>(std::bit_cast<float>(lo + 0x10000)));
    const double a = std::fabs(static_cast<double>(f));
    const bool down = a - lo_v < hi_v - a || (a - lo_v == hi_v - a && ((lo >> 16) & 1) == 0);
    ASSERT_EQ(FloatToBf16(f), static_cast<uint16_t>((down ? lo : lo + 0x10000) >> 16))
        << std::hex << bits;
  }
}

TEST(GgufRoundTripTest, EveryValueTypeAndTensorType) {
  GgufWriter w;
  for (const auto& [k, v] : AllValueTypes()) w.SetValue(k, v);
  w.SetUint32("w.u32", 7);
  w.SetInt32("w.i32", -7);
  w.SetUint64("w.u64", 1ull << 40);
  w.SetFloat32("w.f32", 0.25f);
  w.SetBool("w.bool", false);
  w.SetString("w.str", "x");
  w.SetStringArray("w.strs", {"p", "q"});
  w.SetFloat32Array("w.f32s", {1.0f, -1.0f});
  w.SetInt32Array("w.i32s", {3, -4});
  w.SetUint32("w.u32", 8);  // replaces, does not duplicate
  const std::vector<float> f32 = {1, 2, 3, 4, 5, 6};
  const std::vector<uint16_t> f16 = {FloatToHalf(1), FloatToHalf(-2), 0, 1, 0x7bff};
  const std::vector<uint16_t> bf16 = {1, 2, 3, 4, 5, 6, 7, 8};
  w.AddTensor("t.f32", {3, 2}, GgmlType::kF32, Bytes(f32));
  w.AddTensor("t.f16", {5}, GgmlType::kF16, Bytes(f16));
  w.AddTensor("t.bf16", {2, 2, 2}, GgmlType::kBF16, Bytes(bf16));
  ASSERT_TRUE(w.Validate().ok());
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& g = **file;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.FindValue("general.alignment"), nullptr);
  EXPECT_EQ(g.metadata().size(), AllValueTypes().size() + 9);
  for (const auto& [k, v] : AllValueTypes()) {
    ASSERT_NE(g.FindValue(k), nullptr) << k;
    ExpectSameValue(*g.FindValue(k), v, k);
  }
  EXPECT_EQ(*g.GetUint("w.u32"), 8u);
  EXPECT_EQ(*g.GetInt("w.i32"), -7);
  EXPECT_EQ(*g.GetFloat("w.f32"), 0.25);
  EXPECT_EQ(*g.GetStringArray("w.strs"), (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ(*g.GetIntArray("w.i32s"), (std::vector<int64_t>{3, -4}));
  ASSERT_EQ(g.tensors().size(), 3u);
  struct Expect {
    const char* name;
    std::vector<uint64_t> dims;
    GgmlType type;
    std::vector<uint8_t> bytes;
  };
  for (const Expect& e : {Expect{"t.f32", {3, 2}, GgmlType::kF32, Bytes(f32)},
                          Expect{"t.f16", {5}, GgmlType::kF16, Bytes(f16)},
                          Expect{"t.bf16", {2, 2, 2}, GgmlType::kBF16, Bytes(bf16)}}) {
    const GgufTensorInfo* t = g.FindTensor(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->dims, e.dims);
    EXPECT_EQ(t->type, e.type);
    EXPECT_EQ(t->num_bytes, e.bytes.size());
    EXPECT_EQ(t->num_elements, e.bytes.size() / GgmlTypeSize(e.type));
    EXPECT_EQ(t->offset % 32, 0u);
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->num_bytes), e.bytes) << e.name;
  }
  EXPECT_EQ(g.FindTensor("missing"), nullptr);
}

TEST(GgufRoundTripTest, NonDefaultAlignmentIsWrittenAndHonoured) {
  GgufWriter w;
  w.AddTensor("a", {3}, GgmlType::kF32, std::vector<uint8_t>(12, 1));
  w.AddTensor("b", {1}, GgmlType::kF16, std::vector<uint8_t>(2, 2));
  w.AddTensor("c", {7}, GgmlType::kF32, std::vector<uint8_t>(28, 3));
  auto file = GgufFile::FromBytes(w.Serialize(256));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 256u);
  EXPECT_EQ(*(*file)->GetUint("general.alignment"), 256u);
  EXPECT_EQ((*file)->FindValue("general.alignment")->type, GgufValueType::kUint32);
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    EXPECT_EQ(t.offset % 256, 0u) << t.name;
    EXPECT_EQ((t.data - (*file)->tensors()[0].data) % 256, 0) << t.name;
  }
  EXPECT_EQ((*file)->FindTensor("c")->data[27], 3);
}

TEST(GgufRoundTripTest, NoTensorsAndNoMetadata) {
  auto file = GgufFile::FromBytes(GgufWriter().Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->tensors().empty());
  EXPECT_TRUE((*file)->metadata().empty());
}

TEST(GgufRoundTripTest, WriteFileStreamsAndOpenMaps) {
  GgufWriter w;
  w.SetString("general.architecture", "test");
  w.AddTensorStreamed("s", {4, 3}, GgmlType::kF32, [](uint8_t* out, size_t size) {
    for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(i);
    return absl::OkStatus();
  });
  const std::string path = testing::TempDir() + "/gguf_test_stream.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufTensorInfo* t = (*file)->FindTensor("s");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->num_bytes, 48u);
  for (size_t i = 0; i < 48; ++i) ASSERT_EQ(t->data[i], i);
  // The streamed file is byte-identical to the in-memory image.
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, w.Serialize());
  std::remove(path.c_str());
}

TEST(GgufRoundTripTest, WriteFileRejectsInconsistentInput) {
  const std::string path = testing::TempDir() + "/gguf_test_bad.gguf";
  GgufWriter dup;
  dup.AddTensor("x", {1}, GgmlType::kF32, std::vector<uint8_t>(4));
  dup.AddTensor("x", {1}, GgmlType::kF32, std::vector<uint8_t>(4));
  EXPECT_THAT(Msg(dup.WriteFile(path)), HasSubstr("duplicate tensor name 'x'"));
  GgufWriter size;
  size.AddTensor("x", {2}, GgmlType::kF32, std::vector<uint8_t>(4));
  EXPECT_THAT(Msg(size.WriteFile(path)), HasSubstr("expected 8"));
  EXPECT_THAT(Msg(GgufWriter().WriteFile(path, 48)), HasSubstr("alignment 48"));
  GgufWriter range;
  range.SetValue("k", Scalar(GgufValueType::kUint8, uint64_t{256}));
  EXPECT_THAT(Msg(range.WriteFile(path)), HasSubstr("out of range"));
  GgufWriter mismatch;
  mismatch.SetValue("k", Scalar(GgufValueType::kString, uint64_t{1}));
  EXPECT_THAT(Msg(mismatch.WriteFile(path)), HasSubstr("does not match"));
  GgufWriter empty;
  empty.SetUint32("", 1);
  EXPECT_THAT(Msg(empty.WriteFile(path)), HasSubstr("length 0"));
  GgufWriter failing;
  failing.AddTensorStreamed("f", {1}, GgmlType::kF32,
                            [](uint8_t*, size_t) { return absl::InternalError("boom"); });
  EXPECT_THAT(Msg(failing.WriteFile(path)), HasSubstr("boom"));
  EXPECT_FALSE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

std::unique_ptr<GgufFile> GetterFile() {
  GgufWriter w;
  for (const auto& [k, v] : AllValueTypes()) w.SetValue(k, v);
  w.SetValue("neg", Scalar(GgufValueType::kInt32, int64_t{-3}));
  w.SetValue("big", Scalar(GgufValueType::kUint64, ~uint64_t{0}));
  w.SetValue("a.big", Array(GgufValueType::kUint64, std::vector<uint64_t>{1, ~uint64_t{0}}));
  auto f = GgufFile::FromBytes(w.Serialize());
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(GgufGetterTest, IntegerConversionsAreRangeChecked) {
  auto g = GetterFile();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(*g->GetUint("s.u8"), 255u);
  EXPECT_EQ(*g->GetUint("s.u64"), 0x8000000000000005ull);
  EXPECT_EQ(*g->GetInt("s.i8"), -128);
  EXPECT_EQ(*g->GetInt("s.u32"), 4000000000);
  EXPECT_FALSE(g->GetUint("s.i32").ok());  // negative as unsigned
  EXPECT_THAT(Msg(g->GetUint("neg").status()), HasSubstr("'neg' value -3"));
  EXPECT_THAT(Msg(g->GetInt("big").status()), HasSubstr("does not fit in int64"));
  EXPECT_THAT(Msg(g->GetUint("s.str").status()), HasSubstr("holds a string"));
  EXPECT_THAT(Msg(g->GetUint("s.f32").status()), HasSubstr("holds a float32"));
  EXPECT_THAT(Msg(g->GetInt("s.bool").status()), HasSubstr("holds a bool"));
  EXPECT_THAT(Msg(g->GetUint("a.u8").status()), HasSubstr("array of uint8"));
  EXPECT_EQ(g->GetUint("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(g->GetUint("s.str").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufGetterTest, FloatBoolStringAndDefaults) {
  auto g = GetterFile();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(*g->GetFloat("s.f32"), 1.5);
  EXPECT_EQ(*g->GetFloat("s.f64"), 3.141592653589793);
  EXPECT_EQ(*g->GetFloat("s.i16"), -32768.0);  // any numeric type
  EXPECT_EQ(*g->GetFloat("s.u16"), 65535.0);
  EXPECT_FALSE(g->GetFloat("s.bool").ok());
  EXPECT_FALSE(g->GetFloat("s.str").ok());
  EXPECT_EQ(*g->GetBool("s.bool"), true);
  EXPECT_FALSE(g->GetBool("s.u8").ok());
  EXPECT_EQ(*g->GetString("s.str"), "h\xc3\xa9llo");
  EXPECT_FALSE(g->GetString("a.str").ok());
  EXPECT_EQ(*g->GetUintOr("absent", 9), 9u);
  EXPECT_EQ(*g->GetUintOr("s.u16", 9), 65535u);
  EXPECT_FALSE(g->GetUintOr("s.str", 9).ok());  // present with the wrong type
  EXPECT_EQ(*g->GetFloatOr("absent", 0.5), 0.5);
  EXPECT_FALSE(g->GetFloatOr("s.str", 0.5).ok());
  EXPECT_EQ(*g->GetBoolOr("absent", true), true);
  EXPECT_FALSE(g->GetBoolOr("s.u8", true).ok());
  EXPECT_EQ(*g->GetStringOr("absent", "d"), "d");
  EXPECT_EQ(*g->GetStringOr("s.str", "d"), "h\xc3\xa9llo");
  EXPECT_FALSE(g->GetStringOr("s.u8", "d").ok());
}

TEST(GgufGetterTest, ArrayConversions) {
  auto g = GetterFile();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(*g->GetStringArray("a.str"), (std::vector<std::string>{"a", "", "\xc3\xbc"}));
  EXPECT_FALSE(g->GetStringArray("a.u8").ok());
  EXPECT_FALSE(g->GetStringArray("s.str").ok());
  EXPECT_EQ(*g->GetIntArray("a.u8"), (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(*g->GetIntArray("a.i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_THAT(Msg(g->GetIntArray("a.big").status()), HasSubstr("(element 1)"));
  EXPECT_FALSE(g->GetIntArray("a.f32").ok());
  EXPECT_FALSE(g->GetIntArray("a.str").ok());
  EXPECT_EQ(*g->GetFloatArray("a.f32"), (std::vector<double>{0.5, -2.0, 1e-3f}));
  EXPECT_EQ(*g->GetFloatArray("a.i8"), (std::vector<double>{-128, 0, 127}));
  EXPECT_EQ(*g->GetFloatArray("a.u32"), (std::vector<double>{1, 4294967295.0}));
  EXPECT_FALSE(g->GetFloatArray("a.bool").ok());
  EXPECT_TRUE(g->GetIntArray("a.empty")->empty());
  EXPECT_EQ(g->GetFloatArray("absent").status().code(), absl::StatusCode::kNotFound);
}

TEST(GgufFileTest, ReadsStories260K) {
  auto file = GgufFile::Open(kStories);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& g = **file;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetUint("llama.embedding_length"), 64u);
  EXPECT_EQ(*g.GetUint("llama.block_count"), 5u);
  EXPECT_EQ(*g.GetUint("llama.attention.head_count"), 8u);
  EXPECT_EQ(*g.GetUint("llama.attention.head_count_kv"), 4u);
  EXPECT_GT(*g.GetFloat("llama.attention.layer_norm_rms_epsilon"), 0.0);
  EXPECT_EQ(g.GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(g.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(g.GetIntArray("tokenizer.ggml.token_type")->size(), 512u);
  const GgufTensorInfo* embd = g.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(embd->type, GgmlType::kF32);
  EXPECT_EQ(embd->num_elements, 64u * 512u);
  EXPECT_EQ(g.tensors().size(), 48u);  // 1 + 5 layers * 9 + output_norm + output
  ASSERT_NE(g.FindTensor("blk.4.ffn_down.weight"), nullptr);
  // Sanity of the mapped data: embeddings are finite and not all zero.
  const float* e = reinterpret_cast<const float*>(embd->data);
  double sum_sq = 0;
  for (uint64_t i = 0; i < embd->num_elements; ++i) {
    ASSERT_TRUE(std::isfinite(e[i]));
    sum_sq += double{e[i]} * e[i];
  }
  EXPECT_GT(sum_sq, 0.0);
}

TEST(GgufFileTest, OpenReportsMissingAndNonRegularFiles) {
  auto missing = GgufFile::Open(testing::TempDir() + "/definitely-missing.gguf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(missing.status()), HasSubstr("definitely-missing.gguf"));
  EXPECT_THAT(Msg(GgufFile::Open(testing::TempDir()).status()), HasSubstr("not a regular file"));
  const std::string empty = testing::TempDir() + "/gguf_test_empty.gguf";
  std::ofstream(empty).close();
  EXPECT_THAT(Msg(GgufFile::Open(empty).status()), HasSubstr("empty"));
  std::remove(empty.c_str());
  EXPECT_FALSE(GgufFile::FromBytes({}).ok());
}

}  // namespace
}  // namespace tessera
