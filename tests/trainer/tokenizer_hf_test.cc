// hy::trainer::Tokenizer against Hugging Face's Rust implementation (PyPI
// `tokenizers`, run by tokenize_reference.py) on the real Qwen3 and Llama 3
// tokenizer.json files of ../shared/data/tokenizers, token for token, with
// and without add_special_tokens, on 10,000 generated strings and a few
// written out. The files, the interpreter and the package are required:
// without them the tests fail (scripts/install-deps.sh makes .venv/; CI has
// ../shared).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hy/trainer/tokenizer.h"
#include "tokenizer_corpus.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr size_t kStrings = 10000;

// Added to the generated corpus: where (?i:'s|'t|...) could fold case
// beyond ASCII (long s, Kelvin sign, the "st" ligature), and where NFC
// changes a letter.
const char* const kEdgeStrings[] = {
    "it'\u017f ok", "a'\u212a", "x'\ufb06", "I'M'LL'VE'RE'D'T'S",
    "A\u030a\u212b\u00c5 e\u0301"};

const fs::path kData = HY_TOKENIZER_DATA_DIR;
const fs::path kScript =
    fs::path(HY_SOURCE_DIR) / "tests" / "trainer" / "tokenize_reference.py";

std::string ModelDir(const std::string& name) {
  return (kData / name).string();
}

// Writes a copy of Llama 3's tokenizer.json whose post-processor is the one
// Meta's file has (ByteLevel, then a template adding <|begin_of_text|>); the
// shared copy (from the @lenml npm package) has only the ByteLevel part.
std::string WriteLlamaWithTemplate(const fs::path& dir) {
  std::ifstream in(fs::path(ModelDir("llama3")) / "tokenizer.json");
  Json j = Json::parse(in);
  j["post_processor"] = Json::parse(R"({"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false,
     "use_regex": true},
    {"type": "TemplateProcessing",
     "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}}],
     "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
              {"Sequence": {"id": "A", "type_id": 0}},
              {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
              {"Sequence": {"id": "B", "type_id": 1}}],
     "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
       "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]})");
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << j.dump();
  fs::copy_file(fs::path(ModelDir("llama3")) / "tokenizer_config.json",
                dir / "tokenizer_config.json",
                fs::copy_options::overwrite_existing);
  return dir.string();
}

std::string IdsToString(const std::vector<int32_t>& ids) {
  return Json(ids).dump();
}

class TokenizerHfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"qwen3", "llama3"}) {
      for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
        ASSERT_TRUE(fs::exists(kData / name / file))
            << "no " << (kData / name / file)
            << " (CI has ../shared beside the clone; or configure with "
               "-DHY_TOKENIZER_DATA_DIR=...)";
      }
    }
    ASSERT_TRUE(fs::exists(HY_PYTHON_PATH))
        << "no interpreter " << HY_PYTHON_PATH
        << " (run scripts/install-deps.sh)";
    dir_ = fs::temp_directory_path() /
           ("hy_tokenizer_hf_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    texts_ = testing::MakeTokenizerCorpus(kStrings, 20240611);
    texts_.insert(texts_.end(), std::begin(kEdgeStrings),
                  std::end(kEdgeStrings));
    input_ = (dir_ / "input.jsonl").string();
    ASSERT_TRUE(testing::WriteJsonLines(texts_, input_));
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Encodes the corpus with Rust and C++ and compares; `nfc` says whether the
  // tokenizer normalizes (then decode gives the NFC form back).
  void Compare(const std::string& name, const std::string& model_dir,
               bool nfc) {
    const std::string out = (dir_ / (name + ".jsonl")).string();
    const std::string cmd = std::string("'") + HY_PYTHON_PATH + "' '" +
                            kScript.string() + "' encode '" + model_dir +
                            "/tokenizer.json' '" + input_ + "' '" + out + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto tok = Tokenizer::Load(model_dir);
    ASSERT_TRUE(tok.ok()) << tok.status();

    std::ifstream in(out);
    std::string line;
    size_t n = 0, plain_mismatch = 0, special_mismatch = 0, roundtrip_bad = 0;
    size_t tokens = 0;
    while (std::getline(in, line)) {
      ASSERT_LT(n, texts_.size());
      const std::string& text = texts_[n];
      const Json ref = Json::parse(line);
      const auto want_plain = ref["plain"].get<std::vector<int32_t>>();
      const auto want_special = ref["special"].get<std::vector<int32_t>>();
      auto plain = (*tok)->Encode(text, false);
      auto special = (*tok)->Encode(text, true);
      ASSERT_TRUE(plain.ok()) << plain.status();
      ASSERT_TRUE(special.ok()) << special.status();
      tokens += plain->size();
      if (*plain != want_plain) {
        if (++plain_mismatch <= 5) {
          ADD_FAILURE() << name << " string " << n << " " << Json(text).dump()
                        << "\n  rust: " << IdsToString(want_plain)
                        << "\n  hy:   " << IdsToString(*plain);
        }
      }
      if (*special != want_special) {
        if (++special_mismatch <= 5) {
          ADD_FAILURE() << name << " (add_special_tokens) string " << n
                        << "\n  rust: " << IdsToString(want_special)
                        << "\n  hy:   " << IdsToString(*special);
        }
      }
      // decode(encode(s)) gives s back (its NFC form where the tokenizer
      // normalizes: then the ids are those of the NFC form).
      auto back = (*tok)->Decode(*plain);
      ASSERT_TRUE(back.ok()) << back.status();
      const std::string want_text = nfc ? ref["nfc"].get<std::string>() : text;
      if (*back != want_text && ++roundtrip_bad <= 5) {
        ADD_FAILURE() << name << " decode(encode(s)) != s for string " << n
                      << " " << Json(text).dump() << " -> "
                      << Json(*back).dump();
      }
      ++n;
    }
    std::printf(
        "[ %-15s ] %zu strings, %zu tokens: %zu mismatches without special "
        "tokens, %zu with, %zu round-trip failures\n",
        name.c_str(), n, tokens, plain_mismatch, special_mismatch,
        roundtrip_bad);
    EXPECT_EQ(n, texts_.size());
    EXPECT_EQ(plain_mismatch, 0u);
    EXPECT_EQ(special_mismatch, 0u);
    EXPECT_EQ(roundtrip_bad, 0u);
  }

  fs::path dir_;
  std::vector<std::string> texts_;
  std::string input_;
};

TEST_F(TokenizerHfTest, Qwen3MatchesHuggingFace) {
  Compare("qwen3", ModelDir("qwen3"), /*nfc=*/true);
}

TEST_F(TokenizerHfTest, Llama3MatchesHuggingFace) {
  Compare("llama3", ModelDir("llama3"), /*nfc=*/false);
}

TEST_F(TokenizerHfTest, Llama3WithTemplateMatchesHuggingFace) {
  Compare("llama3-template", WriteLlamaWithTemplate(dir_ / "llama3-template"),
          /*nfc=*/false);
}

TEST_F(TokenizerHfTest, SpecialTokenIdsFromConfig) {
  auto qwen = Tokenizer::Load(ModelDir("qwen3"));
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_EQ((*qwen)->eos_id(), (*qwen)->TokenToId("<|im_end|>"));
  EXPECT_EQ((*qwen)->pad_id(), 151643);
  EXPECT_EQ((*qwen)->bos_id(), std::nullopt);
  auto hello = (*qwen)->Encode("Hello, world!");
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(*hello, (std::vector<int32_t>{9707, 11, 1879, 0}));

  auto llama = Tokenizer::Load(ModelDir("llama3") + "/tokenizer.json");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ((*llama)->bos_id(), 128000);
  EXPECT_EQ((*llama)->eos_id(), 128001);
  EXPECT_EQ((*llama)->TokenToId("<|eot_id|>"), 128009);
  EXPECT_EQ((*llama)->vocab_size(), 128256);
}

}  // namespace
}  // namespace hy::trainer
