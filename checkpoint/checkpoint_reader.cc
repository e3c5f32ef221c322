// CheckpointReader: a committed version of a run read across its stores
// (see hy/checkpoint/checkpoint.h).

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "checkpoint_internal.h"
#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/run_identity.h"

namespace hy::checkpoint {

namespace {

using internal::OpenReadOnly;
using internal::StepName;
using statestore::Store;

// A holder contributing more pieces than this to one read (a box shard's
// rows, say) is read whole once when reading piece by piece would decode
// at least as many chunk bytes (each piece costs a chunk decode, here
// taken at the default chunk size): a column box of R rows then decodes
// each chunk once instead of once per row.
constexpr size_t kMaxPiecesPerRead = 8;
constexpr int64_t kPieceDecodeBytes = int64_t{4} << 20;

// A piece of a read: elements [global_offset, +length) of the tensor, at
// local_offset in the holder's shard, going to byte out_byte of the
// output.
struct ReadPiece {
  int64_t local_offset = 0;
  int64_t global_offset = 0;
  int64_t length = 0;
  uint64_t out_byte = 0;
};

}  // namespace

namespace {

// One old rank's shard of a tensor.
struct Holder {
  int rank = 0;
  std::vector<FlatRun> runs;  // In local-buffer order.
  int64_t elements = 0;
};

struct TensorIndex {
  TensorMeta meta;
  std::vector<Holder> holders;  // In rank order.
};

// The parts of `piece` that `covered` (begin -> end, disjoint) lacks.
std::vector<FlatRun> Uncovered(const std::map<int64_t, int64_t>& covered,
                               FlatRun piece) {
  std::vector<FlatRun> out;
  int64_t pos = piece.offset;
  auto it = covered.upper_bound(pos);
  if (it != covered.begin()) --it;
  for (; it != covered.end() && it->first < piece.end(); ++it) {
    if (it->second <= pos) continue;
    if (it->first > pos) out.push_back({pos, it->first - pos});
    pos = std::max(pos, it->second);
  }
  if (pos < piece.end()) out.push_back({pos, piece.end() - pos});
  return out;
}

}  // namespace

struct CheckpointReader::Impl {
  uint64_t step = 0;  // The version read (see recovery::MakeVersion).
  statestore::CommitRecord commit;
  std::vector<std::unique_ptr<Store>> stores;  // Index = old rank.
  std::vector<recovery::CopyEntry> source;     // The copy read, per old rank.
  std::map<std::string, TensorIndex> tensors;
  std::vector<std::string> blob_names;  // Replicated, from rank 0's part.
  recovery::Catalog catalog;            // Every copy under the root.
  std::set<std::string> bad;            // CopyKeys found damaged.
  std::vector<std::string> fallbacks;

  // Opens old rank `r`'s chosen copy and adds its shards to the index.
  Status AddRank(const recovery::CopyEntry& copy, int r);
  // Opens `copy` for old rank `r` and checks it holds the same commit.
  // Opens `copy` read-only; a prepared one adopts the commit decision
  // another store holds (Store::AdoptCommit), else DataLoss.
  Result<std::unique_ptr<Store>> OpenCopyStore(const recovery::CopyEntry& copy);
  Result<std::unique_ptr<Store>> OpenCopy(const recovery::CopyEntry& copy,
                                          int r);
  // After `damage` reading old rank r's copy: marks it bad and switches to
  // another committed copy of its part (primaries first), noting it in
  // fallbacks. Returns `damage` when no other copy is left.
  Status SwitchCopy(int r, const Status& damage);
  // Runs `read` against old rank r's copy, falling back on DataLoss.
  Status WithFallback(int r, const std::function<Status(Store*)>& read);
  // Reads `pieces` (global runs of one holder) into their places in `out`.
  Status ReadPieces(const std::string& name, const TensorIndex& t,
                    const Holder& h, const std::vector<ReadPiece>& pieces,
                    MutableBytes out);
};

CheckpointReader::CheckpointReader(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CheckpointReader::~CheckpointReader() = default;

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& root, int64_t step, int64_t generation,
    bool allow_other_run) {
  std::vector<int> nodes;
  std::vector<recovery::StoreRunId> ids;
  HY_ASSIGN_OR_RETURN(recovery::Catalog catalog,
                      recovery::Catalog::ScanRoot(root, &nodes, &ids));
  if (nodes.empty()) return Status::NotFound("no store under " + root);
  if (!allow_other_run) {
    Result<std::string> run = recovery::OneRunId(root, ids);
    if (run.status().code() == StatusCode::kFailedPrecondition) {
      return Status::FailedPrecondition(
          std::string(run.status().message()) +
          ": not read as one run (--allow-other-run reads them together "
          "anyway)");
    }
    HY_RETURN_IF_ERROR(run.status());
  }
  Result<recovery::Choice> choice =
      recovery::ChooseVersion(catalog, nodes, {}, step, generation);
  if (!choice.ok()) {
    if (choice.status().IsNotFound()) {
      return Status::NotFound(
          (step >= 0 ? StepName(static_cast<uint64_t>(step)) + " is not"
                     : std::string("nothing is")) +
          " committed under " + root);
    }
    return choice.status().WithContext(root);
  }
  auto impl = std::make_unique<Impl>();
  impl->catalog = std::move(catalog);
  impl->step = choice->version;
  impl->commit = choice->commit;
  if (impl->commit.world_size < 1) {
    return Status::DataLoss(root + ": commit record of version " +
                            std::to_string(impl->step) + " has world size " +
                            std::to_string(impl->commit.world_size));
  }
  for (int r = 0; r < impl->commit.world_size; ++r) {
    HY_RETURN_IF_ERROR(impl->AddRank(choice->source[r], r));
  }
  return std::unique_ptr<CheckpointReader>(
      new CheckpointReader(std::move(impl)));
}

Status CheckpointReader::Impl::AddRank(const recovery::CopyEntry& copy, int r) {
  const std::string& path = copy.where.path;
  const std::string what = StepName(commit.step) + " (committed with " +
                           std::to_string(commit.world_size) +
                           " ranks): rank " + std::to_string(r);
  Result<std::unique_ptr<Store>> opened = OpenCopyStore(copy);
  if (!opened.ok()) {
    return Status::DataLoss(what + "'s store " + path +
                            " cannot be opened: " + opened.status().ToString());
  }
  stores.push_back(std::move(opened).value());
  source.push_back(copy);
  Store* store = stores[r].get();
  Result<statestore::Manifest> m = store->ReadManifest(step);
  if (!m.ok()) return m.status().WithContext(path);
  const statestore::CommitRecord& c = m->commit;
  if (c.step != commit.step || c.world_size != commit.world_size ||
      c.layout != commit.layout || c.model_rules != commit.model_rules) {
    return Status::DataLoss(what + "'s store " + path +
                            " holds a different commit of the version");
  }
  if (r == 0) {
    for (const statestore::BlobEntry& b : m->blobs) {
      if (b.rank == statestore::kReplicatedBlob) blob_names.push_back(b.name);
    }
  }
  for (const auto& [name, entry] : m->tensors) {
    auto [it, fresh] = tensors.emplace(name, TensorIndex{entry.meta, {}});
    if (!fresh && it->second.meta != entry.meta) {
      return Status::DataLoss("tensor '" + name + "' is " +
                              entry.meta.DebugString() + " in rank " +
                              std::to_string(r) + "'s store but " +
                              it->second.meta.DebugString() + " in another");
    }
    for (const statestore::ShardEntry& shard : entry.shards) {
      Holder h;
      h.rank = shard.rank;
      Result<std::vector<FlatRun>> runs =
          shard.geometry.ToFlatRuns(entry.meta.shape);
      if (!runs.ok()) return Status::DataLoss(runs.status().message());
      h.runs = std::move(runs).value();
      h.elements = TotalLength(h.runs);
      if (h.rank != r) {
        return Status::DataLoss(path + " holds a shard of rank " +
                                std::to_string(h.rank) + " for '" + name + "'");
      }
      it->second.holders.push_back(std::move(h));
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<Store>> CheckpointReader::Impl::OpenCopyStore(
    const recovery::CopyEntry& copy) {
  if (copy.state == recovery::CopyState::kAborted) {
    return Status::DataLoss(copy.where.path + " aborted the version");
  }
  HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                      OpenReadOnly(copy.where.path));
  if (copy.state == recovery::CopyState::kPrepared) {
    // Prepared, not committed here: readable when the coordinator decided
    // commit (its record is in another store); the rank died before it
    // copied the decision (recovery or its next Checkpointer copies it).
    const statestore::CommitRecord* decided = catalog.FindCommit(copy.version);
    if (decided == nullptr) {
      return Status::DataLoss(copy.where.path +
                              " holds its part prepared, and no store holds "
                              "a commit decision for it");
    }
    statestore::CommitRecord mine = *decided;
    mine.ranks = copy.ranks;
    HY_RETURN_IF_ERROR(store->AdoptCommit(mine));
  }
  return store;
}

Result<std::unique_ptr<Store>> CheckpointReader::Impl::OpenCopy(
    const recovery::CopyEntry& copy, int r) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenCopyStore(copy));
  HY_ASSIGN_OR_RETURN(statestore::Manifest m, store->ReadManifest(step));
  const statestore::CommitRecord& c = m.commit;
  if (c.step != commit.step || c.world_size != commit.world_size ||
      c.layout != commit.layout || c.model_rules != commit.model_rules) {
    return Status::DataLoss(copy.where.path +
                            " holds a different commit of the version");
  }
  for (const auto& [name, entry] : m.tensors) {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.meta != entry.meta) {
      return Status::DataLoss(copy.where.path + " holds another tensor '" +
                              name + "' for rank " + std::to_string(r));
    }
  }
  return store;
}

Status CheckpointReader::Impl::SwitchCopy(int r, const Status& damage) {
  bad.insert(recovery::CopyKey(source[r], r));
  std::vector<const recovery::CopyEntry*> others;
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (e.version != step || e.state == recovery::CopyState::kAborted ||
        (e.state == recovery::CopyState::kPrepared &&
         catalog.FindCommit(e.version) == nullptr) ||
        std::find(e.ranks.begin(), e.ranks.end(), r) == e.ranks.end() ||
        bad.count(recovery::CopyKey(e, r)) > 0) {
      continue;
    }
    others.push_back(&e);
  }
  std::stable_sort(others.begin(), others.end(), [](auto* a, auto* b) {
    return !a->where.replica && b->where.replica;
  });
  std::string tried;
  for (const recovery::CopyEntry* e : others) {
    Result<std::unique_ptr<Store>> store = OpenCopy(*e, r);
    if (!store.ok()) {
      bad.insert(recovery::CopyKey(*e, r));
      tried +=
          "; " + recovery::DescribeCopy(*e) + ": " + store.status().ToString();
      continue;
    }
    fallbacks.push_back("rank " + std::to_string(r) + " of " +
                        StepName(commit.step) + ": " +
                        recovery::DescribeCopy(source[r]) + " is damaged (" +
                        damage.ToString() + "); reading " +
                        recovery::DescribeCopy(*e) + " instead");
    stores[r] = std::move(store).value();
    source[r] = *e;
    return Status::OK();
  }
  return Status::DataLoss(std::string(damage.message()) + " (" +
                          recovery::DescribeCopy(source[r]) +
                          "; no other intact copy of rank " +
                          std::to_string(r) + "'s part" + tried + ")");
}

Status CheckpointReader::Impl::WithFallback(
    int r, const std::function<Status(Store*)>& read) {
  for (;;) {
    Status s = read(stores[r].get());
    if (!s.IsDataLoss()) return s;
    HY_RETURN_IF_ERROR(SwitchCopy(r, s));
  }
}

const std::vector<std::string>& CheckpointReader::fallbacks() const {
  return impl_->fallbacks;
}

uint64_t CheckpointReader::step() const { return impl_->commit.step; }

uint64_t CheckpointReader::version() const { return impl_->step; }

std::vector<std::string> CheckpointReader::TensorNames() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : impl_->tensors) out.push_back(name);
  return out;
}

const statestore::CommitRecord& CheckpointReader::commit() const {
  return impl_->commit;
}

Result<TensorMeta> CheckpointReader::FindTensor(
    const std::string& tensor) const {
  auto it = impl_->tensors.find(tensor);
  if (it == impl_->tensors.end()) {
    return Status::NotFound("no tensor '" + tensor + "' in " +
                            StepName(impl_->commit.step));
  }
  return it->second.meta;
}

Status CheckpointReader::ReadRegion(const std::string& tensor, FlatRun region,
                                    MutableBytes out) {
  return ReadRuns(tensor, {region}, out);
}

Status CheckpointReader::ReadRuns(const std::string& tensor,
                                  const std::vector<FlatRun>& runs,
                                  MutableBytes out) {
  auto it = impl_->tensors.find(tensor);
  if (it == impl_->tensors.end()) {
    return Status::NotFound("no tensor '" + tensor + "' in " +
                            StepName(impl_->commit.step));
  }
  const TensorIndex& t = it->second;
  const uint64_t es = DTypeSize(t.meta.dtype);
  const int64_t numel = *t.meta.NumElements();
  uint64_t need = 0;
  for (const FlatRun& region : runs) {
    if (region.offset < 0 || region.length < 0 || region.offset > numel ||
        region.length > numel - region.offset) {
      return Status::InvalidArgument("region outside tensor '" + tensor + "'");
    }
    need += static_cast<uint64_t>(region.length) * es;
  }
  if (out.size() != need) {
    return Status::InvalidArgument("output buffer for '" + tensor +
                                   "' has the wrong size");
  }
  // Each element comes from the lowest old rank that holds it; each holder
  // is read once for all the runs.
  std::vector<std::map<int64_t, int64_t>> covered(runs.size());
  std::vector<std::vector<ReadPiece>> pieces(t.holders.size());
  uint64_t out_byte = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    const FlatRun& region = runs[k];
    for (size_t i = 0; i < t.holders.size(); ++i) {
      for (const RunOverlap& o : IntersectRuns(t.holders[i].runs, region)) {
        for (const FlatRun& u :
             Uncovered(covered[k], FlatRun{o.global_offset, o.length})) {
          pieces[i].push_back({o.local_offset + (u.offset - o.global_offset),
                               u.offset, u.length,
                               out_byte + (u.offset - region.offset) * es});
          covered[k][u.offset] = u.end();
        }
      }
    }
    const std::vector<FlatRun> missing = Uncovered(covered[k], region);
    if (!missing.empty()) {
      return Status::DataLoss(
          "tensor '" + tensor + "' in " + StepName(impl_->commit.step) +
          ": elements [" + std::to_string(missing[0].offset) + ", " +
          std::to_string(missing[0].end()) + ") are held by no old rank");
    }
    out_byte += static_cast<uint64_t>(region.length) * es;
  }
  for (size_t i = 0; i < t.holders.size(); ++i) {
    if (pieces[i].empty()) continue;
    HY_RETURN_IF_ERROR(
        impl_->ReadPieces(tensor, t, t.holders[i], pieces[i], out));
  }
  return Status::OK();
}

Status CheckpointReader::Impl::ReadPieces(const std::string& name,
                                          const TensorIndex& t, const Holder& h,
                                          const std::vector<ReadPiece>& pieces,
                                          MutableBytes out) {
  const int64_t es = static_cast<int64_t>(DTypeSize(t.meta.dtype));
  if (pieces.size() > kMaxPiecesPerRead &&
      static_cast<int64_t>(pieces.size()) * kPieceDecodeBytes >=
          h.elements * es) {
    // Many pieces: decode the holder's shard whole, once.
    std::string shard(static_cast<size_t>(h.elements * es), '\0');
    HY_RETURN_IF_ERROR(WithFallback(h.rank, [&](Store* store) {
      return store->ReadShard(step, name, h.rank, MutableBytes(shard));
    }));
    for (const ReadPiece& p : pieces) {
      std::copy_n(shard.data() + p.local_offset * es, p.length * es,
                  out.data() + p.out_byte);
    }
    return Status::OK();
  }
  for (const ReadPiece& p : pieces) {
    HY_RETURN_IF_ERROR(WithFallback(h.rank, [&](Store* store) {
      return store->ReadRegion(step, name, FlatRun{p.global_offset, p.length},
                               out.subspan(p.out_byte, p.length * es));
    }));
  }
  return Status::OK();
}

std::vector<std::string> CheckpointReader::BlobNames() const {
  return impl_->blob_names;
}

Result<std::string> CheckpointReader::ReadBlob(const std::string& name,
                                               int rank) {
  if (rank != statestore::kReplicatedBlob &&
      (rank < 0 || rank >= static_cast<int>(impl_->stores.size()))) {
    return Status::NotFound("no old rank " + std::to_string(rank) + " in " +
                            StepName(impl_->commit.step));
  }
  std::string blob;
  HY_RETURN_IF_ERROR(impl_->WithFallback(std::max(rank, 0), [&](Store* store) {
    Result<std::string> r = store->ReadBlob(impl_->step, name, rank);
    if (r.ok()) blob = std::move(r).value();
    return r.status();
  }));
  return blob;
}

}  // namespace hy::checkpoint
