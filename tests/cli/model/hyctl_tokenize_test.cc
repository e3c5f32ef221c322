// hyctl tokenize, run as a real subprocess on a small tokenizer.json.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/hyctl_run.h"

namespace hy::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

using hy::testing::CmdResult;

// Runs hyctl with `args`, feeding `input` on stdin.
CmdResult Hyctl(const std::string& args, const std::string& input,
                const fs::path& dir) {
  const fs::path in = dir / "stdin.txt";
  std::ofstream(in, std::ios::binary) << input;
  return hy::testing::RunCommand(std::string(HYCTL_PATH) + " " + args +
                                 " < '" + in.string() + "'");
}

// GPT-2's byte alphabet: the character standing for byte b.
std::string ByteChar(int b) {
  auto printable = [](int x) {
    return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
  };
  int cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// Bytes are ids 0..255; "he" 256, "ll" 257, "hell" 258, "Ġw" 259;
// <|bos|> 260 (special) is added first with add_special_tokens.
void WriteTokenizer(const fs::path& dir) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["Ġw"] = 259;
  Json j = Json::parse(R"({
    "version": "1.0", "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
                      "use_regex": true},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [260],
                                     "tokens": ["<|bos|>"]}}},
    "decoder": {"type": "ByteLevel"},
    "added_tokens": [{"id": 260, "content": "<|bos|>", "special": true,
      "lstrip": false, "rstrip": false, "single_word": false,
      "normalized": false}],
    "model": {"type": "BPE", "merges": [["h", "e"], ["l", "l"], ["he", "ll"],
                                        ["Ġ", "w"]]}})");
  j["model"]["vocab"] = vocab;
  std::ofstream(dir / "tokenizer.json") << j.dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": "<|bos|>"})";
}

class HyctlTokenizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hyctl_tokenize_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    WriteTokenizer(dir_);
    tok_ = "tokenize --tokenizer '" + dir_.string() + "'";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string tok_;
};

TEST_F(HyctlTokenizeTest, EncodesLinesInOrder) {
  CmdResult r = Hyctl(tok_, "\"hello w\"\n\"\"\n\"<|bos|>he\"\n", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[258,111,259]\n[]\n[260,256]\n");

  r = Hyctl(tok_ + " --add-special-tokens", "\"hello\"\n", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[260,258,111]\n");
}

// --text: each line is plain text (quotes, digits and all), not JSON.
TEST_F(HyctlTokenizeTest, EncodesPlainTextLines) {
  CmdResult r = Hyctl(tok_ + " --text", "hello w\n\n\"he\"\n42\n", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[258,111,259]\n[]\n[34,256,34]\n[52,50]\n");
  r = Hyctl(tok_ + " --text --add-special-tokens", "hello\n", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[260,258,111]\n");
  // Without it a plain line is refused, saying what to pass.
  r = Hyctl(tok_, "hello w\n", dir_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--text"), std::string::npos) << r.err;
  EXPECT_EQ(Hyctl(tok_ + " --text --decode", "[1]\n", dir_).code, 64);
}

TEST_F(HyctlTokenizeTest, Decodes) {
  CmdResult r = Hyctl(tok_ + " --decode", "[260,258,111,259]\n[]\n", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "\"<|bos|>hello w\"\n\"\"\n");
  r = Hyctl(tok_ + " --decode --skip-special-tokens", "[260,258,111]\n", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "\"hello\"\n");
}

TEST_F(HyctlTokenizeTest, BadLineNamesItsNumber) {
  CmdResult r = Hyctl(tok_, "\"ok\"\n42\n\"never\"\n", dir_);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "[111,107]\n");  // what came before the bad line
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;

  r = Hyctl(tok_ + " --decode", "[1]\n[1, 999]\n", dir_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("999"), std::string::npos) << r.err;

  r = Hyctl(tok_, "not json\n", dir_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("line 1: not JSON"), std::string::npos) << r.err;
}

TEST_F(HyctlTokenizeTest, MissingTokenizerIsNotFound) {
  CmdResult r = Hyctl("tokenize --tokenizer '" + (dir_ / "nope").string() + "'",
                      "", dir_);
  EXPECT_EQ(r.code, 2) << r.err;
  r = Hyctl("tokenize", "", dir_);
  EXPECT_EQ(r.code, 64);
}

}  // namespace
}  // namespace hy::cli
