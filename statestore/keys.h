// Internal: the keys of a store's column families (docs/architecture.md
// lists them). Integers are big-endian so keys sort numerically.

#ifndef HY_STATESTORE_KEYS_H_
#define HY_STATESTORE_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "hy/common/hash.h"

namespace hy::statestore::keys {

inline void PutBE64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutBE32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}
inline uint64_t GetBE64(std::string_view s, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}
inline uint32_t GetBE32(std::string_view s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}
inline void PutHash(std::string* s, const Hash128& h) {
  uint8_t b[16];
  h.EncodeTo(b);
  s->append(reinterpret_cast<const char*>(b), 16);
}
inline Hash128 GetHash(std::string_view s, size_t at) {
  return Hash128::DecodeFrom(reinterpret_cast<const uint8_t*>(s.data() + at));
}

// meta CF.
inline const std::string kFormat = "format";  // -> decimal format version.
// -> u64: the highest epoch number ever handed out.
inline const std::string kEpochHighWater = "hwm";  // Not under "e".
// -> the run id the store belongs to (StoreOptions::run_id).
inline const std::string kRunId = "run_id";  // Not under "r": none exist.
// Single-letter prefixes (a, c, e, p, x) are reserved for the records below.
// "a" + address -> ChunkLocation (where the encoded chunk lives).
inline std::string ChunkIndex(const Hash128& a) {
  std::string k = "a";
  PutHash(&k, a);
  return k;
}
// "e" + epoch -> EpochRecord. An epoch is one ingested SST of chunks.
inline std::string Epoch(uint64_t e) {
  std::string k = "e";
  PutBE64(&k, e);
  return k;
}
// "p" + version + rank -> "" : rank prepared version (its part is durable).
inline std::string Prepared(uint64_t v, uint32_t rank) {
  std::string k = "p";
  PutBE64(&k, v);
  PutBE32(&k, rank);
  return k;
}
// "x" + version -> "": the version was aborted and can never commit.
inline std::string Aborted(uint64_t v) {
  std::string k = "x";
  PutBE64(&k, v);
  return k;
}
// "c" + version -> CommitRecord JSON: the version is committed.
inline std::string Committed(uint64_t v) {
  std::string k = "c";
  PutBE64(&k, v);
  return k;
}

// manifests CF.
// "m" + version + rank -> RankManifest JSON.
inline std::string RankPart(uint64_t v, uint32_t rank) {
  std::string k = "m";
  PutBE64(&k, v);
  PutBE32(&k, rank);
  return k;
}
// "b" + version + rank(+1, 0 = replicated) + name -> blob bytes.
inline std::string Blob(uint64_t v, int rank, std::string_view name) {
  std::string k = "b";
  PutBE64(&k, v);
  PutBE32(&k, static_cast<uint32_t>(rank + 1));
  k.append(name);
  return k;
}
inline std::string VersionPrefix(char tag, uint64_t v) {
  std::string k(1, tag);
  PutBE64(&k, v);
  return k;
}

// chunks CF: epoch + address -> encoded chunk.
inline std::string Chunk(uint64_t epoch, const Hash128& a) {
  std::string k;
  PutBE64(&k, epoch);
  PutHash(&k, a);
  return k;
}
inline std::string EpochBegin(uint64_t epoch) {
  std::string k;
  PutBE64(&k, epoch);
  return k;
}

// Value of ChunkIndex: where a chunk lives, how big it is, and for an XOR
// delta chunk the address of its base and its depth in the delta chain
// (0 for a full chunk).
struct ChunkLocation {
  uint64_t epoch = 0;
  uint64_t stored_length = 0;  // Encoded bytes.
  uint8_t depth = 0;
  Hash128 base;          // Zero unless depth > 0.
  std::string encoding;  // EncodingName of the chunk's header.
};
inline std::string EncodeLocation(const ChunkLocation& l) {
  std::string s;
  PutBE64(&s, l.epoch);
  PutBE64(&s, l.stored_length);
  s.push_back(static_cast<char>(l.depth));
  PutHash(&s, l.base);
  s += l.encoding;
  return s;
}
inline bool DecodeLocation(std::string_view s, ChunkLocation* l) {
  if (s.size() < 33) return false;
  l->epoch = GetBE64(s, 0);
  l->stored_length = GetBE64(s, 8);
  l->depth = static_cast<uint8_t>(s[16]);
  l->base = GetHash(s, 17);
  l->encoding.assign(s.substr(33));
  return l->depth == 0 ? l->base.IsZero() : !l->base.IsZero();
}

// Value of Epoch: how many chunks and bytes the epoch's SST holds, and
// whether the save that wrote it reached its prepare record.
struct EpochRecord {
  uint64_t chunks = 0;
  uint64_t bytes = 0;
  bool sealed = false;  // false: written, not yet referenced by a prepare.
};
inline std::string EncodeEpoch(const EpochRecord& r) {
  std::string s;
  PutBE64(&s, r.chunks);
  PutBE64(&s, r.bytes);
  s.push_back(r.sealed ? 1 : 0);
  return s;
}
inline bool DecodeEpoch(std::string_view s, EpochRecord* r) {
  if (s.size() != 17) return false;
  r->chunks = GetBE64(s, 0);
  r->bytes = GetBE64(s, 8);
  r->sealed = s[16] != 0;
  return true;
}

}  // namespace hy::statestore::keys

#endif  // HY_STATESTORE_KEYS_H_
