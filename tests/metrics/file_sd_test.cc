// The file_sd JSON the ranks of a run share: one target group per rank,
// replaced when a rank restarts, trimmed when the run shrinks, and what
// `promtool check config` accepts as a file_sd file (checked in
// prometheus_test.cc through a real Prometheus).

#include "hy/metrics/file_sd.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "subprocess.h"

namespace hy::metrics {
namespace {

using nlohmann::json;

json Load(const std::string& path) {
  return json::parse(testing::ReadFile(path), nullptr, false);
}

TEST(FileSdTest, OneGroupPerRankWithLabels) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/targets.json";
  ASSERT_TRUE(SetFileSdTarget(path, 1, 2, "127.0.0.1:2001",
                              {{"run", "a"}, {"node", "5"}})
                  .ok());
  ASSERT_TRUE(SetFileSdTarget(path, 0, 2, "127.0.0.1:2000",
                              {{"run", "a"}, {"node", "4"}})
                  .ok());
  json j = Load(path);
  ASSERT_TRUE(j.is_array()) << testing::ReadFile(path);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["targets"], json::array({"127.0.0.1:2000"}));
  EXPECT_EQ(j[0]["labels"],
            (json{{"run", "a"}, {"node", "4"}, {"rank", "0"}}));
  EXPECT_EQ(j[1]["labels"]["rank"], "1");
  EXPECT_EQ(j[1]["labels"]["node"], "5");
}

TEST(FileSdTest, RestartReplacesAndShrinkTrims) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/targets.json";
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(SetFileSdTarget(path, r, 4,
                                "127.0.0.1:" + std::to_string(3000 + r), {})
                    .ok());
  }
  // Restarted on 3 ranks: rank 0 comes back first on a new port.
  ASSERT_TRUE(SetFileSdTarget(path, 0, 3, "127.0.0.1:4000", {}).ok());
  json j = Load(path);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["targets"][0], "127.0.0.1:4000");
  EXPECT_EQ(j[2]["labels"]["rank"], "2");
}

TEST(FileSdTest, ConcurrentWritersLoseNoEntry) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/targets.json";
  std::vector<std::thread> threads;
  for (int r = 0; r < 8; ++r) {
    threads.emplace_back([&, r] {
      EXPECT_TRUE(SetFileSdTarget(path, r, 8,
                                  "127.0.0.1:" + std::to_string(5000 + r), {})
                      .ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(Load(path).size(), 8u);
}

TEST(FileSdTest, UnwritableDirectoryIsAnError) {
  EXPECT_TRUE(SetFileSdTarget("/nonexistent/dir/targets.json", 0, 1,
                              "127.0.0.1:1", {})
                  .code() == StatusCode::kIOError);
}

}  // namespace
}  // namespace hy::metrics
