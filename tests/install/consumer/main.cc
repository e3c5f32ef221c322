// Uses an installed hy: saves a tensor into a store, commits it, reads it
// back and parses a layout. Prints "ok" and exits 0 when all of it works.
//
//   hy_consumer <store dir>

#include <cstdio>
#include <vector>

#include "hy/reshard/layout.h"
#include "hy/statestore/store.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  hy::statestore::StoreOptions options;
  auto store = hy::statestore::Store::Open(argv[1], options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  std::vector<float> data = {1.5f, -2.0f, 3.25f, 4.0f};
  hy::statestore::SavePart part;
  part.version = 1;
  hy::statestore::ShardData shard;
  shard.meta = {"w", hy::DType::kF32, {4}};
  shard.geometry = hy::ShardGeometry::WholeTensor({4});
  shard.data = hy::ConstBytes(data.data(), data.size() * sizeof(float));
  part.shards.push_back(shard);
  hy::statestore::CommitRecord commit;
  commit.version = 1;
  hy::Status s = (*store)->Save(part, nullptr);
  if (s.ok()) s = (*store)->Commit(commit);
  std::vector<float> back(4);
  if (s.ok()) {
    s = (*store)->ReadRegion(1, "w", {0, 4},
                             hy::MutableBytes(back.data(), back.size() * 4));
  }
  auto layout = hy::reshard::Layout::Parse("tp=2,dp=2");
  if (!s.ok() || !layout.ok() || back != data) {
    std::fprintf(stderr, "failed: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
