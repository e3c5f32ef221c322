// Helpers for the safetensors tests: hand-built files and a fixture with a
// fresh directory per test.

#ifndef HY_TESTS_STATESTORE_SAFETENSORS_TEST_UTIL_H_
#define HY_TESTS_STATESTORE_SAFETENSORS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hy/statestore/safetensors.h"

// Not in an anonymous namespace: the read and write tests share one fixture
// class, as GoogleTest requires of one test suite.
namespace hy::statestore::testing {

namespace fs = std::filesystem;

inline std::string Le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out;
}

// A file as the specification describes it: length, header, data.
inline std::string FileBytes(const std::string& header,
                             const std::string& data) {
  return Le64(header.size()) + header + data;
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "hy_safetensors_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const {
    return (fs::path(dir_) / name).string();
  }
  std::string WriteRaw(const std::string& bytes,
                       const std::string& name = "f.safetensors") const {
    std::ofstream(Path(name), std::ios::binary) << bytes;
    return Path(name);
  }
  static std::string ReadRaw(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::vector<std::string> DirEntries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }
  // Writes `bytes` as a file and expects the reader to refuse it with
  // DataLoss whose message contains `expect`.
  void ExpectDataLoss(const std::string& bytes, const std::string& expect) {
    auto r = SafetensorsReader::Open(WriteRaw(bytes));
    ASSERT_FALSE(r.ok()) << "accepted: " << bytes;
    EXPECT_TRUE(r.status().IsDataLoss()) << r.status();
    EXPECT_NE(r.status().message().find(expect), std::string::npos)
        << r.status() << " lacks '" << expect << "'";
  }

  std::string dir_;
};

}  // namespace hy::statestore::testing

#endif  // HY_TESTS_STATESTORE_SAFETENSORS_TEST_UTIL_H_
