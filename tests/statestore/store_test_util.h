// Helpers for the store tests: temp directories and deterministic data.

#ifndef HY_TESTS_STATESTORE_STORE_TEST_UTIL_H_
#define HY_TESTS_STATESTORE_STORE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hy/statestore/store.h"

namespace hy::statestore::testing {

// A fresh directory under the test temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "hy-store-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// n bytes, a deterministic function of seed.
inline std::vector<uint8_t> Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    for (size_t j = 0; j < 8 && i + j < n; ++j)
      v[i + j] = uint8_t(r >> (8 * j));
  }
  return v;
}

// Small chunks so tests exercise many of them.
inline StoreOptions SmallChunks(uint64_t chunk_bytes = 4096) {
  StoreOptions o;
  o.chunk_bytes = chunk_bytes;
  o.threads = 2;
  return o;
}

inline ShardData WholeShard(const std::string& name, DType dtype,
                            std::vector<int64_t> shape,
                            const std::vector<uint8_t>& data) {
  ShardData s;
  s.geometry = ShardGeometry::WholeTensor(shape);
  s.meta = TensorMeta{name, dtype, std::move(shape)};
  s.data = ConstBytes(data);
  return s;
}

inline CommitRecord Commit(uint64_t version, int world_size = 1) {
  CommitRecord c;
  c.version = version;
  c.step = version * 10;
  c.world_size = world_size;
  c.layout = world_size == 1 ? "dp=1" : "fsdp=" + std::to_string(world_size);
  return c;
}

}  // namespace hy::statestore::testing

#endif  // HY_TESTS_STATESTORE_STORE_TEST_UTIL_H_
