// hyctl import and export: safetensors files in and out of a store (see
// store_commands.h).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cli_util.h"
#include "hy/statestore/safetensors.h"
#include "hy/statestore/store.h"
#include "run_path.h"
#include "state_source.h"
#include "store/transfer_commands.h"
#include "store/store_commands.h"
#include "version_select.h"

namespace hy::cli {
namespace {

using statestore::SafetensorsReader;
using statestore::SafetensorsWriter;
using statestore::Store;

// The blob that carries a safetensors file's __metadata__ through the store.
constexpr const char* kMetadataBlob = "safetensors.__metadata__";
// Export reads big tensors in pieces of at most this many bytes.
constexpr int64_t kExportPieceBytes = 64 << 20;

struct TransferArgs {
  std::string store;
  std::string file;
  std::optional<uint64_t> version;
  uint64_t step = 0;
  VersionChoice export_at;  // export's --step / --version-id / STORE@N.
  int shards = 1;
  bool allow_other_run = false;
};

// The safetensors files of an import: FILE itself; a Hugging Face sharded
// checkpoint's index (*.safetensors.index.json: every file its weight_map
// names, each tensor checked to be where the map says); or a directory
// holding such an index or one model.safetensors.
struct ImportFiles {
  std::vector<std::unique_ptr<SafetensorsReader>> files;
  size_t tensors = 0;
};

Result<ImportFiles> OpenImportFiles(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string index = path;
  if (fs::is_directory(path, ec)) {
    index = path + "/model.safetensors.index.json";
    if (!fs::exists(index, ec)) {
      const std::string single = path + "/model.safetensors";
      if (!fs::exists(single, ec)) {
        return Status::NotFound(path +
                                " holds neither model.safetensors nor "
                                "model.safetensors.index.json");
      }
      index = single;
    }
  }
  ImportFiles out;
  const std::string suffix = ".index.json";
  if (index.size() < suffix.size() ||
      index.compare(index.size() - suffix.size(), suffix.size(), suffix) != 0) {
    HY_ASSIGN_OR_RETURN(auto file, SafetensorsReader::Open(index));
    out.tensors = file->tensors().size();
    out.files.push_back(std::move(file));
    return out;
  }
  std::ifstream in(index);
  if (!in) return Status::NotFound("cannot open " + index);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("weight_map") ||
      !j["weight_map"].is_object()) {
    return Status::InvalidArgument(
        index +
        ": not a safetensors index (a JSON object with a "
        "\"weight_map\" of tensor name -> file)");
  }
  std::map<std::string, std::set<std::string>> by_file;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string() ||
        file.get<std::string>().find('/') != std::string::npos) {
      return Status::InvalidArgument(index + ": tensor " + name +
                                     " maps to no file of the directory");
    }
    by_file[file.get<std::string>()].insert(name);
  }
  const std::string dir = fs::path(index).parent_path().string();
  for (const auto& [file, names] : by_file) {
    const std::string where = (dir.empty() ? "." : dir) + "/" + file;
    HY_ASSIGN_OR_RETURN(auto reader, SafetensorsReader::Open(where));
    std::set<std::string> held;
    for (const auto& t : reader->tensors()) held.insert(t.meta.name);
    if (held != names) {
      return Status::DataLoss(where + " holds " + std::to_string(held.size()) +
                              " tensors, the index maps " +
                              std::to_string(names.size()) + " to it");
    }
    out.tensors += held.size();
    out.files.push_back(std::move(reader));
  }
  return out;
}

int Import(const TransferArgs& a) {
  // A run's stores take no import: nothing is created or opened in one.
  if (Status s = CheckImportTarget(a.store); !s.ok()) {
    return ReportArgs("import", s);
  }
  Result<ImportFiles> input = OpenImportFiles(a.file);
  if (!input.ok()) return ReportArgs("import", input.status());
  auto opened = Store::Open(a.store, statestore::StoreOptions());
  if (!opened.ok()) return Report("import", opened.status());
  Store* store = opened->get();
  if (!store->run_id().empty()) {
    return ReportArgs("import", ImportIntoRunStore(a.store, store->run_id()));
  }
  // By default the version after every one the store knows, committed,
  // aborted or left over, so an earlier failed import is never in the way.
  uint64_t version = 1;
  if (a.version) {
    version = *a.version;
  } else {
    Result<std::vector<statestore::VersionInfo>> known = store->ListVersions();
    if (!known.ok()) return Report("import", known.status());
    if (!known->empty()) version = known->back().version + 1;
  }
  // A failed import gives its version up, so no half-saved parts remain.
  auto fail = [&](const Status& s) {
    store->Abort(version).IgnoreError();
    return Report("import", s);
  };
  const std::string metadata =
      nlohmann::json(input->files[0]->metadata()).dump();

  // Each tensor is cut into `shards` contiguous flat runs, rank r holding
  // elements [n*r/K, n*(r+1)/K); an empty tensor goes whole to rank 0.
  std::vector<
      std::pair<const SafetensorsReader*, const statestore::SafetensorsTensor*>>
      tensors;
  for (const auto& file : input->files) {
    for (const auto& t : file->tensors()) tensors.emplace_back(file.get(), &t);
  }
  statestore::SaveStats total;
  for (int rank = 0; rank < a.shards; ++rank) {
    statestore::SavePart part;
    part.version = version;
    part.rank = rank;
    for (const auto& [file, tensor] : tensors) {
      const statestore::SafetensorsTensor& t = *tensor;
      const int64_t n = *t.meta.NumElements();
      const int64_t es = static_cast<int64_t>(DTypeSize(t.meta.dtype));
      const int64_t begin = n * rank / a.shards,
                    end = n * (rank + 1) / a.shards;
      statestore::ShardData s;
      s.meta = t.meta;
      ConstBytes data = *file->TensorData(t.meta.name);
      if (n == 0) {
        if (rank != 0) continue;
        s.geometry = ShardGeometry::WholeTensor(t.meta.shape);
      } else if (end > begin) {
        s.geometry = ShardGeometry::FromRuns({FlatRun{begin, end - begin}});
        data = data.subspan(begin * es, (end - begin) * es);
      } else {
        continue;
      }
      s.data = data;
      part.shards.push_back(std::move(s));
    }
    if (rank == 0) {
      part.blobs.push_back(
          {kMetadataBlob, statestore::kReplicatedBlob, ConstBytes(metadata)});
    }
    statestore::SaveStats st;
    Status s = store->Save(part, &st);
    if (!s.ok()) return fail(s);
    total.logical_bytes += st.logical_bytes;
    total.new_bytes += st.new_bytes;
  }
  statestore::CommitRecord c;
  c.version = version;
  c.step = a.step;
  c.world_size = a.shards;
  // One shard is every tensor whole on one rank; more are a per-tensor cut
  // (no reshard layout: hyctl reshard turns it into one).
  c.layout = a.shards == 1 ? "dp=1" : "flat=" + std::to_string(a.shards);
  Status s = store->Commit(c);
  if (!s.ok()) return fail(s);
  std::cout << "imported " << input->tensors << " tensors ("
            << total.logical_bytes << " bytes) as step " << a.step
            << " (version " << version << ") in " << a.shards
            << " shards; wrote " << total.new_bytes << " new bytes\n";
  return kExitOk;
}

int Export(TransferArgs a) {
  Status at = TakePathStep(&a.store, &a.export_at);
  if (!at.ok()) return ReportArgs("export", at);
  auto opened = OpenStateSource(a.store, a.export_at, a.allow_other_run);
  if (!opened.ok()) return ReportArgs("export", opened.status());
  StateSource* state = opened->get();
  std::map<std::string, std::string> metadata;
  Result<std::string> blob = state->ReadBlob(kMetadataBlob);
  if (blob.ok()) {
    try {
      metadata = nlohmann::json::parse(*blob)
                     .get<std::map<std::string, std::string>>();
    } catch (const std::exception& e) {
      return Report(
          "export",
          Status::DataLoss(std::string("bad metadata blob: ") + e.what()));
    }
  } else if (!blob.status().IsNotFound()) {
    return Report("export", blob.status());
  }
  std::vector<TensorMeta> metas = state->Tensors();
  auto writer = SafetensorsWriter::Create(a.file, metas, metadata);
  if (!writer.ok()) return Report("export", writer.status());
  std::vector<uint8_t> buf;
  uint64_t bytes = 0;
  // The writer decides the order of the data; read each tensor in pieces.
  for (const auto& t : (*writer)->tensors()) {
    const int64_t n = *t.meta.NumElements();
    const int64_t es = static_cast<int64_t>(DTypeSize(t.meta.dtype));
    const int64_t step = std::max<int64_t>(1, kExportPieceBytes / es);
    for (int64_t off = 0; off < n; off += step) {
      const int64_t len = std::min(step, n - off);
      buf.resize(len * es);
      Status s = state->ReadRegion(t.meta.name, {off, len}, MutableBytes(buf));
      if (s.ok()) s = (*writer)->Append(t.meta.name, ConstBytes(buf));
      if (!s.ok()) return Report("export", s);
      bytes += buf.size();
    }
  }
  Status s = (*writer)->Finish();
  if (!s.ok()) return Report("export", s);
  std::cout << "exported " << metas.size() << " tensors (" << bytes
            << " bytes) of " << state->Describe() << " to " << a.file << "\n";
  return kExitOk;
}

}  // namespace

void AddTransferCommands(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<TransferArgs>();
  CLI::App* imp = app->add_subcommand(
      "import", "Commit the tensors of a safetensors file as a new version");
  imp->add_option("STORE", args->store, "Store directory (created if missing)")
      ->required();
  imp->add_option("--safetensors", args->file,
                  "File to import: a .safetensors file, a sharded "
                  "checkpoint's .safetensors.index.json, or a Hugging Face "
                  "directory holding either")
      ->required();
  imp->add_option("--step", args->step, "Training step to record");
  imp->add_option("--shards", args->shards,
                  "Cut each tensor into this many flat shards (ranks)")
      ->check(CLI::Range(1, 1 << 16));
  imp->add_option("--version-id", args->version,
                  "The store's internal version id to commit as (default: "
                  "the newest committed + 1)");
  AddOldSpelling(imp, "--version", "--version-id", &args->version);
  imp->callback([args, exit_code] { *exit_code = Import(*args); });

  CLI::App* exp = app->add_subcommand(
      "export", "Write every tensor of a step as one safetensors file");
  exp->add_option("STORE", args->store,
                  "Store directory, or a run root hyctl train wrote; "
                  "STORE@STEP picks a step")
      ->required();
  AddVersionOptions(exp, &args->export_at,
                    "Step to write (default: the newest)");
  exp->add_option("--safetensors", args->file, "File to write")->required();
  exp->add_flag("--allow-other-run", args->allow_other_run,
                "Run root: read its stores as one run even when they record "
                "different run ids");
  exp->callback([args, exit_code] { *exit_code = Export(*args); });
}

}  // namespace hy::cli
