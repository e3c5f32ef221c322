// The safetensors reader against real files: a file built by hand from the
// format's specification and every kind of malformed or truncated file.

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "hy/statestore/safetensors.h"
#include "safetensors_test_util.h"

namespace hy::statestore {
namespace {

using testing::FileBytes;
using testing::Le64;
using testing::RandomBytes;
using testing::SafetensorsTest;

TEST_F(SafetensorsTest, ReadsAFileBuiltByHand) {
  // Tensors listed out of offset order, an unknown field (ignored, as by the
  // reference), and the header padded with spaces.
  const std::string header =
      R"({"__metadata__":{"format":"pt","note":"hand made"},)"
      R"("mask":{"dtype":"BOOL","shape":[3],"data_offsets":[16,19]},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":[1]},)"
      R"( "step" : {"dtype":"I64","shape":[],"data_offsets":[8,16]}}   )";
  const std::string data = std::string("\x00\x00\xC0\x3F", 4) +      // 1.5f
                           std::string("\x00\x00\x00\xC0", 4) +      // -2.0f
                           std::string("\x2A\x01\0\0\0\0\0\0", 8) +  // 298
                           std::string("\x01\x00\x01", 3);
  const std::string path = WriteRaw(FileBytes(header, data));
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  const SafetensorsReader& reader = **r;
  EXPECT_EQ(reader.file_size(), 8 + header.size() + data.size());
  EXPECT_EQ(reader.layout().data_offset(), 8 + header.size());
  EXPECT_EQ(reader.metadata(), (std::map<std::string, std::string>{
                                   {"format", "pt"}, {"note", "hand made"}}));
  ASSERT_EQ(reader.tensors().size(), 3u);
  EXPECT_EQ(reader.tensors()[0].meta, (TensorMeta{"w", DType::kF32, {2}}));
  EXPECT_EQ(reader.tensors()[1].meta, (TensorMeta{"step", DType::kI64, {}}));
  EXPECT_EQ(reader.tensors()[2].meta, (TensorMeta{"mask", DType::kBool, {3}}));
  EXPECT_EQ(reader.tensors()[2].data_begin, 16u);
  EXPECT_EQ(reader.tensors()[2].data_end, 19u);

  auto w = reader.TensorData("w");
  ASSERT_TRUE(w.ok());
  float f[2];
  ASSERT_EQ(w->size(), sizeof(f));
  std::memcpy(f, w->data(), sizeof(f));
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.0f);
  int64_t step;
  ASSERT_EQ(reader.TensorDataAt(1).size(), 8u);
  std::memcpy(&step, reader.TensorDataAt(1).data(), 8);
  EXPECT_EQ(step, 298);
  EXPECT_EQ(reader.TensorDataAt(2).AsStringView(), std::string("\1\0\1", 3));
  ASSERT_NE(reader.Find("step"), nullptr);
  EXPECT_EQ(reader.Find("nope"), nullptr);
  EXPECT_TRUE(reader.TensorData("nope").status().IsNotFound());
}

TEST_F(SafetensorsTest, RejectsEveryTruncation) {
  const std::string whole =
      FileBytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})",
                RandomBytes(11, 1));
  ASSERT_TRUE(SafetensorsReader::Open(WriteRaw(whole)).ok());
  for (size_t len = 0; len < whole.size(); ++len) {
    SCOPED_TRACE(len);
    auto r = SafetensorsReader::Open(WriteRaw(whole.substr(0, len)));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsDataLoss()) << r.status();
  }
  ExpectDataLoss(whole.substr(0, 5), "too short");
  ExpectDataLoss(whole.substr(0, 20), "runs past the end");
  ExpectDataLoss(whole.substr(0, whole.size() - 1),
                 "tensor 'b' has data_offsets [8, 11] past the end");
}

TEST_F(SafetensorsTest, RejectsMalformedHeaders) {
  const std::string f32x2 = R"("dtype":"F32","shape":[2])";
  const std::string d8 = RandomBytes(8, 2);
  struct Case {
    std::string header;
    std::string data;
    std::string expect;
  } cases[] = {
      {"", "", "does not start with '{'"},
      {"[1, 2]", "", "does not start with '{'"},
      {R"({"a":)", "", "not valid JSON"},
      {R"({"a":1}x)", "", "not valid JSON"},
      {std::string("{}\0", 3), "", "NUL byte"},
      {"{\"\xFF\":1}", "", "not valid JSON"},
      {R"({"a":7})", "", "tensor 'a' is not an object"},
      {R"({"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", "",
       "named ''"},
      {R"({"a":{"dtype":"X9","shape":[2],"data_offsets":[0,8]}})", d8,
       "tensor 'a' has unknown or unsupported dtype 'X9'"},
      {R"({"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", d8,
       "unsupported dtype 'F8_E4M3'"},
      {R"({"a":{"shape":[2],"data_offsets":[0,8]}})", d8, "no \"dtype\""},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8,
       "tensor 'a' has shape entry -2"},
      {R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", d8,
       "shape entry 2.0"},
      {R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", d8,
       "no \"shape\""},
      {R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],)"
       R"("data_offsets":[0,0]}})",
       "", "overflows"},
      {R"({"a":{"dtype":"U8","shape":[99999999999999999999],)"
       R"("data_offsets":[0,0]}})",
       "", "shape entry"},
      {"{\"a\":{" + f32x2 + "}}", d8, "no \"data_offsets\""},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8,8]}})", d8,
       "no \"data_offsets\""},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[-8,0]}})", d8,
       "no \"data_offsets\""},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[8,0]}})", d8,
       "tensor 'a' has data_offsets [8, 0] ending before they begin"},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]}})", d8.substr(0, 7),
       "tensor 'a' has data_offsets [0, 8] past the end"},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[0,4]}})", d8.substr(0, 4),
       "tensor 'a' has data_offsets [0, 4] (4 bytes) but a F32[2] needs 8"},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 +
           R"(,"data_offsets":[4,12]}})",
       d8 + "1234", "tensor 'b' overlaps tensor 'a'"},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]},"b":{"dtype":"U8",)" +
           R"("shape":[],"data_offsets":[4,5]}})",
       d8, "overlaps tensor 'a'"},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[4,12]}})", d8 + "1234",
       "hole of 4 bytes before tensor 'a'"},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]}})", d8 + "xy",
       "last 2 bytes of the data buffer belong to no tensor"},
      {"{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]},"a":{)" + f32x2 +
           R"(,"data_offsets":[0,8]}})",
       d8, "key 'a' twice"},
      {"{\"a\":{" + f32x2 + R"(,"dtype":"U8","data_offsets":[0,8]}})", d8,
       "key 'dtype' twice"},
      {R"({"__metadata__":{"k":1}})", "", "value for 'k' is not a string"},
      {R"({"__metadata__":["k"]})", "", "\"__metadata__\" is not an object"},
      {"{\"a\":{\"x\":" + std::string(100000, '[') + "}}", "", "nests deeper"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header.substr(0, 100));
    ExpectDataLoss(FileBytes(c.header, c.data), c.expect);
  }
  // Header lengths that no file can back.
  ExpectDataLoss(Le64(100'000'001) + "{}", "exceeds the limit");
  ExpectDataLoss(Le64(~uint64_t{0}) + "{}", "exceeds the limit");
  ExpectDataLoss(Le64(3) + "{}", "runs past the end");
  // A null "__metadata__" is accepted, as by the reference.
  EXPECT_TRUE(SafetensorsReader::Open(
                  WriteRaw(FileBytes(R"({"__metadata__":null})", "")))
                  .ok());
}

TEST_F(SafetensorsTest, OpenErrors) {
  auto missing = SafetensorsReader::Open(Path("missing.safetensors"));
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status();
  auto dir = SafetensorsReader::Open(dir_);
  EXPECT_EQ(dir.status().code(), StatusCode::kIOError) << dir.status();
}

TEST(SafetensorsIndexTest, ParsesTheWeightMap) {
  auto map = ParseSafetensorsIndex(
      R"({"metadata":{"total_size":24},"weight_map":{)"
      R"("a.weight":"model-00001-of-00002.safetensors",)"
      R"("b.weight":"model-00002-of-00002.safetensors"}})",
      "dir/model.safetensors.index.json");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(*map, (std::map<std::string, std::string>{
                      {"a.weight", "model-00001-of-00002.safetensors"},
                      {"b.weight", "model-00002-of-00002.safetensors"}}));
}

TEST(SafetensorsIndexTest, RefusesWhatIsNotAnIndexOrLeavesTheDirectory) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "not JSON with a weight_map"},
      {"[1]", "not JSON with a weight_map"},
      {R"({"weight_map":[]})", "not JSON with a weight_map"},
      {R"({"weight_map":{"a":3}})", "weight_map.a is not a file name"},
      {R"({"weight_map":{"":"x.safetensors"}})", "empty tensor name"},
      {R"({"weight_map":{"a":"../secret.safetensors"}})", "not a file name in"},
      {R"({"weight_map":{"a":"/etc/passwd"}})", "not a file name in"},
      {R"({"weight_map":{"a":"sub\\x.safetensors"}})", "not a file name in"},
      {R"({"weight_map":{"a":".."}})", "not a file name in"},
      {R"({"weight_map":{"a":""}})", "not a file name in"},
  };
  for (const auto& [json, want] : cases) {
    auto map = ParseSafetensorsIndex(json, "idx.json");
    ASSERT_FALSE(map.ok()) << json;
    EXPECT_TRUE(map.status().IsDataLoss()) << map.status();
    EXPECT_NE(map.status().message().find(want), std::string::npos)
        << json << ": " << map.status();
    EXPECT_NE(map.status().message().find("idx.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace hy::statestore
