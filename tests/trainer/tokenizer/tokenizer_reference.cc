#include "tokenizer_reference.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace hy::trainer::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kData = HY_TOKENIZER_DATA_DIR;
const fs::path kScript = fs::path(HY_SOURCE_DIR) / "tests" / "trainer" /
                         "tokenizer" / "tokenize_reference.py";

void AppendUtf8(uint32_t cp, std::string* out) {  // cp < 0x800 here
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::string TokenizerDir(const std::string& name) {
  return (kData / name).string();
}

::testing::AssertionResult ReferenceFilesExist() {
  for (const char* name : {"qwen3", "llama3", "smollm2"}) {
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      if (!fs::exists(kData / name / file)) {
        return ::testing::AssertionFailure()
               << "no " << (kData / name / file)
               << " (the repository carries them in tests/data/tokenizers; or configure with "
                  "-DHY_TOKENIZER_DATA_DIR=...)";
      }
    }
  }
  if (!fs::exists(HY_PYTHON_PATH)) {
    return ::testing::AssertionFailure() << "no interpreter " << HY_PYTHON_PATH
                                         << " (run scripts/install-deps.sh)";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult RunReference(const std::vector<std::string>& args) {
  std::string cmd =
      std::string("'") + HY_PYTHON_PATH + "' '" + kScript.string() + "'";
  for (const std::string& a : args) {
    if (a.find('\'') != std::string::npos) {
      return ::testing::AssertionFailure() << "quote in argument " << a;
    }
    cmd += " '" + a + "'";
  }
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    return ::testing::AssertionFailure()
           << cmd << " failed (status " << rc
           << "; exit 3: a package is missing, run scripts/install-deps.sh)";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ReadJsonLines(const std::string& path,
                                         std::vector<Json>* out) {
  std::ifstream in(path);
  if (!in) return ::testing::AssertionFailure() << "cannot read " << path;
  out->clear();
  std::string line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return ::testing::AssertionFailure()
             << path << " line " << out->size() + 1 << " is not JSON";
    }
    out->push_back(std::move(j));
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult WriteJsonValues(const std::vector<Json>& values,
                                           const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (const Json& v : values) out << v.dump() << '\n';
  out.flush();
  if (!out.good()) {
    return ::testing::AssertionFailure() << "cannot write " << path;
  }
  return ::testing::AssertionSuccess();
}

std::string WriteLlamaWithTemplate(const std::string& dir) {
  std::ifstream in(fs::path(TokenizerDir("llama3")) / "tokenizer.json");
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
  std::ofstream(fs::path(dir) / "tokenizer.json") << j.dump();
  fs::copy_file(fs::path(TokenizerDir("llama3")) / "tokenizer_config.json",
                fs::path(dir) / "tokenizer_config.json",
                fs::copy_options::overwrite_existing);
  return dir;
}

std::string ByteLevelChar(uint8_t byte) {
  // Printable Latin-1 bytes stand for themselves; the others are moved to
  // U+0100 onward, in byte order.
  auto printable = [](uint32_t b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  };
  uint32_t cp = byte;
  if (!printable(byte)) {
    cp = 256;
    for (uint32_t b = 0; b < byte; ++b) cp += printable(b) ? 0 : 1;
  }
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

std::array<int32_t, 256> ByteTokenIds(const Tokenizer& tok) {
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) {
    ids[b] = tok.TokenToId(ByteLevelChar(static_cast<uint8_t>(b))).value_or(-1);
  }
  return ids;
}

}  // namespace hy::trainer::testing
