// NFC as the model was trained with it: hy's tokenizer against Hugging
// Face's Rust `tokenizers` (tokenize_reference.py) on the real Qwen3
// tokenizer.json (normalizer NFC) for every assigned code point that NFC
// can touch: every one ICU does not call inert (it may decompose, compose,
// be reordered or make another character move) and every one with a
// canonical decomposition (the Hangul syllables among them), alone, after
// a class-240 mark (where its own class decides the order), before U+0301
// (where it may compose with the mark or block it) and as its full
// canonical decomposition (where the pieces may compose again). ICU's tables are
// Unicode 15's, Hugging Face's are Unicode 9.0's: without the filter in
// trainer/tokenizer/normalize.cc, the combining marks and the compositions
// that Unicode 10-15 added come out differently.

#include <gtest/gtest.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hy/trainer/tokenizer/tokenizer.h"
#include "tokenizer_corpus.h"
#include "tokenizer_reference.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string Utf8(const icu::UnicodeString& s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

// The strings that probe every assigned code point that is not inert or
// has a canonical decomposition; *code_points says how many there were.
std::vector<std::string> NormalizationProbes(size_t* code_points) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(err);
  EXPECT_TRUE(U_SUCCESS(err)) << u_errorName(err);
  std::vector<std::string> out;
  *code_points = 0;
  if (U_FAILURE(err)) return out;
  for (UChar32 c = 0; c <= 0x10FFFF; ++c) {
    if (U_IS_SURROGATE(c) || !u_isdefined(c)) continue;
    const icu::UnicodeString one(c);
    const icu::UnicodeString decomposed = nfd->normalize(one, err);
    EXPECT_TRUE(U_SUCCESS(err)) << u_errorName(err) << " at " << c;
    err = U_ZERO_ERROR;
    const bool decomposes = decomposed != one;
    if (nfc->isInert(c) && !decomposes) continue;
    ++*code_points;
    out.push_back(Utf8(one));
    out.push_back(Utf8(icu::UnicodeString(u"a\u0345") + one));
    out.push_back(Utf8(one + icu::UnicodeString(u"\u0301 ")));
    if (decomposes) out.push_back(Utf8(decomposed));
  }
  return out;
}

TEST(TokenizerNfcTest, EveryCodePointNfcTouchesMatchesHuggingFace) {
  ASSERT_TRUE(testing::ReferenceFilesExist());
  const fs::path dir = fs::temp_directory_path() /
                       ("hy_tokenizer_nfc_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  size_t code_points = 0;
  const std::vector<std::string> texts = NormalizationProbes(&code_points);
  // Every Unicode version since 1.1 has added such code points (ICU 72:
  // 3,294 not inert, 14,485 with the decomposable ones); far fewer would
  // mean the enumeration is broken, not that all is well.
  ASSERT_GT(code_points, 10000u);
  const std::string input = (dir / "input.jsonl").string();
  const std::string output = (dir / "output.jsonl").string();
  ASSERT_TRUE(testing::WriteJsonLines(texts, input));
  const std::string model_dir = testing::TokenizerDir("qwen3");
  ASSERT_TRUE(testing::RunReference(
      {"encode", model_dir + "/tokenizer.json", input, output}));
  std::vector<Json> refs;
  ASSERT_TRUE(testing::ReadJsonLines(output, &refs));
  ASSERT_EQ(refs.size(), texts.size());
  auto tok = Tokenizer::Load(model_dir);
  ASSERT_TRUE(tok.ok()) << tok.status();

  size_t id_mismatch = 0, text_mismatch = 0, changed = 0;
  for (size_t n = 0; n < texts.size(); ++n) {
    const auto want = refs[n]["plain"].get<std::vector<int32_t>>();
    const std::string want_text = refs[n]["nfc"].get<std::string>();
    if (want_text != texts[n]) ++changed;
    auto got = (*tok)->Encode(texts[n], false);
    ASSERT_TRUE(got.ok()) << got.status();
    if (*got != want && ++id_mismatch <= 5) {
      ADD_FAILURE() << "string " << Json(texts[n]).dump()
                    << "\n  rust: " << Json(want).dump()
                    << "\n  hy:   " << Json(*got).dump();
    }
    auto back = (*tok)->Decode(*got);
    ASSERT_TRUE(back.ok()) << back.status();
    if (*back != want_text && ++text_mismatch <= 5) {
      ADD_FAILURE() << "normalized " << Json(texts[n]).dump()
                    << "\n  rust: " << Json(want_text).dump()
                    << "\n  hy:   " << Json(*back).dump();
    }
  }
  std::printf(
      "[ nfc             ] %zu code points, %zu strings (%zu changed by "
      "HF's NFC): %zu id mismatches, %zu normalized-text mismatches\n",
      code_points, texts.size(), changed, id_mismatch, text_mismatch);
  // The probes must exercise normalization, or they prove nothing.
  EXPECT_GT(changed, 1000u);
  EXPECT_EQ(id_mismatch, 0u);
  EXPECT_EQ(text_mismatch, 0u);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace hy::trainer
