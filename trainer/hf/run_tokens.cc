#include "hy/trainer/hf/run_tokens.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "hy/common/hash.h"
#include "hy/trainer/data/special_tokens.h"
#include "hy/trainer/hf/hf_model.h"
#include "hy/trainer/tokenizer/tokenizer.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read " + path.string());
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) return Status::IOError("cannot read " + path.string());
  return text;
}

}  // namespace

Result<RunTokens> DescribeRun(const TokenSpec& spec,
                              const std::string& tokenizer_path) {
  RunTokens out;
  out.spec = spec;
  std::error_code ec;
  const fs::path dir = fs::absolute(TokenizerDir(tokenizer_path), ec);
  if (ec) return Status::IOError(tokenizer_path + ": " + ec.message());
  out.tokenizer_dir = dir.lexically_normal().string();
  for (const std::string& name : TokenizerFileNames()) {
    const fs::path file = dir / name;
    if (!fs::exists(file)) continue;
    HY_ASSIGN_OR_RETURN(std::string bytes, ReadFile(file));
    out.file_hashes[name] = ContentHash(ConstBytes(bytes)).ToHex();
  }
  if (out.file_hashes.count("tokenizer.json") == 0) {
    return Status::NotFound("no tokenizer.json in " + dir.string());
  }
  return out;
}

std::string RunTokensJson(const RunTokens& t) {
  Json j = {{"bos", t.spec.bos >= 0 ? Json(t.spec.bos) : Json(nullptr)},
            {"eos", t.spec.eos},
            {"pad", t.spec.pad},
            {"tokenizer_dir", t.tokenizer_dir},
            {"files", t.file_hashes}};
  return j.dump();
}

Result<RunTokens> ParseRunTokens(std::string_view text) {
  const Json j = Json::parse(text, nullptr, false);
  auto bad = [] {
    return Status::DataLoss(std::string(kTokensBlob) + ": not a token record");
  };
  if (j.is_discarded() || !j.is_object()) return bad();
  RunTokens out;
  try {
    out.spec.bos = j.at("bos").is_null() ? -1 : j.at("bos").get<int>();
    out.spec.eos = j.at("eos").get<std::vector<int>>();
    out.spec.pad = j.at("pad").get<int>();
    out.tokenizer_dir = j.at("tokenizer_dir").get<std::string>();
    out.file_hashes = j.at("files").get<std::map<std::string, std::string>>();
  } catch (const Json::exception&) {
    return bad();
  }
  if (out.spec.eos.empty()) return bad();
  return out;
}

Result<RunTokens> RunTokensOf(checkpoint::CheckpointReader* reader,
                              const TrainConfig& config) {
  auto blob = reader->ReadBlob(std::string(kTokensBlob));
  if (blob.ok()) return ParseRunTokens(*blob);
  if (!blob.status().IsNotFound()) return blob.status();
  RunTokens out;  // Written before the record existed: as the trainer chose.
  if (config.data.train_files.empty()) return out;
  const std::string path =
      config.data.tokenizer.empty() ? config.model.path : config.data.tokenizer;
  HY_ASSIGN_OR_RETURN(auto tokenizer, Tokenizer::Load(path));
  std::string source_config;
  auto hf = reader->ReadBlob(std::string(kHfConfigBlob));
  if (hf.ok()) source_config = *hf;
  HY_ASSIGN_OR_RETURN(std::optional<std::string> turn_end, TurnEndOf(path));
  HY_ASSIGN_OR_RETURN(
      TokenSpec spec,
      SpecialTokensFor(*tokenizer, turn_end,
                       HfModelEosIds(config.model.path, source_config)));
  return DescribeRun(spec, path);
}

Status CheckTokenizerFiles(const RunTokens& t, const std::string& dir) {
  for (const auto& [name, hash] : t.file_hashes) {
    const fs::path file = fs::path(dir) / name;
    if (!fs::exists(file)) {
      return Status::NotFound(file.string() +
                              " is gone (the run tokenized with it)");
    }
    HY_ASSIGN_OR_RETURN(std::string bytes, ReadFile(file));
    if (ContentHash(ConstBytes(bytes)).ToHex() != hash) {
      return Status::FailedPrecondition(
          file.string() +
          " changed since the run tokenized with it (xxh3-128 " + hash +
          " then)");
    }
  }
  return Status::OK();
}

}  // namespace hy::trainer
