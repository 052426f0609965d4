// Safetensors and shard-index readers: well-formed files parse to the right
// views; every malformed header is refused with a message naming the fault.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "engine/format/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// 8-byte length, the header text, then `data_bytes` bytes valued 0, 1, 2...
std::vector<uint8_t> Image(const std::string& header, size_t data_bytes,
                           std::optional<uint64_t> length = std::nullopt) {
  std::vector<uint8_t> out(8);
  const uint64_t n = length.value_or(header.size());
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i));
  return out;
}

TEST(Safetensors, ParsesTensorsMetadataAndData) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[8,20]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}   )";
  auto f = SafetensorsFile::FromBytes(Image(h, 20));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  const SafetensorsTensor* b = (*f)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(b->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(b->num_elements, 6u);
  EXPECT_EQ(b->data[0], 8);  // data byte 8 holds the value 8
  EXPECT_EQ((*f)->Find("a")->data[0], 0);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->Find("c"), nullptr);
}

TEST(Safetensors, AcceptsScalarsAndEmptyTensors) {
  const std::string h = R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                        R"("e":{"dtype":"F16","shape":[0,4],"data_offsets":[8,8]}})";
  auto f = SafetensorsFile::FromBytes(Image(h, 8));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->Find("s")->num_elements, 1u);
  EXPECT_EQ((*f)->Find("e")->num_elements, 0u);
}

TEST(Safetensors, AcceptsAHeaderWithNoTensors) {
  auto f = SafetensorsFile::FromBytes(Image("{}", 0));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->tensors().empty());
}

struct BadCase {
  const char* name;
  std::vector<uint8_t> bytes;
  const char* error;
};

std::string One(const std::string& entry) { return R"({"t":)" + entry + "}"; }

std::vector<BadCase> BadCases() {
  const std::string ok = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<uint8_t> short_file = {1, 2, 3};
  std::string deep(100, '[');
  deep += std::string(100, ']');
  return {
      {"Empty", {}, "too short"},
      {"ShorterThanLength", short_file, "too short"},
      {"LengthPastEnd", Image("{}", 0, uint64_t{50}), "exceeds the 2 bytes"},
      {"HugeLength", Image("{}", 0, uint64_t{1} << 40), "exceeds the limit"},
      {"LengthMaxUint", Image("{}", 0, ~uint64_t{0}), "exceeds the limit"},
      {"ZeroLength", Image("", 0), "does not start with a JSON object"},
      {"NotAnObject", Image("[1,2]", 0), "does not start with a JSON object"},
      {"InvalidJson", Image(R"({"t":{"dtype":"F32",)", 0), "invalid JSON"},
      {"TrailingGarbage", Image(R"({} x)", 0), "invalid JSON"},
      {"InvalidUtf8", Image("{\"\xff\xfe\":1}", 0), "invalid JSON"},
      {"TooDeep", Image(R"({"a":)" + deep + "}", 0), "nesting deeper"},
      {"DuplicateTensor", Image(R"({"t":)" + ok + R"(,"t":)" + ok + "}", 8), "duplicate key \"t\""},
      {"DuplicateField",
       Image(One(R"({"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]})"), 8),
       "duplicate key \"dtype\""},
      {"UnknownDtype", Image(One(R"({"dtype":"F128","shape":[2],"data_offsets":[0,8]})"), 8),
       "unknown dtype \"F128\""},
      {"DtypeNotString", Image(One(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"), 8),
       "\"dtype\" is not a string"},
      {"ShapeNotArray", Image(One(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), 8),
       "\"shape\" is not an array"},
      {"NegativeDim", Image(One(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), 8),
       "not a non-negative integer"},
      {"FractionalDim", Image(One(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,8]})"), 8),
       "not a non-negative integer"},
      {"StringDim", Image(One(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), 8),
       "not a non-negative integer"},
      {"TooManyDims",
       Image(One(R"({"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]})"), 1),
       "dims (at most 8)"},
      {"ElementCountOverflow",
       Image(One(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]})"), 1),
       "overflows 64 bits"},
      {"ByteSizeOverflow",
       Image(One(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,1]})"), 1),
       "byte size overflows"},
      {"ShapeRangeMismatch", Image(One(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), 8),
       "need 12 bytes but data_offsets [0, 8] span 8"},
      {"EndBeforeBegin", Image(One(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"), 8),
       "is before begin"},
      {"OffsetsThreeEntries",
       Image(One(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,9]})"), 8),
       "two non-negative integers"},
      {"OffsetFloat", Image(One(R"({"dtype":"F32","shape":[2],"data_offsets":[0.0,8]})"), 8),
       "two non-negative integers"},
      {"OffsetNegative", Image(One(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), 8),
       "two non-negative integers"},
      {"OffsetHuge",
       Image(
           One(R"({"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,18446744073709551616]})"),
           1),
       "two non-negative integers"},
      {"OffsetsPastData", Image(One(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"), 8),
       "truncated?"},
      {"Overlap",
       Image(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           12),
       "overlap"},
      {"SameRange",
       Image(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           8),
       "overlap"},
      {"GapBetween",
       Image(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
           12),
       "data bytes [4, 8) belong to no tensor"},
      {"GapAtStart", Image(One(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), 8),
       "data bytes [0, 4) belong to no tensor"},
      {"TrailingBytes", Image(One(ok), 12), "data bytes [8, 12) belong to no tensor"},
      {"MissingOffsets", Image(One(R"({"dtype":"F32","shape":[2]})"), 8),
       "missing field \"data_offsets\""},
      {"MissingShape", Image(One(R"({"dtype":"F32","data_offsets":[0,8]})"), 8),
       "missing field \"shape\""},
      {"ExtraField", Image(One(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})"), 8),
       "unexpected field \"x\""},
      {"EntryNotObject", Image(One("[1]"), 0), "entry is not an object"},
      {"EmptyName", Image(R"({"":)" + ok + "}", 8), "empty name"},
      {"MetadataNotObject", Image(R"({"__metadata__":[1]})", 0),
       "\"__metadata__\" is not an object"},
      {"MetadataValueNotString", Image(R"({"__metadata__":{"format":1}})", 0), "is not a string"},
  };
}

class SafetensorsBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(SafetensorsBad, IsRefused) {
  auto f = SafetensorsFile::FromBytes(GetParam().bytes);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(Headers, SafetensorsBad, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ShardIndex, ParsesAValidIndex) {
  auto idx = ParseShardIndex(
      R"({"metadata":{"total_size":12},"weight_map":{"a":"model-00002-of-00002.safetensors",)"
      R"("b":"model-00001-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}})");
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->shards, (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                   "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(idx->weight_map.at("a"), "model-00002-of-00002.safetensors");
}

struct BadIndex {
  const char* name;
  const char* json;
  const char* error;
};

class ShardIndexBad : public ::testing::TestWithParam<BadIndex> {};

TEST_P(ShardIndexBad, IsRefused) {
  auto idx = ParseShardIndex(GetParam().json);
  ASSERT_FALSE(idx.ok());
  EXPECT_THAT(std::string(idx.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Index, ShardIndexBad,
    ::testing::Values(
        BadIndex{"NoWeightMap", R"({"metadata":{}})", "no \"weight_map\""},
        BadIndex{"WeightMapNotObject", R"({"weight_map":[]})", "no \"weight_map\""},
        BadIndex{"EmptyWeightMap", R"({"weight_map":{}})", "is empty"},
        BadIndex{"TensorListedTwice", R"({"weight_map":{"a":"x.safetensors","a":"y.safetensors"}})",
                 "duplicate key \"a\""},
        BadIndex{"ParentPath", R"({"weight_map":{"a":"../x.safetensors"}})",
                 "not a plain file name"},
        BadIndex{"DotDot", R"({"weight_map":{"a":".."}})", "not a plain file name"},
        BadIndex{"AbsolutePath", R"({"weight_map":{"a":"/etc/x.safetensors"}})",
                 "not a plain file name"},
        BadIndex{"Subfolder", R"({"weight_map":{"a":"sub/x.safetensors"}})",
                 "not a plain file name"},
        BadIndex{"Backslash", R"({"weight_map":{"a":"..\\x.safetensors"}})",
                 "not a plain file name"},
        BadIndex{"WrongSuffix", R"({"weight_map":{"a":"x.bin"}})", "does not end in .safetensors"},
        BadIndex{"ShardNotString", R"({"weight_map":{"a":3}})", "is not a string"},
        BadIndex{"InvalidJson", R"({"weight_map":{"a":)", "invalid JSON"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera
