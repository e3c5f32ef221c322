#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codec_test_util.h"
#include "hy/common/thread_pool.h"
#include "hy/statestore/codec.h"

namespace hy::statestore {
namespace {

using testing::StepF32;
using testing::WeightLikeBytes;

TEST(CodecBatchTest, ParallelMatchesSerial) {
  ThreadPool pool(2);
  const int kChunks = 48;
  std::vector<std::vector<uint8_t>> raw, base;
  for (int i = 0; i < kChunks; ++i) {
    raw.push_back(WeightLikeBytes(DType::kF32, 16384 + 4 * i, i));
    base.push_back(i % 2 ? StepF32(raw.back(), 1e-4f, i)
                         : std::vector<uint8_t>());
  }
  std::vector<std::string> par(kChunks), ser(kChunks);
  std::vector<EncodeJob> jobs(kChunks), serial_jobs(kChunks);
  for (int i = 0; i < kChunks; ++i) {
    jobs[i] = EncodeJob{DType::kF32, raw[i], base[i], &par[i], {}};
    serial_jobs[i] = EncodeJob{DType::kF32, raw[i], base[i], &ser[i], {}};
  }
  ASSERT_TRUE(EncodeChunks({}, &pool, &jobs).ok());
  ASSERT_TRUE(EncodeChunks({}, nullptr, &serial_jobs).ok());
  EXPECT_EQ(par, ser);  // Deterministic whatever thread encodes a chunk.

  std::vector<std::vector<uint8_t>> out(kChunks);
  std::vector<DecodeJob> djobs(kChunks);
  for (int i = 0; i < kChunks; ++i) {
    out[i].resize(raw[i].size());
    djobs[i] = DecodeJob{par[i], base[i], MutableBytes(out[i]), {}};
  }
  ASSERT_TRUE(DecodeChunks(&pool, &djobs).ok());
  for (int i = 0; i < kChunks; ++i) EXPECT_EQ(out[i], raw[i]) << i;
}

TEST(CodecBatchTest, ReportsFirstFailureAndStillRunsTheRest) {
  ThreadPool pool(2);
  std::vector<std::vector<uint8_t>> raw;
  std::vector<std::string> enc(8);
  std::vector<EncodeJob> jobs;
  for (int i = 0; i < 8; ++i) {
    raw.push_back(WeightLikeBytes(DType::kBF16, 4096, 100 + i));
    jobs.push_back(EncodeJob{DType::kBF16, raw[i], {}, &enc[i], {}});
  }
  ASSERT_TRUE(EncodeChunks({}, &pool, &jobs).ok());
  enc[5][100] ^= 0x40;  // Corrupt chunk 5.
  enc[6].resize(10);    // Truncate chunk 6.
  std::vector<std::vector<uint8_t>> out(8, std::vector<uint8_t>(4096));
  std::vector<DecodeJob> djobs;
  for (int i = 0; i < 8; ++i) {
    djobs.push_back(DecodeJob{enc[i], {}, MutableBytes(out[i]), {}});
  }
  Status s = DecodeChunks(&pool, &djobs);
  EXPECT_TRUE(s.IsDataLoss()) << s;
  EXPECT_EQ(s.message().rfind("chunk 5: ", 0), 0u) << s;
  EXPECT_TRUE(djobs[6].status.IsDataLoss());
  for (int i : {0, 1, 2, 3, 4, 7}) {
    EXPECT_TRUE(djobs[i].status.ok()) << i;
    EXPECT_EQ(out[i], raw[i]) << i;
  }
}

TEST(CodecBatchTest, MissingOutputIsAnError) {
  std::vector<uint8_t> raw(16);
  std::vector<EncodeJob> jobs(1);
  jobs[0].raw = raw;
  EXPECT_TRUE(EncodeChunks({}, nullptr, &jobs).IsInvalidArgument());
}

}  // namespace
}  // namespace hy::statestore
