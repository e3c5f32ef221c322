// The safetensors writer against real files: the reference implementation's
// own byte vectors, round trips of every dtype, and misuse of the writer.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hy/statestore/safetensors.h"
#include "safetensors_test_util.h"

namespace hy::statestore {
namespace {

using testing::FileBytes;
using testing::RandomBytes;
using testing::SafetensorsTest;

// The byte vectors of the reference implementation's serialization tests,
// spelled out from the specification.
TEST_F(SafetensorsTest, WriterMatchesTheReferenceBytes) {
  std::string floats;
  for (float v : {0.f, 1.f, 2.f, 3.f, 4.f, 5.f}) {
    floats.append(reinterpret_cast<const char*>(&v), 4);
  }
  struct Case {
    TensorMeta meta;
    std::string header;  // Padding included.
  } cases[] = {
      // 64 bytes: no padding needed.
      {{"attn.0", DType::kF32, {1, 2, 3}},
       R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})"},
      // 65 bytes: padded with 7 spaces to 72.
      {{"attn0", DType::kF32, {1, 1, 2, 3}},
       R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})"
       "       "},
  };
  for (const Case& c : cases) {
    const std::string path = Path(c.meta.name);
    ASSERT_TRUE(WriteSafetensors(path, {{c.meta, floats}}).ok());
    EXPECT_EQ(ReadRaw(path), FileBytes(c.header, floats));
    EXPECT_EQ(c.header.size() % 8, 0u);
  }
  ASSERT_TRUE(WriteSafetensors(Path("empty"), {}).ok());
  EXPECT_EQ(ReadRaw(Path("empty")), FileBytes("{}      ", ""));
  ASSERT_TRUE(WriteSafetensors(Path("meta"), {}, {{"framework", "pt"}}).ok());
  EXPECT_EQ(ReadRaw(Path("meta")),
            FileBytes(R"({"__metadata__":{"framework":"pt"}})"
                      "     ",
                      ""));
}

TEST_F(SafetensorsTest, WriterLayoutIsAlignedAndOrderedByDTypeThenName) {
  std::vector<std::pair<TensorMeta, std::string>> tensors;
  uint32_t seed = 0;
  for (DType d : kAllDTypes) {
    for (const char* suffix : {"b", "a"}) {
      TensorMeta m{std::string(SafetensorsName(d)) + suffix, d, {3}};
      tensors.emplace_back(m, RandomBytes(*m.ByteSize(), ++seed));
    }
  }
  std::vector<std::pair<TensorMeta, ConstBytes>> in;
  for (const auto& [m, b] : tensors) in.emplace_back(m, b);
  const std::string path = Path("mixed");
  ASSERT_TRUE(WriteSafetensors(path, in).ok());

  const std::string raw = ReadRaw(path);
  ASSERT_GE(raw.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(raw[8], '{');
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& ts = (*r)->tensors();
  const std::vector<std::string> expected_order = {
      "I64a", "I64b", "F64a",  "F64b",  "F32a",  "F32b",
      "I32a", "I32b", "BF16a", "BF16b", "F16a",  "F16b",
      "I8a",  "I8b",  "U8a",   "U8b",   "BOOLa", "BOOLb"};
  ASSERT_EQ(ts.size(), expected_order.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(ts[i].meta.name, expected_order[i]);
    EXPECT_EQ(ts[i].data_begin, offset);
    EXPECT_EQ(ts[i].data_begin % DTypeSize(ts[i].meta.dtype), 0u);
    offset = ts[i].data_end;
  }
  EXPECT_EQ(raw.size(), 8 + n + offset);
}

class SafetensorsRoundTripTest : public SafetensorsTest,
                                 public ::testing::WithParamInterface<DType> {};

TEST_P(SafetensorsRoundTripTest, ShapesScalarsEmptyAndMetadata) {
  const DType d = GetParam();
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {1}, {7}, {2, 3}, {4, 0, 5}, {3, 1, 2, 5}, {300, 1000}};
  std::vector<std::pair<TensorMeta, std::string>> tensors;
  for (size_t i = 0; i < shapes.size(); ++i) {
    TensorMeta m{"t" + std::to_string(i), d, shapes[i]};
    tensors.emplace_back(m, RandomBytes(*m.ByteSize(), i));
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"quote\"key", "line\nbreak, caf\xC3\xA9"}, {"", ""}};
  const std::string path = Path("rt");
  std::vector<TensorMeta> metas;
  for (const auto& t : tensors) metas.push_back(t.first);
  auto w = SafetensorsWriter::Create(path, metas, metadata);
  ASSERT_TRUE(w.ok()) << w.status();
  // Feed each tensor in uneven pieces, in the writer's data order.
  for (const SafetensorsTensor& t : (*w)->tensors()) {
    const std::string& bytes = tensors[std::stoi(t.meta.name.substr(1))].second;
    for (size_t pos = 0, piece = 1; pos < bytes.size(); piece *= 3) {
      const size_t n = std::min(piece, bytes.size() - pos);
      ASSERT_TRUE(
          (*w)->Append(t.meta.name, ConstBytes(bytes.data() + pos, n)).ok());
      pos += n;
    }
  }
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ(DirEntries(), std::vector<std::string>{"rt"});

  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->metadata(), metadata);
  ASSERT_EQ((*r)->tensors().size(), tensors.size());
  for (const auto& [meta, bytes] : tensors) {
    const SafetensorsTensor* t = (*r)->Find(meta.name);
    ASSERT_NE(t, nullptr) << meta.name;
    EXPECT_EQ(t->meta, meta);
    auto data = (*r)->TensorData(meta.name);
    ASSERT_TRUE(data.ok());
    EXPECT_EQ(data->AsStringView(), bytes) << meta.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data->data()) % DTypeSize(d), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(SafetensorsDTypes, SafetensorsRoundTripTest,
                         ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(SafetensorsName(info.param));
                         });

TEST_F(SafetensorsTest, WriterMisuseLeavesNoFile) {
  const std::vector<TensorMeta> metas = {
      {"a", DType::kF32, {2}}, {"b", DType::kU8, {3}}, {"z", DType::kF32, {0}}};
  const std::string path = Path("out");
  const std::string a(8, 'a'), b(3, 'b');
  auto expect_no_file = [&](const char* what) {
    EXPECT_TRUE(DirEntries().empty()) << what;
  };
  {  // Wrong order: "a" (F32) is due before "b" (U8).
    auto w = SafetensorsWriter::Create(path, metas);
    ASSERT_TRUE(w.ok());
    Status s = (*w)->Append("b", b);
    EXPECT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_NE(s.message().find("expects bytes of tensor 'a'"),
              std::string::npos)
        << s;
    expect_no_file("wrong order");
    EXPECT_EQ((*w)->Finish().code(), StatusCode::kFailedPrecondition);
    expect_no_file("finish after failure");
  }
  {  // Too many bytes, in one piece and across pieces.
    auto w = SafetensorsWriter::Create(path, metas);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("a", ConstBytes(a.data(), 5)).ok());
    EXPECT_TRUE((*w)->Append("a", ConstBytes(a.data(), 4)).IsInvalidArgument());
    expect_no_file("too many bytes");
  }
  {  // Bytes for a tensor that is not declared, or after all data.
    auto w = SafetensorsWriter::Create(path, metas);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("a", a).ok());
    ASSERT_TRUE((*w)->Append("b", b).ok());
    ASSERT_TRUE((*w)->Append("z", ConstBytes()).ok());
    EXPECT_TRUE((*w)->Append("b", b).IsInvalidArgument());
    expect_no_file("after all data");
  }
  {  // Finish before all data.
    auto w = SafetensorsWriter::Create(path, metas);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("a", a).ok());
    Status s = (*w)->Finish();
    EXPECT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_NE(s.message().find("tensor 'b' has 0 of 3 bytes"),
              std::string::npos)
        << s;
    expect_no_file("early finish");
  }
  {  // Abandoned: destroyed without Finish.
    auto w = SafetensorsWriter::Create(path, metas);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("a", a).ok());
  }
  expect_no_file("abandoned");
  {  // Finished: later calls fail, the file stays.
    auto w = SafetensorsWriter::Create(path, metas);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("a", a).ok());
    ASSERT_TRUE((*w)->Append("b", b).ok());
    ASSERT_TRUE((*w)->Finish().ok());
    EXPECT_EQ((*w)->Append("b", b).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ((*w)->Finish().code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(DirEntries(), std::vector<std::string>{"out"});
  EXPECT_TRUE(SafetensorsReader::Open(path).ok());
}

TEST_F(SafetensorsTest, WriterRejectsBadDeclarations) {
  const std::string path = Path("out");
  const std::vector<std::vector<TensorMeta>> bad = {
      {{"a", DType::kF32, {2}}, {"a", DType::kU8, {2}}},
      {{"__metadata__", DType::kF32, {2}}},
      {{"", DType::kF32, {2}}},
      {{"a", DType::kF32, {-1}}},
      {{"a", static_cast<DType>(77), {1}}},
      {{"bad\xFFutf8", DType::kF32, {1}}},
  };
  for (const auto& metas : bad) {
    auto w = SafetensorsWriter::Create(path, metas);
    EXPECT_TRUE(w.status().IsInvalidArgument()) << w.status();
  }
  EXPECT_TRUE(SafetensorsWriter::Create(path, {}, {{"k", "\xC3"}})
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(DirEntries().empty());
  EXPECT_TRUE(SafetensorsWriter::Create(Path("no/such/dir/f"), {})
                  .status()
                  .IsNotFound());
  const std::string three(3, 'x');
  EXPECT_TRUE(WriteSafetensors(path, {{{"a", DType::kF32, {1}}, three}})
                  .IsInvalidArgument());
  EXPECT_TRUE(DirEntries().empty());
}

TEST_F(SafetensorsTest, ReplacesAnExistingFileOnlyAtFinish) {
  const std::string path = Path("out");
  const std::string old_bytes(4, 'o'), new_bytes(4, 'n');
  ASSERT_TRUE(
      WriteSafetensors(path, {{{"x", DType::kU8, {4}}, old_bytes}}).ok());
  auto w = SafetensorsWriter::Create(path, {{"x", DType::kU8, {4}}});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("x", new_bytes).ok());
  auto before = SafetensorsReader::Open(path);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ((*before)->TensorDataAt(0).AsStringView(), old_bytes);
  ASSERT_TRUE((*w)->Finish().ok());
  // The open reader keeps the old file's bytes; a new one sees the new.
  EXPECT_EQ((*before)->TensorDataAt(0).AsStringView(), old_bytes);
  auto after = SafetensorsReader::Open(path);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)->TensorDataAt(0).AsStringView(), new_bytes);
}

TEST_F(SafetensorsTest, LargeTensorInPiecesAroundTheWriteBuffer) {
  const TensorMeta meta{"big", DType::kBF16, {3 << 19}};  // 3 MiB.
  const std::string bytes = RandomBytes(*meta.ByteSize(), 9);
  const std::string path = Path("big");
  auto w = SafetensorsWriter::Create(path, {meta});
  ASSERT_TRUE(w.ok());
  const size_t pieces[] = {1, (1 << 20) - 1, 5, (1 << 20) + 7};
  size_t pos = 0;
  for (size_t n : pieces) {
    ASSERT_TRUE((*w)->Append("big", ConstBytes(bytes.data() + pos, n)).ok());
    pos += n;
  }
  ASSERT_TRUE(
      (*w)->Append("big", ConstBytes(bytes.data() + pos, bytes.size() - pos))
          .ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->TensorDataAt(0).AsStringView(), bytes);
}

}  // namespace
}  // namespace hy::statestore
