// hy::trainer::Tokenizer on tiny tokenizer.json files written here: merge
// order, ignore_merges, added tokens, templates, decode, and the errors.

#include "hy/trainer/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// GPT-2's byte alphabet: the character standing for byte b.
std::string ByteChar(int b) {
  const bool printable =
      (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
  int cp = b;
  if (!printable) {
    cp = 256;
    for (int x = 0; x < b; ++x) {
      const bool p =
          (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE);
      if (!p) ++cp;
    }
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

// The 256 byte tokens (ids 0..255) plus merges over "a", "b", "c", " ".
// Ids: "ab" 256, "bc" 257, "abc" 258, "Ġa" 259, "cc" 260, "ccc" 261,
// "ĠĠ" 262.
Json TinyTokenizer() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  vocab["ab"] = 256;
  vocab["bc"] = 257;
  vocab["abc"] = 258;
  vocab["Ġa"] = 259;
  vocab["cc"] = 260;
  vocab["ccc"] = 261;
  vocab["ĠĠ"] = 262;
  // "b c" ranks before "a b": "abc" -> a + bc; no "a bc" merge, so it stays.
  Json merges = Json::array(
      {"b c", "a b", "Ġ a", "c c", Json::array({"ab", "c"}), "Ġ Ġ"});
  Json j;
  j["version"] = "1.0";
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = Json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex":
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
       "use_regex": false}]})");
  j["post_processor"] = Json::parse(R"({"type": "ByteLevel"})");
  j["decoder"] = Json::parse(R"({"type": "ByteLevel"})");
  j["model"] = {{"type", "BPE"},        {"dropout", nullptr},
                {"unk_token", nullptr}, {"ignore_merges", false},
                {"vocab", vocab},       {"merges", merges}};
  j["added_tokens"] = Json::parse(R"([
      {"id": 300, "content": "<|end|>", "special": true, "lstrip": false,
       "rstrip": false, "single_word": false, "normalized": false},
      {"id": 301, "content": "<|end|>x", "special": false, "lstrip": false,
       "rstrip": false, "single_word": false, "normalized": false},
      {"id": 302, "content": "<pad>", "special": true, "lstrip": true,
       "rstrip": true, "single_word": false, "normalized": false}])");
  return j;
}

std::unique_ptr<Tokenizer> Make(const Json& j, const std::string& config = "") {
  auto t = Tokenizer::FromJson(j.dump(), config);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<int32_t> Enc(const Tokenizer& t, std::string_view s,
                         bool special = false) {
  auto ids = t.Encode(s, special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

using Ids = std::vector<int32_t>;

TEST(TokenizerTest, MergesApplyInRankOrder) {
  auto t = Make(TinyTokenizer());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Enc(*t, "abc"), (Ids{'a', 257}));  // "b c" outranks "a b"
  EXPECT_EQ(Enc(*t, "ab"), (Ids{256}));
  EXPECT_EQ(Enc(*t, "abab"), (Ids{256, 256}));
  EXPECT_EQ(Enc(*t, "cccc"), (Ids{260, 260}));  // leftmost first among equals
  EXPECT_EQ(Enc(*t, "ccc"), (Ids{260, 'c'}));   // no merge yields "ccc"
  EXPECT_EQ(Enc(*t, "x a"), (Ids{'x', 259}));   // " a" is one piece
  EXPECT_EQ(Enc(*t, "   a"), (Ids{262, 259}));
  // Long words take the heap path; the result is the same.
  std::string long_word;
  Ids want;
  for (int i = 0; i < 100; ++i) {
    long_word += "ab";
    want.push_back(256);
  }
  EXPECT_EQ(Enc(*t, long_word), want);
  EXPECT_EQ(Enc(*t, ""), Ids{});
}

TEST(TokenizerTest, LongRunsRoundTrip) {
  // Runs far beyond PCRE2's default JIT stack and the flat merge loop.
  auto t = Make(TinyTokenizer());
  for (const std::string& s :
       {std::string(300000, ' ') + "a", std::string(300000, 'a'),
        std::string(100000, '\n') + std::string(100000, '\t') + "x",
        std::string(200000, '7')}) {
    auto ids = t->Encode(s);
    ASSERT_TRUE(ids.ok()) << ids.status();
    auto back = t->Decode(*ids);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == s);
  }
  std::string abab;
  for (int i = 0; i < 150000; ++i) abab += "ab";
  auto ids = t->Encode(abab);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, std::vector<int32_t>(150000, 256));
}

TEST(TokenizerTest, IgnoreMergesTakesWholeWordsFromTheVocab) {
  Json j = TinyTokenizer();
  auto plain = Make(j);
  EXPECT_EQ(Enc(*plain, "ccc"), (Ids{260, 'c'}));
  j["model"]["ignore_merges"] = true;
  auto ignoring = Make(j);
  EXPECT_EQ(Enc(*ignoring, "ccc"), (Ids{261}));
  EXPECT_EQ(Enc(*ignoring, "abc"), (Ids{258}));
}

TEST(TokenizerTest, AddedTokensSplitTheTextLongestFirst) {
  auto t = Make(TinyTokenizer());
  EXPECT_EQ(Enc(*t, "ab<|end|>ab"), (Ids{256, 300, 256}));
  EXPECT_EQ(Enc(*t, "<|end|>xab"), (Ids{301, 256}));  // the longer one wins
  EXPECT_EQ(Enc(*t, "<|end|"), (Ids{'<', '|', 'e', 'n', 'd', '|'}));
  // lstrip / rstrip take the whitespace beside <pad>.
  EXPECT_EQ(Enc(*t, "ab  <pad>  ab"), (Ids{256, 302, 256}));
}

TEST(TokenizerTest, DecodeInvertsEncode) {
  auto t = Make(TinyTokenizer());
  for (const std::string s : {"abc abc", "  a\n\tb\r\nc", "héllo wörld 🚀",
                              "<|end|> and <pad>x", "12345", "'LL 's"}) {
    auto ids = t->Encode(s);
    ASSERT_TRUE(ids.ok());
    auto back = t->Decode(*ids);
    ASSERT_TRUE(back.ok()) << back.status();
    if (s.find("<pad>") == std::string::npos) {
      EXPECT_EQ(*back, s);
    }
  }
  EXPECT_EQ(*t->Decode({256, 300, 257}), "ab<|end|>bc");
  EXPECT_EQ(*t->Decode({256, 300, 301, 257}, /*skip_special_tokens=*/true),
            "ab<|end|>xbc");
  // A cut multi-byte character decodes to U+FFFD.
  EXPECT_EQ(*t->Decode({'a', 0xC3}), "a\xEF\xBF\xBD");
  auto bad = t->Decode({1, 400});
  EXPECT_TRUE(bad.status().IsInvalidArgument()) << bad.status();
  EXPECT_TRUE(t->Decode({-1}).status().IsInvalidArgument());
  EXPECT_TRUE(t->Decode({290}).status().IsInvalidArgument());  // a hole
}

TEST(TokenizerTest, Lookups) {
  auto t = Make(TinyTokenizer(), R"({"eos_token": "<|end|>",
      "pad_token": {"content": "<pad>"}, "bos_token": null})");
  EXPECT_EQ(t->vocab_size(), 303);
  EXPECT_EQ(t->TokenToId("Ġa"), 259);
  EXPECT_EQ(t->TokenToId("<pad>"), 302);
  EXPECT_EQ(t->TokenToId("nope"), std::nullopt);
  EXPECT_EQ(t->IdToToken(259), "Ġa");
  EXPECT_EQ(t->IdToToken(300), "<|end|>");
  EXPECT_TRUE(t->IsSpecial(300));
  EXPECT_FALSE(t->IsSpecial(301));
  EXPECT_EQ(t->eos_id(), 300);
  EXPECT_EQ(t->pad_id(), 302);
  EXPECT_EQ(t->bos_id(), std::nullopt);
}

TEST(TokenizerTest, TemplateAddsSpecialTokens) {
  Json j = TinyTokenizer();
  j["post_processor"] = Json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel"},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}}],
       "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [300],
                                       "tokens": ["<|end|>"]}}}]})");
  auto t = Make(j);
  EXPECT_EQ(Enc(*t, "ab", true), (Ids{300, 256}));
  EXPECT_EQ(Enc(*t, "ab", false), (Ids{256}));
  EXPECT_EQ(Enc(*t, "", true), (Ids{300}));
}

TEST(TokenizerTest, NfcNormalizerComposes) {
  Json j = TinyTokenizer();
  j["normalizer"] = Json::parse(R"({"type": "Sequence",
                                    "normalizers": [{"type": "NFC"}]})");
  auto t = Make(j);
  // e + COMBINING ACUTE -> U+00E9 (bytes C3 A9).
  EXPECT_EQ(Enc(*t, "e\xCC\x81"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(Enc(*Make(TinyTokenizer()), "e\xCC\x81"), (Ids{'e', 0xCC, 0x81}));
}

TEST(TokenizerTest, InvalidUtf8IsRefused) {
  auto t = Make(TinyTokenizer());
  for (const std::string bad :
       {"a\xFF", "\xC3", "\xED\xA0\x80", "\xC0\x80", "\xF4\x90\x80\x80"}) {
    auto ids = t->Encode(bad);
    EXPECT_TRUE(ids.status().IsInvalidArgument()) << ids.status();
  }
}

TEST(TokenizerTest, ConcurrentEncodeAgrees) {
  auto t = Make(TinyTokenizer());
  const std::string text = "abc ab cc ccc <|end|> abab  a\n";
  const Ids want = Enc(*t, text);
  std::vector<std::thread> threads;
  std::vector<int> bad(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 2000; ++i) {
        auto ids = t->Encode(text + std::to_string(i % 50));
        if (!ids.ok() || !std::equal(want.begin(), want.end(), ids->begin())) {
          ++bad[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(bad[k], 0);
}

// ---- Errors -----------------------------------------------------------------

Status LoadError(const Json& j) {
  auto t = Tokenizer::FromJson(j.dump(), "");
  return t.ok() ? Status::OK() : t.status();
}

TEST(TokenizerTest, RefusesWhatItDoesNotImplement) {
  Json j = TinyTokenizer();
  j["model"]["type"] = "Unigram";
  Status s = LoadError(j);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(),
            "tokenizer.json: model.type \"Unigram\" is not supported "
            "(supported: BPE)");

  j = TinyTokenizer();
  j["normalizer"] = Json::parse(R"({"type": "NFKC"})");
  s = LoadError(j);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("normalizer.type \"NFKC\" is not supported"),
            std::string::npos)
      << s;

  j = TinyTokenizer();
  j["pre_tokenizer"] = Json::parse(R"({"type": "Whitespace"})");
  EXPECT_NE(LoadError(j).message().find("pre_tokenizer.type \"Whitespace\""),
            std::string::npos);

  j = TinyTokenizer();
  j["decoder"] = Json::parse(R"({"type": "WordPiece"})");
  EXPECT_NE(LoadError(j).message().find("decoder.type \"WordPiece\""),
            std::string::npos);

  j = TinyTokenizer();
  j["post_processor"] = Json::parse(R"({"type": "BertProcessing"})");
  EXPECT_TRUE(LoadError(j).IsInvalidArgument());

  j = TinyTokenizer();
  j["added_tokens"][0]["single_word"] = true;
  EXPECT_NE(LoadError(j).message().find("added_tokens[0].single_word"),
            std::string::npos);
}

TEST(TokenizerTest, RefusesBrokenModels) {
  Json j = TinyTokenizer();
  j["model"]["merges"].push_back("a zz");
  Status s = LoadError(j);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("model.merges[6]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("\"zz\""), std::string::npos) << s;

  j = TinyTokenizer();
  j["model"]["merges"].push_back("c b");  // "cb" is not in the vocab
  EXPECT_NE(LoadError(j).message().find("merged token is not in model.vocab"),
            std::string::npos);

  j = TinyTokenizer();
  j["model"]["vocab"].erase("a");
  EXPECT_TRUE(LoadError(j).IsInvalidArgument());

  EXPECT_TRUE(
      Tokenizer::FromJson("{not json", "").status().IsInvalidArgument());
  EXPECT_TRUE(Tokenizer::FromJson("[1, 2]", "").status().IsInvalidArgument());
  EXPECT_TRUE(Tokenizer::FromJson(TinyTokenizer().dump(), "{bad")
                  .status()
                  .IsInvalidArgument());
}

TEST(TokenizerTest, LoadFromFileAndDirectory) {
  const fs::path dir = fs::temp_directory_path() /
                       ("hy_tokenizer_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_TRUE(Tokenizer::Load(dir.string()).status().IsNotFound());
  EXPECT_TRUE(
      Tokenizer::Load((dir / "missing.json").string()).status().IsNotFound());
  std::ofstream(dir / "tokenizer.json") << TinyTokenizer().dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|end|>"})";
  auto from_dir = Tokenizer::Load(dir.string());
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  EXPECT_EQ((*from_dir)->eos_id(), 300);
  auto from_file = Tokenizer::Load((dir / "tokenizer.json").string());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(Enc(**from_file, "abc"), (Ids{'a', 257}));
  std::ofstream(dir / "tokenizer.json") << "{\"model\": ";
  auto truncated = Tokenizer::Load(dir.string());
  EXPECT_TRUE(truncated.status().IsInvalidArgument());
  EXPECT_NE(truncated.status().message().find("tokenizer.json"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hy::trainer
