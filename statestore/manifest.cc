// JSON encoding of manifests and commit records (see manifest.h).

#include "hy/statestore/manifest.h"

#include <nlohmann/json.hpp>

namespace hy::statestore {

namespace {

using nlohmann::json;

json TensorMetaJson(const TensorMeta& m) {
  return json{{"name", m.name},
              {"dtype", std::string(SafetensorsName(m.dtype))},
              {"shape", m.shape}};
}

// Reads a required field of type T; throws json::exception (caught by the
// Decode* entry points) when it is absent or of another type.
template <typename T>
T Field(const json& j, const char* key) {
  return j.at(key).get<T>();
}

Hash128 HashField(const json& j, const char* key) {
  Result<Hash128> h = Hash128::FromHex(Field<std::string>(j, key));
  if (!h.ok()) throw std::invalid_argument(std::string("bad hash in ") + key);
  return *h;
}

TensorMeta TensorMetaFromJson(const json& j) {
  TensorMeta m;
  m.name = Field<std::string>(j, "name");
  Result<DType> d = DTypeFromSafetensorsName(Field<std::string>(j, "dtype"));
  if (!d.ok()) {
    throw std::invalid_argument("tensor '" + m.name +
                                "': " + std::string(d.status().message()));
  }
  m.dtype = *d;
  m.shape = Field<std::vector<int64_t>>(j, "shape");
  Status s = m.Validate();
  if (!s.ok()) throw std::invalid_argument(std::string(s.message()));
  return m;
}

// Checks that a shard's chunks tile its local bytes exactly.
void CheckShard(const TensorMeta& meta, const ShardEntry& s) {
  Status v = s.geometry.Validate(meta.shape);
  if (!v.ok()) throw std::invalid_argument(std::string(v.message()));
  const uint64_t bytes =
      static_cast<uint64_t>(s.geometry.NumElements()) * DTypeSize(meta.dtype);
  uint64_t sum = 0;
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const uint64_t want = std::min<uint64_t>(s.chunk_bytes, bytes - sum);
    if (s.chunk_bytes == 0 || s.chunks[i].raw_length != want) {
      throw std::invalid_argument("tensor '" + meta.name + "' rank " +
                                  std::to_string(s.rank) + " chunk " +
                                  std::to_string(i) + " has the wrong length");
    }
    sum += want;
  }
  if (sum != bytes) {
    throw std::invalid_argument("tensor '" + meta.name + "' rank " +
                                std::to_string(s.rank) +
                                ": chunks do not cover the shard");
  }
}

}  // namespace

std::string EncodeRankManifest(const RankManifest& m) {
  json tensors = json::array();
  for (const TensorEntry& t : m.tensors) {
    json shards = json::array();
    for (const ShardEntry& s : t.shards) {
      json chunks = json::array();
      for (const ChunkRef& c : s.chunks) {
        chunks.push_back(json{{"a", c.address.ToHex()},
                              {"n", c.raw_length},
                              {"s", c.stored_length},
                              {"e", c.encoding}});
      }
      shards.push_back(json{{"rank", s.rank},
                            {"geometry", s.geometry.ToString()},
                            {"chunk_bytes", s.chunk_bytes},
                            {"chunks", std::move(chunks)}});
    }
    json jt = TensorMetaJson(t.meta);
    jt["shards"] = std::move(shards);
    tensors.push_back(std::move(jt));
  }
  json blobs = json::array();
  for (const BlobEntry& b : m.blobs) {
    blobs.push_back(json{{"name", b.name},
                         {"rank", b.rank},
                         {"size", b.size},
                         {"hash", b.hash.ToHex()}});
  }
  return json{{"version", m.version},
              {"rank", m.rank},
              {"logical_bytes", m.logical_bytes},
              {"stored_bytes", m.stored_bytes},
              {"new_bytes", m.new_bytes},
              {"tensors", std::move(tensors)},
              {"blobs", std::move(blobs)}}
      .dump();
}

Result<RankManifest> DecodeRankManifest(std::string_view text) {
  try {
    const json j = json::parse(text);
    RankManifest m;
    m.version = Field<uint64_t>(j, "version");
    m.rank = Field<int>(j, "rank");
    m.logical_bytes = Field<uint64_t>(j, "logical_bytes");
    m.stored_bytes = Field<uint64_t>(j, "stored_bytes");
    m.new_bytes = Field<uint64_t>(j, "new_bytes");
    for (const json& jt : j.at("tensors")) {
      TensorEntry t;
      t.meta = TensorMetaFromJson(jt);
      for (const json& js : jt.at("shards")) {
        ShardEntry s;
        s.rank = Field<int>(js, "rank");
        Result<ShardGeometry> g =
            ShardGeometry::Parse(Field<std::string>(js, "geometry"));
        if (!g.ok())
          throw std::invalid_argument(std::string(g.status().message()));
        s.geometry = *g;
        s.chunk_bytes = Field<uint64_t>(js, "chunk_bytes");
        if (s.chunk_bytes > (uint64_t{1} << 30)) {
          throw std::invalid_argument("chunk_bytes out of range");
        }
        for (const json& jc : js.at("chunks")) {
          s.chunks.push_back(
              ChunkRef{HashField(jc, "a"), Field<uint64_t>(jc, "n"),
                       Field<uint64_t>(jc, "s"), Field<std::string>(jc, "e")});
        }
        CheckShard(t.meta, s);
        t.shards.push_back(std::move(s));
      }
      m.tensors.push_back(std::move(t));
    }
    for (const json& jb : j.at("blobs")) {
      m.blobs.push_back(
          BlobEntry{Field<std::string>(jb, "name"), Field<int>(jb, "rank"),
                    Field<uint64_t>(jb, "size"), HashField(jb, "hash")});
    }
    return m;
  } catch (const std::exception& e) {
    return Status::DataLoss(std::string("corrupt rank manifest: ") + e.what());
  }
}

std::string EncodeCommitRecord(const CommitRecord& c) {
  return json{{"version", c.version},
              {"step", c.step},
              {"world_size", c.world_size},
              {"ranks", c.ranks},
              {"layout", c.layout},
              {"model_rules", c.model_rules},
              {"wall_time_ms", c.wall_time_ms},
              {"logical_bytes", c.logical_bytes},
              {"stored_bytes", c.stored_bytes},
              {"new_bytes", c.new_bytes}}
      .dump();
}

Result<CommitRecord> DecodeCommitRecord(std::string_view text) {
  try {
    const json j = json::parse(text);
    CommitRecord c;
    c.version = Field<uint64_t>(j, "version");
    c.step = Field<uint64_t>(j, "step");
    c.world_size = Field<int>(j, "world_size");
    c.ranks = Field<std::vector<int>>(j, "ranks");
    for (int r : c.ranks) {
      if (r < 0 || r >= c.world_size) throw std::invalid_argument("bad rank");
    }
    c.layout = Field<std::string>(j, "layout");
    c.model_rules = Field<std::string>(j, "model_rules");
    c.wall_time_ms = Field<int64_t>(j, "wall_time_ms");
    c.logical_bytes = Field<uint64_t>(j, "logical_bytes");
    c.stored_bytes = Field<uint64_t>(j, "stored_bytes");
    c.new_bytes = Field<uint64_t>(j, "new_bytes");
    if (c.world_size < 1 || c.world_size > (1 << 24)) {
      throw std::invalid_argument("world_size out of range");
    }
    return c;
  } catch (const std::exception& e) {
    return Status::DataLoss(std::string("corrupt commit record: ") + e.what());
  }
}

std::vector<int> CommitRecord::LocalRanks() const {
  if (!ranks.empty()) return ranks;
  std::vector<int> all(world_size);
  for (int r = 0; r < world_size; ++r) all[r] = r;
  return all;
}

Status MergeRankManifest(const RankManifest& part, Manifest* out) {
  for (const TensorEntry& t : part.tensors) {
    auto [it, inserted] =
        out->tensors.emplace(t.meta.name, TensorEntry{t.meta, {}});
    if (!inserted && it->second.meta != t.meta) {
      return Status::DataLoss("ranks disagree on tensor '" + t.meta.name +
                              "': " + it->second.meta.DebugString() + " vs " +
                              t.meta.DebugString());
    }
    for (const ShardEntry& s : t.shards) it->second.shards.push_back(s);
  }
  for (const BlobEntry& b : part.blobs) out->blobs.push_back(b);
  return Status::OK();
}

}  // namespace hy::statestore
