// hyctl's store commands, run as a real subprocess on real stores.

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hy/statestore/safetensors.h"
#include "hy/statestore/store.h"
#include "cli/hyctl_run.h"
#include "statestore/raw_db.h"
#include "statestore/store_test_util.h"

namespace hy::cli {
namespace {

using statestore::SafetensorsReader;
using statestore::testing::Bytes;
using statestore::testing::RawDb;
using statestore::testing::TempDir;

struct CmdResult {
  int code = -1;
  std::string out;  // stdout only; stderr goes to the test log.
};

CmdResult Hyctl(const std::string& args) {
  CmdResult r;
  FILE* p = popen((std::string(HYCTL_PATH) + " " + args).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Hyctl, with stderr captured too.
hy::testing::CmdResult HyctlErr(const std::string& args) {
  return hy::testing::RunCommand(std::string(hy::testing::kCleanEnv) +
                                 HYCTL_PATH + " " + args);
}

// A file with one tensor of every dtype, odd sizes and metadata.
std::string MakeSafetensors(const TempDir& dir) {
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::pair<TensorMeta, ConstBytes>> tensors;
  for (DType d : kAllDTypes) {
    const int64_t n = 10007 + static_cast<int64_t>(d);
    data.push_back(Bytes(n * DTypeSize(d), static_cast<uint64_t>(d)));
  }
  size_t i = 0;
  for (DType d : kAllDTypes) {
    const int64_t n = 10007 + static_cast<int64_t>(d);
    tensors.push_back(
        {TensorMeta{"model.t_" + std::string(SafetensorsName(d)), d, {n}},
         ConstBytes(data[i++])});
  }
  tensors.push_back({TensorMeta{"scalar", DType::kF64, {}},
                     ConstBytes(data[3]).subspan(0, 8)});
  tensors.push_back({TensorMeta{"empty", DType::kF32, {0, 4}}, ConstBytes()});
  const std::string path = dir.Sub("in.safetensors");
  EXPECT_TRUE(
      statestore::WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  return path;
}

TEST(HyctlStoreTest, ImportExportIsBitExactAndVerifyFindsDamage) {
  TempDir dir;
  const std::string in = MakeSafetensors(dir);
  const std::string store = dir.Sub("store");
  CmdResult r = Hyctl("import " + store + " --safetensors " + in +
                      " --step 7 --shards 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(version 1) in 3 shards"), std::string::npos) << r.out;

  r = Hyctl("export " + store + " --step 7 --safetensors " +
            dir.Sub("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto a = *SafetensorsReader::Open(in);
  auto b = *SafetensorsReader::Open(dir.Sub("out.safetensors"));
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const auto& t : a->tensors()) {
    const auto* u = b->Find(t.meta.name);
    ASSERT_NE(u, nullptr) << t.meta.name;
    EXPECT_EQ(u->meta, t.meta);
    EXPECT_TRUE((*a->TensorData(t.meta.name))
                    .ContentEquals(*b->TensorData(t.meta.name)))
        << t.meta.name;
  }
  EXPECT_EQ(a->metadata(), b->metadata());

  r = Hyctl("inspect " + store + " -o json");
  ASSERT_EQ(r.code, 0);
  auto versions = nlohmann::json::parse(r.out);
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0]["step"], 7);
  EXPECT_EQ(versions[0]["world_size"], 3);
  EXPECT_EQ(versions[0]["tensors"], a->tensors().size());
  r = Hyctl("inspect " + store + " --step 7 -o json");
  ASSERT_EQ(r.code, 0);
  auto v1 = nlohmann::json::parse(r.out);
  EXPECT_EQ(v1["tensors"].size(), a->tensors().size());
  EXPECT_EQ(Hyctl("verify " + store).code, 0);

  // Damage one chunk through RocksDB: verify names it and exits 3.
  std::string victim;
  {
    RawDb raw(store);
    ASSERT_TRUE(raw.ok());
    rocksdb::ColumnFamilyHandle* chunks =
        raw.cf(statestore::testing::kChunksCf);
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db()->NewIterator(rocksdb::ReadOptions(), chunks));
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    victim = Hash128::DecodeFrom(
                 reinterpret_cast<const uint8_t*>(it->key().data() + 8))
                 .ToHex();
    std::string value = it->value().ToString();
    value.back() ^= 1;
    ASSERT_TRUE(
        raw.db()->Put(rocksdb::WriteOptions(), chunks, it->key(), value).ok());
  }
  r = Hyctl("verify " + store);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find(victim), std::string::npos) << r.out;
  r = Hyctl("export " + store + " --step 7 --safetensors " +
            dir.Sub("bad.safetensors"));
  EXPECT_EQ(r.code, 3);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("bad.safetensors")));
}

TEST(HyctlStoreTest, GcAndExitCodes) {
  TempDir dir;
  const std::string in = MakeSafetensors(dir);
  const std::string store = dir.Sub("store");
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Hyctl("import " + store + " --safetensors " + in).code, 0);
  }
  CmdResult r = Hyctl("gc " + store + " --keep 1");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("dropped 2 versions"), std::string::npos) << r.out;
  r = Hyctl("inspect " + store + " -o json");
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u);
  EXPECT_EQ(Hyctl("verify " + store).code, 0);

  // Importing over a committed version is refused and leaves it intact.
  r = Hyctl("import " + store + " --safetensors " + in + " --version-id 3");
  EXPECT_EQ(r.code, 1);
  // The old spelling still works, and says it is the old one.
  hy::testing::CmdResult old =
      HyctlErr("import " + store + " --safetensors " + in + " --version 3");
  EXPECT_EQ(old.code, 1);
  EXPECT_NE(old.err.find("hyctl import: --version is the old spelling of "
                       "--version-id"),
            std::string::npos)
      << old.err;
  EXPECT_EQ(Hyctl("verify " + store + " --version-id 3").code, 0);

  EXPECT_EQ(Hyctl("inspect " + store + " --version-id 1").code, 2);  // Dropped.
  EXPECT_EQ(Hyctl("inspect " + dir.Sub("absent")).code, 2);
  EXPECT_EQ(
      Hyctl("import " + store + " --safetensors " + dir.Sub("absent")).code, 2);
  EXPECT_EQ(Hyctl("gc " + store).code, 64);  // --keep is required.
  EXPECT_EQ(Hyctl("gc " + store + " --keep 0").code, 64);
  EXPECT_EQ(Hyctl("frobnicate").code, 64);
}

// --pin takes a step (the unit users see), and one no version holds is an
// error, never silently ignored.
TEST(HyctlStoreTest, GcPinsSteps) {
  TempDir dir;
  const std::string in = MakeSafetensors(dir);
  const std::string store = dir.Sub("store");
  for (int step : {10, 20, 30}) {
    ASSERT_EQ(Hyctl("import " + store + " --safetensors " + in + " --step " +
                    std::to_string(step))
                  .code,
              0);
  }
  hy::testing::CmdResult r = HyctlErr("gc " + store + " --keep 1 --pin 15");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("no committed step 15"), std::string::npos) << r.err;
  r = HyctlErr("gc " + store + " --keep 1 --pin 10");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dropped 1 versions"), std::string::npos) << r.out;
  r = HyctlErr("inspect " + store + " -o json");
  const nlohmann::json versions = nlohmann::json::parse(r.out);
  std::vector<uint64_t> steps;
  for (const auto& v : versions) steps.push_back(v["step"]);
  EXPECT_EQ(steps, (std::vector<uint64_t>{10, 30}));

  // A store a running job holds: said so, not RocksDB's LOCK error.
  auto held = statestore::Store::Open(store, {});
  ASSERT_TRUE(held.ok()) << held.status();
  r = HyctlErr("gc " + store + " --keep 1");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("open in another process"), std::string::npos) << r.err;
}

// inspect, verify and export take a step (--step N or STORE@N), the unit
// users see, and print steps; the internal version id only where asked
// (--version-id, -o json). An unknown step is exit 2 naming it.
TEST(HyctlStoreTest, InspectVerifyExportTakeSteps) {
  TempDir dir;
  const std::string in = MakeSafetensors(dir);
  const std::string store = dir.Sub("store");
  // Version ids 5 and 6 hold steps 10 and 20.
  for (int step : {10, 20}) {
    ASSERT_EQ(Hyctl("import " + store + " --safetensors " + in + " --step " +
                    std::to_string(step) + " --version " +
                    std::to_string(step / 10 + 4))
                  .code,
              0);
  }
  hy::testing::CmdResult r =
      HyctlErr("inspect " + store + " --step 10 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["step"], 10);
  EXPECT_EQ(j["version"], 5);
  r = HyctlErr("inspect " + store + "@20 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["version"], 6);
  r = HyctlErr("inspect " + store + " --version-id 5 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["step"], 10);
  // The listing's first column is the step; version ids are not shown.
  r = HyctlErr("inspect " + store);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("STEP ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\n10 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n20 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("VERSION"), std::string::npos) << r.out;

  r = HyctlErr("verify " + store + " --step 20 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["step"], 20);
  EXPECT_EQ(j[0]["version"], 6);
  EXPECT_EQ(HyctlErr("verify " + store + "@10").code, 0);

  const std::string out = dir.Sub("out.safetensors");
  r = HyctlErr("export " + store + "@10 --safetensors " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step 10"), std::string::npos) << r.out;
  r = HyctlErr("export " + store + " --step 20 --safetensors " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step 20"), std::string::npos) << r.out;

  // An unknown step: exit 2, naming it. Never read as a version id.
  for (const std::string& cmd :
       {"inspect " + store + " --step 5", "verify " + store + " --step 5",
        "export " + store + " --step 5 --safetensors " + dir.Sub("x.st"),
        "inspect " + store + "@5"}) {
    r = HyctlErr(cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("step 5 is not committed"), std::string::npos)
        << cmd << "\n"
        << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("x.st")));
  // A step given twice, or with a version id, is a usage error.
  EXPECT_EQ(HyctlErr("inspect " + store + "@10 --step 10").code, 64);
  EXPECT_EQ(HyctlErr("verify " + store + " --step 10 --version-id 5").code, 64);
  // --version is gone: it read an internal id where users meant a step.
  EXPECT_EQ(
      HyctlErr("export " + store + " --version 5 --safetensors " + out).code,
      64);
}

// `hyctl --help` lists every exit code hyctl can return, hyctl train's
// recovery codes (recovery::kExitPeerFailed, kExitUnrecoverable) too.
TEST(HyctlStoreTest, HelpListsEveryExitCode) {
  const hy::testing::CmdResult r = HyctlErr("--help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line :
       {"\n  0   success", "\n  1   error", "\n  2   not found",
        "\n  3   data loss", "\n  64  bad usage",
        "\n  75  train: ", "\n  76  train: unrecoverable"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
}

}  // namespace
}  // namespace hy::cli
