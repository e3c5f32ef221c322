// Offline resharding of a stored version (see stored_version.h).

#include "hy/reshard/stored_version.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "hy/reshard/shard_map.h"

namespace hy::reshard {
namespace {

using nlohmann::json;
using statestore::Store;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A box shard that is not whole rows (a row-parallel TP slice) is many
// short runs; reading each alone would decode the chunks under it once per
// run. Runs in ascending order are read together as one region of at most
// this many bytes and copied out of it.
constexpr int64_t kReadWindowBytes = int64_t{64} << 20;

// Reads rank `rank`'s shard of tensor `i` under `map` from `version` into
// `out` (resized to fit).
Status ReadNewShard(Store* store, uint64_t version, const ModelSpec& spec,
                    const ShardMap& map, int rank, int i,
                    std::vector<uint8_t>* out) {
  const TensorMeta& meta = spec.tensors[i].meta;
  const std::vector<FlatRun>& runs = map.Get(rank, i).runs;
  const int64_t es = static_cast<int64_t>(DTypeSize(meta.dtype));
  out->resize(static_cast<size_t>(map.Get(rank, i).num_elements * es));
  std::vector<uint8_t> window;
  int64_t at = 0;  // Bytes of `out` filled.
  for (size_t k = 0; k < runs.size();) {
    // Runs k..j-1 lie in ascending order within one window.
    size_t j = k + 1;
    while (j < runs.size() && runs[j].offset >= runs[j - 1].end() &&
           (runs[j].end() - runs[k].offset) * es <= kReadWindowBytes) {
      ++j;
    }
    if (at + TotalLength({runs.begin() + k, runs.begin() + j}) * es >
        static_cast<int64_t>(out->size())) {
      return Status::Internal("runs of '" + meta.name + "' for rank " +
                              std::to_string(rank) + " exceed its shard");
    }
    if (j == k + 1) {
      HY_RETURN_IF_ERROR(store->ReadRegion(
          version, meta.name, runs[k],
          MutableBytes(out->data() + at, runs[k].length * es)));
      at += runs[k].length * es;
    } else {
      const FlatRun span{runs[k].offset, runs[j - 1].end() - runs[k].offset};
      window.resize(static_cast<size_t>(span.length * es));
      HY_RETURN_IF_ERROR(
          store->ReadRegion(version, meta.name, span, MutableBytes(window)));
      for (size_t r = k; r < j; ++r) {
        std::memcpy(out->data() + at,
                    window.data() + (runs[r].offset - span.offset) * es,
                    runs[r].length * es);
        at += runs[r].length * es;
      }
    }
    k = j;
  }
  if (at != static_cast<int64_t>(out->size())) {
    return Status::Internal("runs of '" + meta.name + "' for rank " +
                            std::to_string(rank) + " hold " +
                            std::to_string(at) + " bytes, not " +
                            std::to_string(out->size()));
  }
  return Status::OK();
}

// Writes every rank's part of `version` under `map`, then commits it.
// Returns the first error; the caller aborts the version.
Status SaveResharded(Store* store, uint64_t from_version,
                     const statestore::Manifest& source, const ModelSpec& spec,
                     const ModelRules& rules, const ShardMap& map,
                     uint64_t version, statestore::SaveStats* total,
                     std::vector<std::string>* dropped) {
  // Replicated blobs (configs, metadata) carry over; per-rank ones cannot.
  std::vector<std::pair<std::string, std::string>> blobs;
  for (const auto& b : source.blobs) {
    if (b.rank != statestore::kReplicatedBlob) {
      dropped->push_back("rank " + std::to_string(b.rank) + "'s blob '" +
                         b.name + "'");
      continue;
    }
    if (b.name == kTensorOrderBlob) continue;
    HY_ASSIGN_OR_RETURN(std::string data,
                        store->ReadBlob(from_version, b.name));
    blobs.emplace_back(b.name, std::move(data));
  }
  blobs.emplace_back(kTensorOrderBlob, TensorOrderJson(spec));

  const int n = static_cast<int>(spec.tensors.size());
  for (int rank = 0; rank < map.world_size(); ++rank) {
    // One rank's part at a time: Save takes a rank's shards all at once.
    std::vector<std::vector<uint8_t>> buffers(n);
    statestore::SavePart part;
    part.version = version;
    part.rank = rank;
    for (int i = 0; i < n; ++i) {
      const reshard::RankShard& shard = map.Get(rank, i);
      if (!shard.has_shard) continue;
      HY_RETURN_IF_ERROR(
          ReadNewShard(store, from_version, spec, map, rank, i, &buffers[i]));
      statestore::ShardData s;
      s.meta = spec.tensors[i].meta;
      s.geometry = shard.geometry;
      s.data = ConstBytes(buffers[i]);
      part.shards.push_back(std::move(s));
    }
    if (rank == 0) {
      for (const auto& [name, data] : blobs) {
        part.blobs.push_back(
            {name, statestore::kReplicatedBlob, ConstBytes(data)});
      }
    }
    statestore::SaveStats stats;
    HY_RETURN_IF_ERROR(store->Save(part, &stats));
    total->logical_bytes += stats.logical_bytes;
    total->new_bytes += stats.new_bytes;
    total->new_chunks += stats.new_chunks;
    total->chunks += stats.chunks;
  }
  statestore::CommitRecord c;
  c.version = version;
  c.step = source.commit.step;
  c.world_size = map.world_size();
  c.layout = map.layout().ToString();
  c.model_rules = rules.ToYaml();
  return store->Commit(c);
}

}  // namespace

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t ei = i, ej = j;
      while (ei < a.size() && IsDigit(a[ei])) ++ei;
      while (ej < b.size() && IsDigit(b[ej])) ++ej;
      // Compare the numbers without their leading zeros: first by length.
      size_t si = i, sj = j;
      while (si + 1 < ei && a[si] == '0') ++si;
      while (sj + 1 < ej && b[sj] == '0') ++sj;
      if (ei - si != ej - sj) return ei - si < ej - sj;
      const int c = a.compare(si, ei - si, b, sj, ej - sj);
      if (c != 0) return c < 0;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) {
        return static_cast<unsigned char>(a[i]) <
               static_cast<unsigned char>(b[j]);
      }
      ++i;
      ++j;
    }
  }
  if (i < a.size() || j < b.size()) return i == a.size();  // A prefix.
  return a < b;
}

std::vector<TensorMeta> InNaturalOrder(std::vector<TensorMeta> tensors) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorMeta& a, const TensorMeta& b) {
                     return NaturalLess(a.name, b.name);
                   });
  return tensors;
}

Result<std::vector<TensorMeta>> StoredTensors(
    statestore::Store* store, uint64_t version,
    const statestore::Manifest& manifest) {
  std::vector<TensorMeta> tensors;
  for (const auto& [name, t] : manifest.tensors) tensors.push_back(t.meta);
  const bool has_order =
      std::any_of(manifest.blobs.begin(), manifest.blobs.end(),
                  [](const statestore::BlobEntry& b) {
                    return b.name == kTensorOrderBlob &&
                           b.rank == statestore::kReplicatedBlob;
                  });
  if (!has_order) return InNaturalOrder(std::move(tensors));

  HY_ASSIGN_OR_RETURN(std::string blob,
                      store->ReadBlob(version, kTensorOrderBlob));
  const std::string bad = std::string("version ") + std::to_string(version) +
                          ": blob '" + kTensorOrderBlob + "' ";
  std::vector<std::string> names;
  try {
    names = json::parse(blob).get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return Status::DataLoss(bad + "is not a JSON array of names: " + e.what());
  }
  std::vector<TensorMeta> ordered;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    auto it = manifest.tensors.find(name);
    if (it == manifest.tensors.end() || !seen.insert(name).second) {
      return Status::DataLoss(bad + "names '" + name +
                              "', which is no tensor or is named twice");
    }
    ordered.push_back(it->second.meta);
  }
  if (ordered.size() != tensors.size()) {
    return Status::DataLoss(bad + "lists " + std::to_string(ordered.size()) +
                            " of the " + std::to_string(tensors.size()) +
                            " tensors");
  }
  return ordered;
}

std::string TensorOrderJson(const ModelSpec& spec) {
  json names = json::array();
  for (const auto& t : spec.tensors) names.push_back(t.meta.name);
  return names.dump();
}

Result<ReshardedVersion> ReshardStoredVersion(
    Store* store, uint64_t version, const Layout& to, const ModelRules* rules,
    std::optional<uint64_t> new_version) {
  // Everything that can be wrong with the input is checked before the first
  // write.
  HY_ASSIGN_OR_RETURN(statestore::Manifest m, store->ReadManifest(version));
  if (!m.commit.ranks.empty()) {
    return Status::FailedPrecondition(
        "version " + std::to_string(version) +
        " is a per-rank store's part of a group commit; reshard needs a "
        "store that holds every rank");
  }
  ModelRules chosen = ModelRules::Default();
  if (rules != nullptr) {
    chosen = *rules;
  } else if (!m.commit.model_rules.empty()) {
    Result<ModelRules> recorded = ModelRules::ParseYaml(m.commit.model_rules);
    if (!recorded.ok()) return recorded.status().WithContext("recorded rules");
    chosen = std::move(recorded).value();
  }
  HY_ASSIGN_OR_RETURN(std::vector<TensorMeta> tensors,
                      StoredTensors(store, version, m));
  Result<ModelSpec> spec = ModelSpec::Build(tensors, chosen);
  if (!spec.ok() && spec.status().IsNotFound()) {
    return Status::InvalidArgument(std::string(spec.status().message()) +
                                   " (give split rules with a rule for it; "
                                   "see reshard/rules/llama.yaml)");
  }
  HY_RETURN_IF_ERROR(spec.status());
  HY_ASSIGN_OR_RETURN(ShardMap map, ShardMap::Build(to, *spec));

  // By default the version after every one the store knows (as import).
  HY_ASSIGN_OR_RETURN(std::vector<statestore::VersionInfo> known,
                      store->ListVersions());
  ReshardedVersion out;
  out.version = known.empty() ? 1 : known.back().version + 1;
  if (new_version) {
    out.version = *new_version;
    for (const auto& v : known) {
      if (v.version == out.version) {
        return Status::AlreadyExists("version " + std::to_string(out.version) +
                                     " exists already (pick another new "
                                     "version)");
      }
    }
  }
  out.from = m.commit.layout;
  out.from_world = m.commit.world_size;
  out.tensors = spec->tensors.size();
  Status s = SaveResharded(store, version, m, *spec, chosen, map, out.version,
                           &out.stats, &out.dropped_blobs);
  if (!s.ok()) {
    // No half-written version stays behind.
    store->Abort(out.version).IgnoreError();
    return s;
  }
  return out;
}

}  // namespace hy::reshard
