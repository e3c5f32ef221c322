// EventWriter and the readers: a round trip through a real file, a damaged
// CRC is DataLoss, a record cut short at the end is tolerated, a directory
// of files read with TensorBoard's purge-on-START rule. The bytes are
// checked against TensorBoard's own reader in tests/cli/metrics/tensorboard_test.py.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "hy/metrics/tensorboard/event_reader.h"
#include "hy/metrics/tensorboard/event_writer.h"
#include "testing/temp_dir.h"

namespace hy::metrics::tensorboard {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A file with the version event, a START at 1, three scalar events at
// steps 1..3 and one text event at step 1.
std::string WriteSample(const std::string& dir) {
  auto w = EventWriter::Open(dir);
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE((*w)->SessionStart(1).ok());
  EXPECT_TRUE((*w)->Text(1, "config", "```yaml\na: 1\n```").ok());
  for (int step = 1; step <= 3; ++step) {
    EXPECT_TRUE((*w)->Scalars(step, {{"ppo/reward", 0.1 * step},
                                     {"reshard/bytes", 1e6 * step}})
                    .ok());
  }
  EXPECT_TRUE((*w)->Close().ok());
  return (*w)->path();
}

TEST(EventFileTest, RoundTrip) {
  TempDir dir;
  const std::string path = WriteSample(dir.path() + "/tb");
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0),
            0u);
  auto file = ReadEventFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->records, 6);
  EXPECT_EQ(file->truncated_tail_bytes, 0);
  EXPECT_EQ(file->events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(file->events[1].session_start);
  EXPECT_EQ(file->events[1].step, 1);
  EXPECT_EQ(file->events[2].texts.at("config"), "```yaml\na: 1\n```");
  EXPECT_EQ(file->events[4].step, 2);
  EXPECT_EQ(file->events[4].scalars.at("ppo/reward"), static_cast<float>(0.2));
  EXPECT_EQ(file->events[4].scalars.at("reshard/bytes"), 2e6f);
  EXPECT_GT(file->events[4].wall_time, 1.6e9);
}

TEST(EventFileTest, DamagedDataCrcIsDataLoss) {
  TempDir dir;
  const std::string path = WriteSample(dir.path());
  std::string bytes = ReadAll(path);
  bytes[bytes.size() - 6] ^= 0x01;  // Inside the last record's data.
  WriteAll(path, bytes);
  auto file = ReadEventFile(path);
  ASSERT_FALSE(file.ok());
  EXPECT_TRUE(file.status().IsDataLoss()) << file.status();
  EXPECT_NE(file.status().message().find("data's CRC"), std::string::npos)
      << file.status();
  EXPECT_NE(file.status().message().find("record 5"), std::string::npos)
      << file.status();
}

TEST(EventFileTest, DamagedLengthIsDataLoss) {
  TempDir dir;
  const std::string path = WriteSample(dir.path());
  std::string bytes = ReadAll(path);
  bytes[0] ^= 0x40;  // The first record's length.
  WriteAll(path, bytes);
  auto file = ReadEventFile(path);
  ASSERT_FALSE(file.ok());
  EXPECT_TRUE(file.status().IsDataLoss()) << file.status();
  EXPECT_NE(file.status().message().find("length's CRC"), std::string::npos)
      << file.status();
}

TEST(EventFileTest, TruncatedTailIsEndOfFile) {
  TempDir dir;
  const std::string path = WriteSample(dir.path());
  const std::string whole = ReadAll(path);
  // Every cut inside the last record: the other records read back.
  auto full = ReadEventFile(path);
  ASSERT_TRUE(full.ok());
  for (size_t cut = 1; cut < 40; ++cut) {
    WriteAll(path, whole.substr(0, whole.size() - cut));
    auto file = ReadEventFile(path);
    ASSERT_TRUE(file.ok()) << "cut " << cut << ": " << file.status();
    EXPECT_EQ(file->records, 5) << "cut " << cut;
    EXPECT_GT(file->truncated_tail_bytes, 0) << "cut " << cut;
    EXPECT_EQ(file->events.back().step, 2);
  }
}

TEST(EventFileTest, NewFilesSortAfterOldOnes) {
  TempDir dir;
  // A file stamped in the future: the next one must still sort after it.
  WriteAll(dir.path() + "/events.out.tfevents.9999999990.elsewhere.1.hy", "");
  auto w = EventWriter::Open(dir.path());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(fs::path((*w)->path())
                .filename()
                .string()
                .rfind("events.out.tfevents.9999999991.", 0),
            0u)
      << (*w)->path();
}

TEST(EventFileTest, SessionStartReplacesLaterSteps) {
  TempDir dir;
  {
    auto w = EventWriter::Open(dir.path());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->SessionStart(1).ok());
    for (int step = 1; step <= 5; ++step) {
      ASSERT_TRUE((*w)->Scalars(step, {{"a", 1.0 * step}}).ok());
    }
    ASSERT_TRUE((*w)->Text(1, "config", "first").ok());
    ASSERT_TRUE((*w)->Flush().ok());
    // Killed mid-record: cut the last 3 bytes.
    const std::string bytes = ReadAll((*w)->path());
    ASSERT_TRUE((*w)->Close().ok());
    WriteAll((*w)->path(), bytes.substr(0, bytes.size() - 3));
  }
  {
    auto w = EventWriter::Open(dir.path());  // A second process.
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->SessionStart(4).ok());
    ASSERT_TRUE((*w)->Text(4, "config", "second").ok());
    for (int step = 4; step <= 6; ++step) {
      ASSERT_TRUE((*w)->Scalars(step, {{"a", 10.0 * step}}).ok());
    }
  }
  auto run = ReadRunEvents(dir.path());
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->files.size(), 2u);
  EXPECT_EQ(run->session_starts, 2);
  EXPECT_EQ(run->purged_points, 2);         // Steps 4 and 5 of the first file.
  EXPECT_GT(run->truncated_tail_bytes, 0);  // The text event was cut.
  const auto& a = run->scalars.at("a");
  ASSERT_EQ(a.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a[i].step, i + 1);
    EXPECT_EQ(a[i].value, static_cast<float>(i < 3 ? i + 1 : 10 * (i + 1)));
  }
  ASSERT_EQ(run->texts.at("config").size(), 1u);
  EXPECT_EQ(run->texts.at("config")[0].text, "second");
}

TEST(EventFileTest, MissingDirectoryIsNotFound) {
  TempDir dir;
  auto run = ReadRunEvents(dir.path() + "/none");
  ASSERT_FALSE(run.ok());
  EXPECT_TRUE(run.status().IsNotFound()) << run.status();
}

TEST(EventFileTest, UnwritableDirectoryIsIOError) {
  TempDir dir;
  WriteAll(dir.path() + "/file", "x");
  auto w = EventWriter::Open(dir.path() + "/file/tb");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kIOError) << w.status();
}

}  // namespace
}  // namespace hy::metrics::tensorboard
