// Byte-level BPE: the merge loop, the rank table keyed by a pair of ids and
// the sharded word cache.

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <queue>
#include <string>
#include <utility>

#include "tokenizer_internal.h"

namespace hy::trainer::tokenizer_internal {
namespace {

// Words up to this many bytes merge by rescanning a flat array (cheap for
// the short pieces that make up almost all text); longer ones use a heap.
constexpr size_t kSmallWord = 64;
// Longer words are not cached (they are rare and would crowd the cache).
constexpr size_t kMaxCachedWord = 256;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

// A fast hash of a short byte string (never 0, which marks empty slots).
uint64_t HashWord(std::string_view w) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (w.size() * 0xFF51AFD7ED558CCDull);
  size_t i = 0;
  for (; i + 8 <= w.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, w.data() + i, 8);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, w.data() + i, w.size() - i);
  h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 32;
  return h | 1;
}

uint64_t Mix(uint64_t key) {
  key ^= key >> 31;
  key *= 0x9E3779B97F4A7C15ull;
  key ^= key >> 29;
  return key;
}

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::Build(
    std::vector<std::string> tokens, const std::vector<Merge>& merges,
    bool ignore_merges, Unknown unknown, std::string_view where) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->tokens_ = std::move(tokens);
  m->ignore_merges_ = ignore_merges;
  m->unknown_ = unknown;
  m->ids_.reserve(m->tokens_.size());
  for (size_t id = 0; id < m->tokens_.size(); ++id) {
    if (m->tokens_[id].empty()) continue;
    m->ids_.emplace(m->tokens_[id], static_cast<int32_t>(id));  // first wins
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    m->byte_ids_[b] = m->Find(std::string_view(&c, 1));
    if (m->byte_ids_[b] < 0) m->all_bytes_ = false;
  }

  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity <<= 1;
  m->merge_table_.assign(capacity, MergeEntry{kEmptyKey, 0, 0});
  m->merge_mask_ = capacity - 1;
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& mg = merges[rank];
    joined = m->tokens_[mg.left];
    joined += m->tokens_[mg.right];
    const int32_t merged = m->Find(joined);
    if (merged < 0) {
      return Status::InvalidArgument(
          std::string(where) + ": model.merges[" + std::to_string(rank) +
          "]: the merged token is not in model.vocab");
    }
    const uint64_t key = PairKey(mg.left, mg.right);
    size_t slot = Mix(key) & m->merge_mask_;
    while (m->merge_table_[slot].key != kEmptyKey &&
           m->merge_table_[slot].key != key) {
      slot = (slot + 1) & m->merge_mask_;
    }
    if (m->merge_table_[slot].key == key) continue;  // the lower rank stays
    m->merge_table_[slot] = MergeEntry{key, static_cast<int32_t>(rank), merged};
  }
  m->cache_.reset(new CacheShard[kCacheShards]);
  return m;
}

std::vector<uint8_t> BpeModel::MissingBytes() const {
  std::vector<uint8_t> missing;
  for (int b = 0; b < 256; ++b) {
    if (byte_ids_[b] < 0) missing.push_back(static_cast<uint8_t>(b));
  }
  return missing;
}

size_t BpeModel::InitialSymbols(std::string_view word, int32_t* syms) const {
  size_t count = 0;
  if (all_bytes_) {
    for (const char c : word) syms[count++] = byte_ids_[static_cast<uint8_t>(c)];
    return count;
  }
  bool after_unknown = false;  // the previous symbol stands for such bytes
  for (const char c : word) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      syms[count++] = id;
      after_unknown = false;
    } else if (unknown_.unk_id >= 0 &&
               !(unknown_.fuse_unk && after_unknown)) {
      syms[count++] = unknown_.unk_id;
      after_unknown = true;
    }
  }
  return count;
}

int32_t BpeModel::Find(std::string_view bytes) const {
  auto it = ids_.find(bytes);
  return it == ids_.end() ? -1 : it->second;
}

const BpeModel::MergeEntry* BpeModel::FindMerge(int32_t left,
                                                int32_t right) const {
  const uint64_t key = PairKey(left, right);
  size_t slot = Mix(key) & merge_mask_;
  while (true) {
    const MergeEntry& e = merge_table_[slot];
    if (e.key == key) return &e;
    if (e.key == kEmptyKey) return nullptr;
    slot = (slot + 1) & merge_mask_;
  }
}

void BpeModel::EncodeWord(std::string_view word,
                          std::vector<int32_t>* out) const {
  if (word.size() == 1 && all_bytes_) {
    out->push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const bool cached = word.size() <= kMaxCachedWord;
  const uint64_t hash = cached ? HashWord(word) : 0;
  if (cached && CacheLookup(word, hash, out)) return;
  const size_t first = out->size();
  // ignore_merges: a word that is itself a token is that token.
  const int32_t whole = ignore_merges_ ? Find(word) : -1;
  if (whole >= 0) {
    out->push_back(whole);
  } else {
    MergeWord(word, out);
  }
  if (cached) CacheStore(word, hash, out->data() + first, out->size() - first);
}

bool BpeModel::CacheLookup(std::string_view word, uint64_t hash,
                           std::vector<int32_t>* out) const {
  CacheShard& shard = cache_[hash % kCacheShards];
  if (word.size() <= kSlotKey) {
    const CacheSlot& slot = shard.slots[(hash >> 6) % kSlotsPerShard];
    std::lock_guard<std::mutex> lock(shard.mu);
    if (slot.hash != hash || slot.len != word.size() ||
        std::memcmp(slot.key, word.data(), word.size()) != 0) {
      return false;
    }
    out->insert(out->end(), slot.ids, slot.ids + slot.n);
    return true;
  }
  std::string key(word);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.long_words.find(key);
  if (it == shard.long_words.end()) return false;
  out->insert(out->end(), it->second.begin(), it->second.end());
  return true;
}

void BpeModel::CacheStore(std::string_view word, uint64_t hash,
                          const int32_t* ids, size_t n) const {
  CacheShard& shard = cache_[hash % kCacheShards];
  if (word.size() <= kSlotKey) {
    if (n > kSlotIds) return;  // rare (e.g. unmerged random bytes)
    CacheSlot& slot = shard.slots[(hash >> 6) % kSlotsPerShard];
    std::lock_guard<std::mutex> lock(shard.mu);
    slot.hash = hash;
    slot.len = static_cast<uint8_t>(word.size());
    slot.n = static_cast<uint8_t>(n);
    std::memcpy(slot.key, word.data(), word.size());
    std::memcpy(slot.ids, ids, n * sizeof(int32_t));
    return;
  }
  std::string key(word);
  std::vector<int32_t> value(ids, ids + n);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.long_words.size() >= kLongWordsPerShard) shard.long_words.clear();
  shard.long_words.emplace(std::move(key), std::move(value));
}

void BpeModel::MergeWord(std::string_view word,
                         std::vector<int32_t>* out) const {
  if (word.size() <= kSmallWord) {
    MergeSmall(word, out);
  } else {
    MergeLarge(word, out);
  }
}

// Repeatedly merges the adjacent pair of lowest rank (the leftmost among
// equals), keeping the symbols and the ranks of their pairs in flat arrays.
void BpeModel::MergeSmall(std::string_view word,
                          std::vector<int32_t>* out) const {
  int32_t syms[kSmallWord];
  int32_t ranks[kSmallWord];   // ranks[i]: rank of the pair (i, i + 1)
  int32_t merged[kSmallWord];  // merged[i]: the id that pair becomes
  size_t count = InitialSymbols(word, syms);
  auto rank_of = [&](size_t i) {
    const MergeEntry* e = FindMerge(syms[i], syms[i + 1]);
    if (e == nullptr) return INT32_MAX;
    merged[i] = e->merged;
    return e->rank;
  };
  for (size_t i = 0; i + 1 < count; ++i) ranks[i] = rank_of(i);
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    syms[best] = merged[best];
    for (size_t j = best + 1; j + 1 < count; ++j) {
      syms[j] = syms[j + 1];
      if (j + 2 < count) {
        ranks[j] = ranks[j + 1];
        merged[j] = merged[j + 1];
      }
    }
    --count;
    if (best + 1 < count) ranks[best] = rank_of(best);
    if (best > 0) ranks[best - 1] = rank_of(best - 1);
  }
  out->insert(out->end(), syms, syms + count);
}

// The same order of merges for long words in O(n log n): a heap of
// candidate pairs ordered by (rank, position) over a linked list of symbols;
// stale candidates are dropped when popped.
void BpeModel::MergeLarge(std::string_view word,
                          std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t id;  // -1 once merged into its left neighbour
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank, pos, left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<int32_t> ids(word.size());
  const int32_t n = static_cast<int32_t>(InitialSymbols(word, ids.data()));
  if (n == 0) return;
  std::vector<Symbol> syms(n);
  for (int32_t i = 0; i < n; ++i) {
    syms[i] = Symbol{ids[i], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    const int32_t next = syms[pos].next;
    if (next < 0) return;
    const MergeEntry* e = FindMerge(syms[pos].id, syms[next].id);
    if (e != nullptr) {
      heap.push(
          Candidate{e->rank, pos, syms[pos].id, syms[next].id, e->merged});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& s = syms[c.pos];
    if (s.id != c.left || s.next < 0 || syms[s.next].id != c.right) continue;
    Symbol& r = syms[s.next];
    s.id = c.merged;
    s.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.pos;
    r.id = -1;
    if (s.prev >= 0) push(s.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

}  // namespace hy::trainer::tokenizer_internal
