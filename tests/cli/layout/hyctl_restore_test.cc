// hyctl restore and the run-root form of hyctl inspect, run as a
// subprocess on a run root that checkpoint::Checkpointer wrote
// (run_root_fixture.h). The other commands on a run root are in
// hyctl_run_root_test.cc.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "hy/recovery/node_identity.h"
#include "cli/hyctl_run.h"
#include "cli/run_root_fixture.h"

namespace hy::cli {
namespace {

using hy::testing::CmdResult;
using hy::testing::Hyctl;
using statestore::SafetensorsReader;
using testing::Data;
using testing::kOldWorld;
using testing::kStep;
using testing::Piece;
using testing::RunRootTest;
using testing::Slice;

class HyctlRestoreTest : public RunRootTest {};

TEST_F(HyctlRestoreTest, RestoresAnFsdpShardForANewWorldSize) {
  const std::string out = dir_.Sub("out");
  CmdResult r =
      Hyctl("restore " + root_ + " --layout fsdp=3 --rank 1 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("restored step 4"), std::string::npos) << r.out;

  auto file = SafetensorsReader::Open(out + "/rank-1.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsReader& f = **file;
  ASSERT_EQ(f.tensors().size(), 2u);
  // Rank 1 of 3: elements [numel / 3, 2 * numel / 3) of each tensor.
  const FlatRun w = Piece(35, 3, 1), b = Piece(11, 3, 1);
  EXPECT_EQ(w.offset, 11);
  EXPECT_EQ(w.length, 12);
  EXPECT_EQ(b.offset, 3);
  EXPECT_EQ(b.length, 4);
  ASSERT_NE(f.Find("w"), nullptr);
  ASSERT_NE(f.Find("b"), nullptr);
  EXPECT_EQ(f.Find("w")->meta, (TensorMeta{"w", DType::kF32, {w.length}}));
  EXPECT_EQ(f.Find("b")->meta, (TensorMeta{"b", DType::kBF16, {b.length}}));
  EXPECT_EQ(Data(f, "w"), Slice(state_.w, w));
  EXPECT_EQ(Data(f, "b"), Slice(state_.b, b));
  EXPECT_EQ(f.metadata().at("step"), "4");
  EXPECT_EQ(f.metadata().at("layout"), "fsdp=3");
  EXPECT_EQ(f.metadata().at("rank"), "1");
  EXPECT_EQ(f.metadata().at("source_world_size"), "2");
  EXPECT_EQ(f.metadata().at("source_layout"), "fsdp=2");

  // The three ranks' pieces together are the whole tensors.
  std::string w_all, b_all;
  for (int rank = 0; rank < 3; ++rank) {
    r = Hyctl("restore " + root_ +
              " --version 4 --layout fsdp=3 "
              "--rank " +
              std::to_string(rank) + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    auto g = SafetensorsReader::Open(out + "/rank-" + std::to_string(rank) +
                                     ".safetensors");
    ASSERT_TRUE(g.ok()) << g.status();
    w_all += Data(**g, "w");
    b_all += Data(**g, "b");
  }
  EXPECT_EQ(w_all, Slice(state_.w, {0, 35}));
  EXPECT_EQ(b_all, Slice(state_.b, {0, 11}));
}

TEST_F(HyctlRestoreTest, RestoresWholeTensorsWhenReplicated) {
  const std::string out = dir_.Sub("out");
  CmdResult r =
      Hyctl("restore " + root_ + " --layout replicated --rank 0 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  auto file = SafetensorsReader::Open(out + "/rank-0.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find("w")->meta, (TensorMeta{"w", DType::kF32, {5, 7}}));
  EXPECT_EQ((*file)->Find("b")->meta, (TensorMeta{"b", DType::kBF16, {11}}));
  EXPECT_EQ(Data(**file, "w"), Slice(state_.w, {0, 35}));
  EXPECT_EQ(Data(**file, "b"), Slice(state_.b, {0, 11}));
  EXPECT_EQ((*file)->metadata().at("layout"), "replicated");
}

TEST_F(HyctlRestoreTest, RejectsBadArgumentsClearly) {
  const std::string out = dir_.Sub("out");
  CmdResult r =
      Hyctl("restore " + root_ + " --layout fsdp=3 --rank 3 --out " + out);
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("--rank 3 is outside layout fsdp=3"), std::string::npos)
      << r.err;
  // A TP layout needs the split rules the step records; these are not
  // YAML.
  r = Hyctl("restore " + root_ + " --layout tp=2 --rank 0 --out " + out);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("recorded split rules do not parse"), std::string::npos)
      << r.err;
  r = Hyctl("restore " + root_ + " --layout tp=2 --rank 2 --out " + out);
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("outside layout tp=2"), std::string::npos) << r.err;
  r = Hyctl("restore " + root_ + " --layout fsdp=x --rank 0 --out " + out);
  EXPECT_EQ(r.code, 64);
  r = Hyctl("restore " + root_ +
            " --version 9 --layout fsdp=2 --rank 0 --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("step 9 is not committed"), std::string::npos) << r.err;
  r = Hyctl("restore " + dir_.Sub("nothing") +
            " --layout fsdp=2 --rank 0 --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(std::filesystem::exists(out + "/rank-0.safetensors"));
}

TEST_F(HyctlRestoreTest, InspectShowsCopiesAndRecoverability) {
  CmdResult r = Hyctl("inspect " + root_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("primary on node 0 (committed)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("primary on node 1 (committed)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("recoverable: step 4"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not recoverable"), std::string::npos) << r.out;

  // Both nodes' directories say they are on one host: inspect says what
  // replicas then protect against. On two hosts it lists them.
  hy::recovery::NodeReport host;
  host.key = "host:h1";
  host.hostname = "h1";
  ASSERT_TRUE(hy::recovery::RecordHost(root_, 0, host).ok());
  ASSERT_TRUE(hy::recovery::RecordHost(root_, 1, host).ok());
  r = Hyctl("inspect " + root_);
  EXPECT_NE(r.out.find("(hosts: 0 h1, 1 h1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every node is on host h1: replicas guard against a "
                       "lost process or disk there"),
            std::string::npos)
      << r.out;
  host.key = "host:h2";
  host.hostname = "h2";
  ASSERT_TRUE(hy::recovery::RecordHost(root_, 1, host).ok());
  r = Hyctl("inspect " + root_);
  EXPECT_NE(r.out.find("(hosts: 0 h1, 1 h2)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("every node is on host"), std::string::npos) << r.out;

  r = Hyctl("inspect " + root_ + " -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nodes"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["hosts"]["1"], "h2");
  EXPECT_EQ(j["single_host"], false);
  EXPECT_EQ(j["recoverable"], true);
  EXPECT_EQ(j["recover_step"], kStep);
  ASSERT_EQ(j["versions"].size(), 1u);
  const auto& v = j["versions"][0];
  EXPECT_EQ(v["step"], kStep);
  EXPECT_EQ(v["world_size"], kOldWorld);
  EXPECT_EQ(v["recoverable"], true);
  ASSERT_EQ(v["ranks"].size(), 2u);
  for (int rank = 0; rank < kOldWorld; ++rank) {
    const auto& copies = v["ranks"][rank]["copies"];
    ASSERT_EQ(copies.size(), 1u) << v.dump();
    EXPECT_EQ(copies[0]["node"], rank);
    EXPECT_EQ(copies[0]["replica"], false);
    EXPECT_EQ(copies[0]["state"], "committed");
  }

  // --step picks a step of the run.
  r = Hyctl("inspect " + root_ + " --step 4 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["versions"].size(), 1u);
  EXPECT_EQ(Hyctl("inspect " + root_ + " --step 9").code, 2);

  // A single store still inspects as before.
  r = Hyctl("inspect " + root_ + "/node-0/store -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto versions = nlohmann::json::parse(r.out);
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0]["step"], kStep);
  EXPECT_EQ(versions[0]["committed"], true);

  // Node 1 is lost: rank 1's part has no copy left.
  std::filesystem::remove_all(root_ + "/node-1");
  r = Hyctl("inspect " + root_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("not recoverable"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("none"), std::string::npos) << r.out;
  r = Hyctl("inspect " + root_ + " -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nodes"], nlohmann::json::array({0}));
  EXPECT_EQ(j["recoverable"], false);
  ASSERT_EQ(j["versions"].size(), 1u);
  EXPECT_EQ(j["versions"][0]["recoverable"], false);
  EXPECT_EQ(j["versions"][0]["ranks"][1]["copies"].size(), 0u);

  const std::string out = dir_.Sub("out");
  r = Hyctl("restore " + root_ + " --layout fsdp=3 --rank 1 --out " + out);
  EXPECT_EQ(r.code, 3) << r.out;  // DataLoss.
  EXPECT_NE(r.err.find("old rank(s) 1"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/rank-1.safetensors"));
}

}  // namespace
}  // namespace hy::cli
