#include "layout/reshard_run.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/run_identity.h"
#include "hy/reshard/shard_map.h"
#include "hy/statestore/group_commit.h"
#include "hy/statestore/store.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/config/model_config.h"
#include "layout/run_models.h"

namespace hy::cli {
namespace {

namespace fs = std::filesystem;
using statestore::Store;

constexpr auto kCommitTimeout = std::chrono::seconds(60);

// A run model cut for the new layout.
struct CutRunModel {
  const RunModel* model;
  reshard::ShardMap map;
};

// trainer.config for `world` ranks at `out`: trainer.nproc, the store root
// and, when it does not divide the world, the rollout TP size (the largest
// that fits, as a resumed worker would choose).
Result<std::string> ConfigFor(const std::string& text, int world,
                              const std::string& out,
                              std::vector<std::string>* notes) {
  Result<trainer::TrainConfig> parsed = trainer::ParseConfigYaml(text);
  if (!parsed.ok()) {
    return Status::DataLoss("the step's trainer.config: " +
                            std::string(parsed.status().message()));
  }
  trainer::TrainConfig c = std::move(parsed).value();
  c.trainer.nproc = world;
  c.checkpoint.store_root = out;
  int& tp = c.rollout.tensor_model_parallel_size;
  const int wanted = tp;
  while (tp > 1 && (world % tp != 0 ||
                    !trainer::ValidateTensorParallel(c.model, tp).ok())) {
    --tp;
  }
  if (tp != wanted) {
    notes->push_back("rollout.tensor_model_parallel_size " +
                     std::to_string(wanted) + " does not divide " +
                     std::to_string(world) +
                     " ranks; the new run rolls out "
                     "with " +
                     std::to_string(tp));
  }
  return trainer::ToYaml(c);
}

// trainer.state with the new world size.
Result<std::string> StateFor(const std::string& text, int world) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) {
    return Status::DataLoss("the step's trainer.state is not a JSON object");
  }
  j["world_size"] = world;
  return j.dump();
}

// recovery.placement of `world` ranks, rank r on node r, no replicas.
std::string PlacementFor(int world) {
  nlohmann::json p = {{"nodes", nlohmann::json::array()},
                      {"hosts", nlohmann::json::array()},
                      {"replicas", 0},
                      {"replica_nodes", nlohmann::json::array()}};
  for (int r = 0; r < world; ++r) {
    p["nodes"].push_back(r);
    p["replica_nodes"].push_back(nlohmann::json::array());
  }
  return p.dump();
}

// The blobs every new rank saves (replicated), rewritten for the new world.
Result<std::vector<std::pair<std::string, std::string>>> NewBlobs(
    checkpoint::CheckpointReader* reader, int world, const std::string& out,
    std::vector<std::string>* notes) {
  std::vector<std::pair<std::string, std::string>> blobs;
  for (const std::string& name : reader->BlobNames()) {
    HY_ASSIGN_OR_RETURN(std::string data, reader->ReadBlob(name));
    if (name == "trainer.config") {
      HY_ASSIGN_OR_RETURN(data, ConfigFor(data, world, out, notes));
    } else if (name == "trainer.state") {
      HY_ASSIGN_OR_RETURN(data, StateFor(data, world));
    } else if (name == "recovery.placement") {
      data = PlacementFor(world);
    }
    blobs.emplace_back(name, std::move(data));
  }
  return blobs;
}

// New rank `rank`'s part: its shard of every tensor, read from the old
// stores, and the blobs; saved (prepared) into its store under `tmp`.
Status SaveRank(checkpoint::CheckpointReader* reader,
                const std::vector<CutRunModel>& cut,
                const std::vector<std::pair<std::string, std::string>>& blobs,
                const std::string& tmp, const std::string& run_id, int rank,
                statestore::SaveStats* stats) {
  statestore::SavePart part;
  part.version = reader->version();
  part.rank = rank;
  std::vector<std::vector<uint8_t>> buffers;
  buffers.reserve(1024);
  for (const CutRunModel& c : cut) {
    const reshard::ModelSpec& spec = c.model->spec;
    for (int t = 0; t < static_cast<int>(spec.tensors.size()); ++t) {
      const reshard::RankShard& s = c.map.Get(rank, t);
      TensorMeta meta = spec.tensors[t].meta;
      HY_ASSIGN_OR_RETURN(const int64_t numel, meta.NumElements());
      if (!s.has_shard || (s.num_elements == 0 && (numel > 0 || rank > 0))) {
        continue;
      }
      const size_t es = DTypeSize(meta.dtype);
      std::vector<uint8_t>& buf = buffers.emplace_back(s.num_elements * es);
      size_t at = 0;
      for (const FlatRun& run : s.runs) {
        HY_RETURN_IF_ERROR(reader->ReadRegion(
            meta.name, run, MutableBytes(buf.data() + at, run.length * es)));
        at += run.length * es;
      }
      statestore::ShardData d;
      d.meta = std::move(meta);
      d.geometry = s.geometry;
      d.data = ConstBytes(buf.data(), buf.size());
      part.shards.push_back(std::move(d));
    }
  }
  for (const auto& [name, data] : blobs) {
    part.blobs.push_back({name, statestore::kReplicatedBlob, ConstBytes(data)});
  }
  statestore::StoreOptions so;
  so.run_id = run_id;
  HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                      Store::Open(checkpoint::RankStorePath(tmp, rank), so));
  return store->Save(part, stats);
}

// Commits the prepared version in every new rank's store: rank 0 decides,
// the others copy its decision.
Status CommitAll(const std::string& tmp, const statestore::CommitRecord& c,
                 const std::string& run_id) {
  statestore::StoreOptions so;
  so.run_id = run_id;
  std::vector<statestore::PeerStore> peers;
  for (int r = 1; r < c.world_size; ++r) {
    peers.push_back({r, checkpoint::RankStorePath(tmp, r)});
  }
  const std::string coordinator = checkpoint::RankStorePath(tmp, 0);
  {
    HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> own,
                        Store::Open(coordinator, so));
    HY_RETURN_IF_ERROR(
        statestore::CommitAcrossStores(own.get(), c, peers, kCommitTimeout));
  }
  for (const statestore::PeerStore& p : peers) {
    HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(p.path, so));
    HY_RETURN_IF_ERROR(statestore::FollowCommit(
        store.get(), p.rank, coordinator, c.version, kCommitTimeout));
  }
  return Status::OK();
}

Status CheckOut(const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    return Status::InvalidArgument("--out " + out +
                                   " exists; name a new directory");
  }
  const fs::path parent = fs::absolute(out, ec).parent_path();
  if (!fs::is_directory(parent, ec)) {
    return Status::InvalidArgument("--out " + out + ": " + parent.string() +
                                   " is not a directory");
  }
  return Status::OK();
}

Result<RunReshardResult> Reshard(const RunReshardOptions& o,
                                 const std::string& tmp) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                      checkpoint::CheckpointReader::Open(o.root, o.step, -1,
                                                         o.allow_other_run));
  RunReshardResult result;
  result.step = reader->commit().step;
  result.from = reader->commit().layout;
  result.from_world = reader->commit().world_size;
  HY_ASSIGN_OR_RETURN(std::vector<RunModel> models,
                      RunModelsOf(reader.get(), o.rules));
  std::vector<CutRunModel> cut;
  for (const RunModel& m : models) {
    HY_ASSIGN_OR_RETURN(reshard::ShardMap map, CutModel(m, o.to));
    cut.push_back({&m, std::move(map)});
    result.tensors += m.spec.tensors.size();
  }
  Result<std::string> run_id = recovery::RecordedRunId(o.root, true);
  // Under --allow-other-run with stores of two runs: the new run records
  // none (the trainer that resumes it gives it one).
  const std::string id = run_id.ok() ? *run_id : std::string();
  const int world = o.to.world_size();
  HY_ASSIGN_OR_RETURN(auto blobs,
                      NewBlobs(reader.get(), world, o.out, &result.notes));
  statestore::SaveStats rank0;
  for (int r = 0; r < world; ++r) {
    statestore::SaveStats st;
    HY_RETURN_IF_ERROR(SaveRank(reader.get(), cut, blobs, tmp, id, r, &st)
                           .WithContext("new rank " + std::to_string(r)));
    if (r == 0) rank0 = st;
    result.bytes += st.logical_bytes;
    result.new_bytes += st.new_bytes;
  }
  for (const std::string& f : reader->fallbacks()) result.notes.push_back(f);
  statestore::CommitRecord c;
  c.version = reader->version();
  c.step = result.step;
  c.world_size = world;
  c.ranks = {0};
  c.layout = o.to.ToString();
  c.model_rules = reader->commit().model_rules;
  c.wall_time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  c.logical_bytes = rank0.logical_bytes;
  c.stored_bytes = rank0.stored_bytes;
  c.new_bytes = rank0.new_bytes;
  HY_RETURN_IF_ERROR(CommitAll(tmp, c, id));
  return result;
}

}  // namespace

Result<RunReshardResult> ReshardRunRoot(const RunReshardOptions& o) {
  HY_RETURN_IF_ERROR(CheckOut(o.out));
  const std::string tmp =
      o.out + ".partial-" + std::to_string(static_cast<long>(getpid()));
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) return Status::IOError("cannot create " + tmp + ": " + ec.message());
  Result<RunReshardResult> done = Reshard(o, tmp);
  if (done.ok()) {
    fs::rename(tmp, o.out, ec);
    if (ec) {
      done = Status::IOError("cannot rename " + tmp + " to " + o.out + ": " +
                             ec.message());
    }
  }
  if (!done.ok()) fs::remove_all(tmp, ec);
  return done;
}

}  // namespace hy::cli
