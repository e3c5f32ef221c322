// TempDir: a fresh directory under the test's temp dir, removed with its
// contents when the object dies; WriteFile puts a file in it.

#ifndef HY_TESTS_TRAINER_TEMP_DIR_H_
#define HY_TESTS_TRAINER_TEMP_DIR_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace hy {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "hy-data-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `contents` to path()/name and returns that path.
  std::string WriteFile(std::string_view name, std::string_view contents) {
    const std::string file = path_ + "/" + std::string(name);
    std::ofstream(file, std::ios::binary) << contents;
    return file;
  }

 private:
  std::string path_;
};

}  // namespace hy

#endif  // HY_TESTS_TRAINER_TEMP_DIR_H_
