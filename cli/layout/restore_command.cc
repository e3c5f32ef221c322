// hyctl restore ROOT --layout L --rank R --out DIR [--step STEP]: writes
// DIR/rank-<R>.safetensors, what rank R of a new world holds of a run's
// committed step under layout L, assembled through checkpoint::CheckpointReader
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
//   any other   (tp, pp, dp, fsdp, e.g. tp=2,dp=2 or tp=2,fsdp=4): each
//               model of the run (its parameters, each Adam moment, the
//               reference; run_models.h) cut as a trainer of that layout
//               cuts it (hy/reshard/shard_map.h), the fsdp dimension
//               flattening the tensors in the trainer's order. A rank's
//               box (tp, pp, dp) is written in its box's shape, flat runs
//               (fsdp) as a 1-D tensor; the metadata "geometry.<name>"
//               gives each tensor's place in the global one. A tensor the
//               rank holds nothing of is left out.
//
// The file's metadata: step, version, layout, rank, source_world_size and
// source_layout (the layout the step was saved under).

#include "layout/restore_command.h"

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
#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/run_root.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/shard_map.h"
#include "hy/statestore/safetensors.h"
#include "hy/statestore/store.h"
#include "layout/run_models.h"

namespace hy::cli {
namespace {

// Bytes read from the checkpoint and appended to the file at a time.
constexpr uint64_t kPieceBytes = 64 << 20;

struct RestoreArgs {
  std::string root;
  int64_t step = -1;
  std::string layout;
  int rank = 0;
  std::string out;
  bool allow_other_run = false;
};

// A tensor of the output file and where its elements come from.
struct OutTensor {
  TensorMeta meta;            // As written.
  std::vector<FlatRun> runs;  // Elements of the stored (global) tensor.
};

// The tensors rank `rank` holds under `layout`, cut by ShardMap per model.
Status ModelLayoutTensors(checkpoint::CheckpointReader* reader,
                          const reshard::Layout& layout, int rank,
                          std::vector<OutTensor>* out,
                          std::map<std::string, std::string>* metadata) {
  HY_ASSIGN_OR_RETURN(std::vector<RunModel> models,
                      RunModelsOf(reader, /*rules=*/""));
  for (const RunModel& m : models) {
    HY_ASSIGN_OR_RETURN(const reshard::ShardMap map, CutModel(m, layout));
    for (int t = 0; t < static_cast<int>(m.spec.tensors.size()); ++t) {
      const reshard::RankShard& s = map.Get(rank, t);
      if (!s.has_shard) continue;
      OutTensor o;
      o.meta = m.spec.tensors[t].meta;
      o.runs = s.runs;
      if (s.geometry.kind() == ShardGeometry::Kind::kBox) {
        o.meta.shape = s.geometry.box().sizes;
      } else {
        o.meta.shape = {s.num_elements};
      }
      (*metadata)["geometry." + o.meta.name] = s.geometry.ToString();
      out->push_back(std::move(o));
    }
  }
  return Status::OK();
}

Status Restore(const RestoreArgs& a, const RestoreLayout& layout) {
  // The reader chooses the version (newest recoverable, or of the step) and
  // reports a step that is not committed (NotFound) or a part with no
  // usable copy (DataLoss).
  Result<std::unique_ptr<checkpoint::CheckpointReader>> opened =
      checkpoint::CheckpointReader::Open(a.root, a.step, /*generation=*/-1,
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
  std::unique_ptr<checkpoint::CheckpointReader> reader =
      std::move(opened).value();
  const statestore::CommitRecord& commit = reader->commit();

  std::vector<OutTensor> tensors;
  std::map<std::string, std::string> geometry;
  if (layout.model_layout) {
    HY_RETURN_IF_ERROR(ModelLayoutTensors(reader.get(), *layout.model_layout,
                                          a.rank, &tensors, &geometry));
  } else {
    for (const std::string& name : reader->TensorNames()) {
      HY_ASSIGN_OR_RETURN(TensorMeta global, reader->FindTensor(name));
      HY_ASSIGN_OR_RETURN(int64_t numel, global.NumElements());
      OutTensor t;
      t.meta = global;
      if (layout.replicated) {
        t.runs = {{0, numel}};
      } else {
        t.runs = {EvenFlatPiece(numel, layout.fsdp, a.rank)};
        t.meta.shape = {t.runs[0].length};
      }
      tensors.push_back(std::move(t));
    }
  }
  std::vector<TensorMeta> metas;
  for (const OutTensor& t : tensors) metas.push_back(t.meta);

  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) {
    return Status::IOError("cannot create " + a.out + ": " + ec.message());
  }
  const std::string file =
      a.out + "/rank-" + std::to_string(a.rank) + ".safetensors";
  std::map<std::string, std::string> metadata = {
      {"step", std::to_string(commit.step)},
      {"version", std::to_string(commit.version)},
      {"layout", layout.text},
      {"rank", std::to_string(a.rank)},
      {"source_world_size", std::to_string(commit.world_size)},
      {"source_layout", commit.layout},
  };
  metadata.insert(geometry.begin(), geometry.end());
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
    // Runs (a box's rows, say) go in batches of at most kPieceBytes, each
    // batch one ReadRuns (every old rank's part read once for it); a run
    // longer than that in pieces of its own.
    std::vector<FlatRun> batch;
    int64_t batch_elems = 0;
    auto flush = [&]() -> Status {
      if (batch.empty()) return Status::OK();
      buf.resize(static_cast<size_t>(batch_elems * es));
      HY_RETURN_IF_ERROR(
          reader->ReadRuns(t.meta.name, batch, MutableBytes(buf)));
      HY_RETURN_IF_ERROR(writer->Append(t.meta.name, ConstBytes(buf)));
      bytes += buf.size();
      batch.clear();
      batch_elems = 0;
      return Status::OK();
    };
    for (const FlatRun& run : t.runs) {
      for (int64_t done = 0; done < run.length; done += step_elems) {
        const int64_t n = std::min(step_elems, run.length - done);
        if (batch_elems + n > step_elems) HY_RETURN_IF_ERROR(flush());
        batch.push_back({run.offset + done, n});
        batch_elems += n;
      }
      elements += run.length;
    }
    HY_RETURN_IF_ERROR(flush());
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

int RunRestore(const RestoreArgs& a) {
  // Usage errors first, before anything is read.
  Result<RestoreLayout> layout = ParseRestoreLayout(a.layout);
  Status usage = layout.status();
  if (usage.ok() && a.rank < 0) {
    usage = Status::InvalidArgument("--rank must be >= 0, got " +
                                    std::to_string(a.rank));
  }
  if (usage.ok() && !layout->replicated && a.rank >= layout->world_size()) {
    usage = Status::InvalidArgument(
        "--rank " + std::to_string(a.rank) + " is outside layout " +
        layout->text + " (ranks 0.." +
        std::to_string(layout->world_size() - 1) + ")");
  }
  if (!usage.ok()) {
    Report("restore", usage);
    return kExitUsage;
  }
  if (Status s = recovery::RunRoot::Open(a.root).status(); !s.ok()) {
    return ReportArgs("restore", s);
  }
  // A layout that does not fit the run's tensors is a usage error too.
  return ReportArgs("restore", Restore(a, *layout));
}

}  // namespace

Result<RestoreLayout> ParseRestoreLayout(const std::string& text) {
  RestoreLayout out;
  if (text == "replicated") {
    out.replicated = true;
    out.text = text;
    return out;
  }
  Result<reshard::Layout> parsed = reshard::Layout::Parse(text);
  if (!parsed.ok()) {
    return Status::InvalidArgument(
        "layout '" + text +
        "' is not supported: give replicated or a layout such as fsdp=4, "
        "tp=2,dp=2 (" +
        std::string(parsed.status().message()) + ")");
  }
  Result<reshard::Layout> plain =
      reshard::Layout::Make(1, 1, 1, parsed->fsdp());
  if (plain.ok() && *plain == *parsed) {
    out.fsdp = parsed->fsdp();
    out.text = "fsdp=" + std::to_string(out.fsdp);
    return out;
  }
  out.model_layout = *parsed;
  out.text = parsed->ToString();
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
  auto args = std::make_shared<RestoreArgs>();
  CLI::App* cmd = app->add_subcommand(
      "restore",
      "Write one rank's shards of a run's committed step, cut for a new "
      "layout, as DIR/rank-<R>.safetensors");
  cmd->add_option("ROOT", args->root,
                  "Run root (holds node-<k>/store and node-<k>/replica-<j>)")
      ->required();
  cmd->add_option("--step", args->step,
                  "Committed step (default: the newest recoverable one)")
      ->check(CLI::NonNegativeNumber);
  AddOldSpelling(cmd, "--version", "--step", &args->step);
  cmd->add_option("--layout", args->layout,
                  "New layout: fsdp=N (each tensor flattened and split "
                  "evenly over N ranks), replicated, or any layout reshard "
                  "takes, e.g. tp=2,dp=2 (each model cut as its trainer "
                  "would)")
      ->required();
  cmd->add_option("--rank", args->rank, "Rank of the new layout")->required();
  cmd->add_option("--out", args->out, "Output directory")->required();
  cmd->add_flag("--allow-other-run", args->allow_other_run,
                "Read the stores under ROOT as one run even when they record "
                "different run ids");
  cmd->callback([args, exit_code] { *exit_code = RunRestore(*args); });
}

}  // namespace hy::cli
