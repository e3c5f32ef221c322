// hyctl restore ROOT --layout L --rank R --out DIR [--version STEP]: writes
// DIR/rank-<R>.safetensors, what rank R of a new world holds of a run's
// committed step under layout L, assembled through trainer::CheckpointReader
// from whichever copies (primaries or replicas) of the old ranks' parts
// survive under ROOT.
//
// Layouts:
//   fsdp=N      every tensor is flattened (row-major) and split evenly over
//               N ranks on its own: rank r holds elements
//               [floor(r * numel / N), floor((r + 1) * numel / N)), written
//               as a 1-D tensor under the tensor's name (EvenFlatPiece).
//               This is NOT reshard's ZeRO-3 flat buffer (layout.h), which
//               concatenates all tensors of a stage in model-spec order
//               before cutting: that order is the trainer's and is not
//               recorded in the store, so a per-tensor split is the one a
//               restore can state exactly. The text is parsed with
//               reshard::Layout::Parse, so only its fsdp size may exceed 1.
//   replicated  every rank holds every tensor whole, in its global shape.
//
// The file's metadata: step, version, layout, rank, source_world_size and
// source_layout (the layout the step was saved under).

#include "restore_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/recovery/node_layout.h"
#include "hy/reshard/layout.h"
#include "hy/statestore/safetensors.h"
#include "hy/statestore/store.h"
#include "hy/trainer/checkpoint.h"
#include "run_path.h"

namespace hy::cli {
namespace {

// Bytes read from the checkpoint and appended to the file at a time.
constexpr uint64_t kPieceBytes = 64 << 20;

struct Args {
  std::string root;
  int64_t step = -1;
  std::string layout;
  int rank = 0;
  std::string out;
  bool allow_other_run = false;
};

// A tensor of the output file and where its elements come from.
struct OutTensor {
  TensorMeta meta;  // As written.
  FlatRun region;   // Elements of the stored (global) tensor.
};

Status Restore(const Args& a, const RestoreLayout& layout) {
  // The reader chooses the version (newest recoverable, or of the step) and
  // reports a step that is not committed (NotFound) or a part with no
  // usable copy (DataLoss).
  Result<std::unique_ptr<trainer::CheckpointReader>> opened =
      trainer::CheckpointReader::Open(a.root, a.step, /*generation=*/-1,
                                      a.allow_other_run);
  if (!opened.ok()) {
    if (opened.status().IsNotFound()) {
      return Status::NotFound(
          (a.step >= 0 ? "step " + std::to_string(a.step) + " is not"
                       : std::string("nothing is")) +
          " committed in any store under " + a.root);
    }
    return opened.status();
  }
  std::unique_ptr<trainer::CheckpointReader> reader = std::move(opened).value();
  const statestore::CommitRecord& commit = reader->commit();
  const std::vector<std::string> names = reader->TensorNames();

  std::vector<OutTensor> tensors;
  std::vector<TensorMeta> metas;
  for (const std::string& name : names) {
    HY_ASSIGN_OR_RETURN(TensorMeta global, reader->FindTensor(name));
    HY_ASSIGN_OR_RETURN(int64_t numel, global.NumElements());
    OutTensor t;
    t.meta = global;
    if (layout.replicated) {
      t.region = {0, numel};
    } else {
      t.region = EvenFlatPiece(numel, layout.fsdp, a.rank);
      t.meta.shape = {t.region.length};
    }
    metas.push_back(t.meta);
    tensors.push_back(std::move(t));
  }

  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) {
    return Status::IOError("cannot create " + a.out + ": " + ec.message());
  }
  const std::string file =
      a.out + "/rank-" + std::to_string(a.rank) + ".safetensors";
  const std::map<std::string, std::string> metadata = {
      {"step", std::to_string(commit.step)},
      {"version", std::to_string(commit.version)},
      {"layout", layout.text},
      {"rank", std::to_string(a.rank)},
      {"source_world_size", std::to_string(commit.world_size)},
      {"source_layout", commit.layout},
  };
  HY_ASSIGN_OR_RETURN(
      std::unique_ptr<statestore::SafetensorsWriter> writer,
      statestore::SafetensorsWriter::Create(file, metas, metadata));
  std::map<std::string, const OutTensor*> by_name;
  for (const OutTensor& t : tensors) by_name[t.meta.name] = &t;
  std::vector<uint8_t> buf;
  uint64_t bytes = 0;
  int64_t elements = 0;
  for (const statestore::SafetensorsTensor& st : writer->tensors()) {
    const OutTensor& t = *by_name.at(st.meta.name);
    const int64_t es = static_cast<int64_t>(DTypeSize(t.meta.dtype));
    const int64_t step_elems =
        std::max<int64_t>(1, static_cast<int64_t>(kPieceBytes) / es);
    for (int64_t done = 0; done < t.region.length; done += step_elems) {
      const int64_t n = std::min(step_elems, t.region.length - done);
      buf.resize(static_cast<size_t>(n * es));
      HY_RETURN_IF_ERROR(reader->ReadRegion(
          t.meta.name, FlatRun{t.region.offset + done, n}, MutableBytes(buf)));
      HY_RETURN_IF_ERROR(writer->Append(t.meta.name, ConstBytes(buf)));
      bytes += buf.size();
    }
    elements += t.region.length;
  }
  HY_RETURN_IF_ERROR(writer->Finish());
  for (const std::string& f : reader->fallbacks()) {
    std::cerr << "restore: " << f << "\n";
  }
  std::cout << "restored step " << commit.step << " (version " << commit.version
            << ", " << commit.world_size << " old ranks, layout "
            << (commit.layout.empty() ? "-" : commit.layout) << ") as rank "
            << a.rank << " of " << layout.text << ": " << tensors.size()
            << " tensors, " << elements << " elements, " << bytes
            << " bytes -> " << file << "\n";
  return Status::OK();
}

int RunRestore(const Args& a) {
  // Usage errors first, before anything is read.
  Result<RestoreLayout> layout = ParseRestoreLayout(a.layout);
  Status usage = layout.status();
  if (usage.ok() && a.rank < 0) {
    usage = Status::InvalidArgument("--rank must be >= 0, got " +
                                    std::to_string(a.rank));
  }
  if (usage.ok() && !layout->replicated && a.rank >= layout->fsdp) {
    usage = Status::InvalidArgument(
        "--rank " + std::to_string(a.rank) + " is outside layout " +
        layout->text + " (ranks 0.." + std::to_string(layout->fsdp - 1) + ")");
  }
  if (!usage.ok()) {
    Report("restore", usage);
    return kExitUsage;
  }
  if (Status s = CheckRunRoot(a.root); !s.ok()) {
    return ReportArgs("restore", s);
  }
  return Report("restore", Restore(a, *layout));
}

}  // namespace

bool IsRunRoot(const std::string& path) {
  Result<std::vector<int>> nodes = recovery::ListNodes(path);
  return nodes.ok() && !nodes->empty();
}

Result<RunRootScan> ScanRunRoot(const std::string& root) {
  HY_RETURN_IF_ERROR(CheckOneRun(root));
  RunRootScan out;
  HY_ASSIGN_OR_RETURN(out.catalog,
                      recovery::Catalog::ScanRoot(root, &out.nodes));
  return out;
}

Result<RestoreLayout> ParseRestoreLayout(const std::string& text) {
  RestoreLayout out;
  if (text == "replicated") {
    out.replicated = true;
    out.text = text;
    return out;
  }
  Result<reshard::Layout> parsed = reshard::Layout::Parse(text);
  if (!parsed.ok() || parsed->tp() != 1 || parsed->pp() != 1 ||
      parsed->dp() != 1) {
    return Status::InvalidArgument(
        "layout '" + text +
        "' is not supported: give fsdp=N (N >= 1) or replicated" +
        (parsed.ok() ? std::string()
                     : " (" + std::string(parsed.status().message()) + ")"));
  }
  out.fsdp = parsed->fsdp();
  out.text = "fsdp=" + std::to_string(out.fsdp);
  return out;
}

FlatRun EvenFlatPiece(int64_t numel, int world, int rank) {
  // floor(r * numel / w) without overflow: numel = q * w + m, so
  // r * numel / w = r * q + floor(r * m / w), and r * m < w * w <= 2^40.
  const int64_t q = numel / world, m = numel % world;
  auto bound = [&](int64_t r) { return r * q + r * m / world; };
  const int64_t begin = bound(rank);
  return {begin, bound(rank + 1) - begin};
}

void AddRestoreCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app->add_subcommand(
      "restore",
      "Write one rank's shards of a run's committed step, cut for a new "
      "layout, as DIR/rank-<R>.safetensors");
  cmd->add_option("ROOT", args->root,
                  "Run root (holds node-<k>/store and node-<k>/replica-<j>)")
      ->required();
  cmd->add_option("--version,--step", args->step,
                  "Committed step (default: the newest recoverable one)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--layout", args->layout,
                  "New layout: fsdp=N (each tensor flattened and split "
                  "evenly over N ranks) or replicated")
      ->required();
  cmd->add_option("--rank", args->rank, "Rank of the new layout")->required();
  cmd->add_option("--out", args->out, "Output directory")->required();
  cmd->add_flag("--allow-other-run", args->allow_other_run,
                "Read the stores under ROOT as one run even when they record "
                "different run ids");
  cmd->callback([args, exit_code] { *exit_code = RunRestore(*args); });
}

}  // namespace hy::cli
