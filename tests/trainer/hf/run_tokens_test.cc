// The record of a run's special ids and tokenizer files (run_tokens.h),
// on the demo's tokenizer: it round-trips, and a changed or missing file
// is caught before an export copies it.

#include "hy/trainer/hf/run_tokens.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hy/trainer/data/special_tokens.h"
#include "hy/trainer/tokenizer/tokenizer.h"
#include "testing/temp_dir.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;

const std::string kDemo =
    std::string(HY_SOURCE_DIR) + "/configs/demo-tokenizer";

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  auto t = Tokenizer::Load(path);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(RunTokensTest, RecordRoundTripsAndCatchesChangedFiles) {
  TempDir dir;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(kDemo + "/" + f, dir.path() + "/" + f);
  }
  auto t = Load(dir.path());
  ASSERT_NE(t, nullptr);
  auto spec = SpecialTokensFor(*t, std::nullopt, {});
  ASSERT_TRUE(spec.ok());
  auto run = DescribeRun(*spec, dir.path() + "/tokenizer.json");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(fs::path(run->tokenizer_dir).is_absolute());
  EXPECT_EQ(run->file_hashes.size(), 2u);
  auto back = ParseRunTokens(RunTokensJson(*run));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec.eos, spec->eos);
  EXPECT_EQ(back->spec.bos, spec->bos);
  EXPECT_EQ(back->spec.pad, spec->pad);
  EXPECT_EQ(back->file_hashes, run->file_hashes);
  EXPECT_TRUE(CheckTokenizerFiles(*back, dir.path()).ok());
  EXPECT_TRUE(CheckTokenizerFiles(*back, kDemo).ok());  // Same bytes.

  std::ofstream(dir.path() + "/tokenizer_config.json", std::ios::app) << " ";
  Status changed = CheckTokenizerFiles(*back, dir.path());
  EXPECT_EQ(changed.code(), StatusCode::kFailedPrecondition) << changed;
  EXPECT_NE(changed.ToString().find("tokenizer_config.json"),
            std::string::npos);
  fs::remove(dir.path() + "/tokenizer.json");
  EXPECT_TRUE(CheckTokenizerFiles(*back, dir.path()).IsNotFound());

  for (const char* bad : {"", "[]", "{\"eos\": []}", "{\"bos\": 1}",
                          "{\"bos\":null,\"eos\":[],\"pad\":0,"
                          "\"tokenizer_dir\":\"\",\"files\":{}}"}) {
    EXPECT_TRUE(ParseRunTokens(bad).status().IsDataLoss()) << bad;
  }
}

}  // namespace
}  // namespace hy::trainer
