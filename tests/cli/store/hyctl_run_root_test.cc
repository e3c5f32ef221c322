// hyctl verify, export, diff, gc, import and drop on a run root (and on
// one rank's store of it), run as a subprocess on a run root that
// checkpoint::Checkpointer wrote (run_root_fixture.h): steps, not version
// ids; a root of two runs refused; one unreadable store named, the rest
// verified.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hy/common/bf16.h"
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
using testing::SaveRun;
using testing::Slice;
using testing::State;

class HyctlRunRootTest : public RunRootTest {};

// On a run root and on one rank's store of it, inspect, verify and export
// take the step, not the internal version id (step << 16 | generation).
TEST_F(HyctlRunRootTest, RunRootCommandsTakeSteps) {
  CmdResult r = Hyctl("verify " + root_ + " --step 4 -o json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v.size(), 2u) << r.out;
  EXPECT_EQ(v[0]["versions"][0]["step"], 4) << r.out;
  EXPECT_EQ(v[0]["versions"][0]["version"], 4 << 16) << r.out;
  r = Hyctl("verify " + root_ + "@4");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = Hyctl("verify " + root_ + " --step 9");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("step 9"), std::string::npos) << r.err;

  const std::string store = root_ + "/node-0/store";
  r = Hyctl("inspect " + store + " --step 4 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["version"], 4 << 16);
  r = Hyctl("inspect " + store);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(std::to_string(4 << 16)), std::string::npos) << r.out;
  r = Hyctl("inspect " + store + " --step " + std::to_string(4 << 16));
  EXPECT_EQ(r.code, 2) << r.out << r.err;

  const std::string file = dir_.Sub("at4.safetensors");
  r = Hyctl("export " + root_ + "@4 --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 4"), std::string::npos) << r.out;
  r = Hyctl("export " + root_ + " --step 9 --safetensors " + file + "9");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("9"), std::string::npos) << r.err;
  // A run root's versions differ from store to store: no --version-id.
  r = Hyctl("export " + root_ + " --version-id " + std::to_string(4 << 16) +
            " --safetensors " + file);
  EXPECT_EQ(r.code, 64) << r.out << r.err;
  EXPECT_NE(r.err.find("--step"), std::string::npos) << r.err;
}

// diff compares values across dtypes (bf16 widened), within --atol /
// --rtol, counts every tensor of A or B once, and exits 1 when some differ.
TEST_F(HyctlRunRootTest, DiffComparesValuesAcrossDtypes) {
  // The state at step 4 with the dtypes swapped: w as bf16 (its values,
  // multiples of 0.5 up to 18, are exact in bf16), b as f32.
  auto write = [&](const std::string& name, float w3, bool extra) {
    std::vector<uint16_t> w(state_.w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = FloatToBf16Bits(i == 3 ? w3 : state_.w[i]);
    }
    std::vector<float> b(state_.b.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = Bf16BitsToFloat(state_.b[i]);
    std::vector<std::pair<TensorMeta, ConstBytes>> tensors = {
        {TensorMeta{"w", DType::kBF16, {5, 7}},
         ConstBytes(w.data(), w.size() * 2)},
        {TensorMeta{extra ? "extra" : "b", DType::kF32, {11}},
         ConstBytes(b.data(), b.size() * 4)}};
    const std::string file = dir_.Sub(name + ".safetensors");
    EXPECT_TRUE(statestore::WriteSafetensors(file, tensors, {}).ok());
    CmdResult r = Hyctl("import " + dir_.Sub(name) + " --step 4 " +
                        "--safetensors " + file);
    EXPECT_EQ(r.code, 0) << r.err;
    return dir_.Sub(name);
  };
  const std::string same = write("same", state_.w[3], false);
  CmdResult r = Hyctl("diff " + same + " " + root_ + "@4");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 of 2 tensors differ"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 compared by value across dtypes"), std::string::npos)
      << r.out;

  // w[3] is 2.5 at step 4; 2.75 here.
  const std::string off = write("off", state_.w[3] + 0.25f, false);
  r = Hyctl("diff -o json " + off + "@4 " + root_);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  nlohmann::json d = nlohmann::json::parse(r.out);
  EXPECT_EQ(d["tensors_differing"], 1);
  EXPECT_EQ(d["elements_differing"], 1);
  ASSERT_EQ(d["tensors"].size(), 1u);
  EXPECT_EQ(d["tensors"][0]["name"], "w");
  EXPECT_DOUBLE_EQ(d["tensors"][0]["max_abs_diff"].get<double>(), 0.25);
  EXPECT_EQ(Hyctl("diff --atol 0.25 " + off + " " + root_).code, 0);
  EXPECT_EQ(Hyctl("diff --atol 0.2 " + off + " " + root_).code, 1);
  // |2.75 - 2.5| <= 0.1 * 2.5.
  EXPECT_EQ(Hyctl("diff --rtol 0.1 " + off + " " + root_).code, 0);
  EXPECT_EQ(Hyctl("diff --rtol 0.05 " + off + " " + root_).code, 1);
  EXPECT_EQ(Hyctl("diff --atol -1 " + off + " " + root_).code, 64);

  // b only in A, extra only in B: 2 of the 3 tensors differ.
  const std::string extra = write("extra", state_.w[3], true);
  r = Hyctl("diff " + root_ + " " + extra);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("2 of 3 tensors differ"), std::string::npos) << r.out;
}

// verify, export, diff and gc take the run root hyctl train writes, not
// only a single store.
TEST_F(HyctlRunRootTest, VerifyExportDiffGcTakeARunRoot) {
  CmdResult r = Hyctl("verify " + root_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("node-0/store: 1 versions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node-1/store: 1 versions"), std::string::npos) << r.out;

  // Export assembles whole tensors from both ranks' stores.
  const std::string file = dir_.Sub("all.safetensors");
  r = Hyctl("export " + root_ + " --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 4"), std::string::npos) << r.out;
  auto f = SafetensorsReader::Open(file);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Data(**f, "w"), Slice(state_.w, {0, 35}));
  EXPECT_EQ(Data(**f, "b"), Slice(state_.b, {0, 11}));

  // Step 5: two elements of w changed, one on each rank.
  State next = state_;
  next.w[3] += 1.0f;
  next.w[20] -= 0.25f;
  SaveRun(root_, next, 5);
  r = Hyctl("diff -o json " + root_ + "@4 " + root_ + "@5");
  ASSERT_EQ(r.code, 1) << r.out << r.err;  // They differ.
  nlohmann::json d = nlohmann::json::parse(r.out);
  EXPECT_EQ(d["tensors_compared"], 2);
  EXPECT_EQ(d["tensors_differing"], 1);
  EXPECT_EQ(d["elements_differing"], 2);
  ASSERT_EQ(d["tensors"].size(), 1u);
  EXPECT_EQ(d["tensors"][0]["name"], "w");
  EXPECT_DOUBLE_EQ(d["tensors"][0]["max_abs_diff"].get<double>(), 1.0);
  // Without @N the newest step: the same state.
  r = Hyctl("diff " + root_ + " " + root_ + "@5");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 of 2 tensors differ"), std::string::npos) << r.out;
  // A store against a run root: a tensor only on one side.
  const std::string one = dir_.Sub("one");
  r = Hyctl("import " + one + " --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = Hyctl("diff -o json " + one + " " + root_ + "@4");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tensors_differing"], 0) << r.out;
  r = Hyctl("diff " + one + "@9 " + root_);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(one), std::string::npos) << r.err;

  // gc of the run root: every store keeps the newest version only.
  r = Hyctl("gc " + root_ + " --keep 1");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("node-1/store: dropped 1 versions"), std::string::npos)
      << r.out;
  r = Hyctl("verify -o json " + root_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v.size(), 2u) << r.out;
  for (const auto& store : v) EXPECT_EQ(store["versions"].size(), 1u) << r.out;
}

// A root made of node-0 of one run and node-1 of another (a node directory
// copied from the wrong run) is refused by every command that reads it,
// naming both run ids, and nothing is written; restore, export and
// export-hf read it anyway with --allow-other-run.
TEST_F(HyctlRunRootTest, RefusesARootOfTwoRuns) {
  namespace fs = std::filesystem;
  const std::string a = dir_.Sub("a"), b = dir_.Sub("b");
  const std::string mixed = dir_.Sub("mixed");
  SaveRun(a, state_, kStep, "run-a");
  State other = state_;
  for (float& x : other.w) x += 2.0f;
  SaveRun(b, other, kStep, "run-b");
  fs::create_directories(mixed);
  fs::copy(a + "/node-0", mixed + "/node-0", fs::copy_options::recursive);
  fs::copy(b + "/node-1", mixed + "/node-1", fs::copy_options::recursive);

  const std::string out = dir_.Sub("out");
  const std::vector<std::string> commands = {
      "inspect " + mixed,
      "inspect --quick " + mixed,
      "verify " + mixed,
      "gc " + mixed + " --keep 1",
      "repair " + mixed,
      "restore " + mixed + " --layout replicated --rank 0 --out " + out,
      "export " + mixed + " --safetensors " + out + "/all.safetensors",
      "export-hf " + mixed + " " + out + "/hf",
      "diff " + mixed + " " + a,
  };
  for (const std::string& c : commands) {
    SCOPED_TRACE(c);
    CmdResult r = Hyctl(c);
    EXPECT_NE(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.err.find("stores of two runs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'run-a'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'run-b'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << r.out;
  }
  // gc dropped nothing; each half is its own run's state at step 4.
  CmdResult r = Hyctl("restore " + mixed +
                      " --allow-other-run --layout replicated "
                      "--rank 0 --out " +
                      out);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  auto file = SafetensorsReader::Open(out + "/rank-0.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const FlatRun second = Piece(35, kOldWorld, 1);
  EXPECT_EQ(Data(**file, "w"),
            Slice(state_.w, Piece(35, kOldWorld, 0)) + Slice(other.w, second));
  r = Hyctl("export --allow-other-run " + mixed + " --safetensors " + out +
            "/all.safetensors");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // Each run alone is fine.
  r = Hyctl("verify " + a);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = Hyctl("inspect " + b);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

// A run's stores take no import (its newest step would become the
// imported version and break the resume): exit 64, nothing written.
TEST_F(HyctlRunRootTest, ImportIntoARunsStoreIsRefused) {
  namespace fs = std::filesystem;
  const std::string file = dir_.Sub("all.safetensors");
  CmdResult r = Hyctl("export " + root_ + " --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const std::string& target :
       {root_ + "/node-0/store", root_ + "/node-1/store/", root_,
        root_ + "/node-0/new-store"}) {
    SCOPED_TRACE(target);
    r = Hyctl("import " + target + " --safetensors " + file);
    EXPECT_EQ(r.code, 64) << r.out << r.err;
    EXPECT_NE(r.err.find("import into a fresh store instead"),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(root_ + "/node-0/new-store"));
  EXPECT_FALSE(fs::exists(root_ + "/CURRENT"));
  // A store that records a run id, copied out of its run root.
  const std::string tagged = dir_.Sub("tagged");
  SaveRun(tagged, state_, kStep, "run-t");
  const std::string copy = dir_.Sub("copy");
  fs::copy(tagged + "/node-0/store", copy, fs::copy_options::recursive);
  r = Hyctl("import " + copy + " --safetensors " + file);
  EXPECT_EQ(r.code, 64) << r.out << r.err;
  EXPECT_NE(r.err.find("belongs to run 'run-t'"), std::string::npos) << r.err;
  r = Hyctl("inspect -o json " + copy);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u) << r.out;
  // The run is untouched; a fresh store takes the import.
  r = Hyctl("inspect -o json " + root_ + "/node-0/store");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u) << r.out;
  r = Hyctl("import " + dir_.Sub("fresh") + " --safetensors " + file);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

// hyctl drop removes one step from every copy; the newest recoverable step
// only with --force (exit 64 without); an unknown step exits 2.
TEST_F(HyctlRunRootTest, DropRemovesOneStepFromEveryCopy) {
  State next = state_;
  next.w[3] += 1.0f;
  SaveRun(root_, next, 5);
  SaveRun(root_, state_, 6);  // Checkpointer keeps the newest 2: 5 and 6.
  const std::string out = dir_.Sub("out");
  auto restore = [&](int step) {
    return Hyctl("restore " + root_ + " --step " + std::to_string(step) +
                 " --layout replicated --rank 0 --out " + out);
  };
  ASSERT_EQ(restore(5).code, 0);
  CmdResult r = Hyctl("drop " + root_ + " --step 6");
  EXPECT_EQ(r.code, 64) << r.out << r.err;
  EXPECT_NE(r.err.find("newest recoverable step"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_EQ(restore(6).code, 0);
  r = Hyctl("drop " + root_ + " --step 9");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  r = Hyctl("drop " + root_ + "/node-0/store --step 5");
  EXPECT_EQ(r.code, 64) << r.out << r.err;

  r = Hyctl("drop " + root_ + " --step 5");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("dropped step(s) 5: 2 version(s)"), std::string::npos)
      << r.out;
  EXPECT_EQ(restore(5).code, 2);
  EXPECT_EQ(restore(6).code, 0);
  r = Hyctl("drop " + root_ + " --step 6 --force");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(restore(6).code, 2);
  r = Hyctl("inspect -o json " + root_ + "/node-1/store");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 0u) << r.out;
}

// verify of a run root whose one store cannot be opened (its files
// overwritten with garbage) names that store, verifies the others and
// exits 3 at the end.
TEST_F(HyctlRunRootTest, VerifyGoesOnPastAnUnreadableStore) {
  namespace fs = std::filesystem;
  const std::string bad = root_ + "/node-1/store";
  for (const fs::directory_entry& e : fs::directory_iterator(bad)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && (name.rfind("MANIFEST", 0) == 0 ||
                            name.substr(name.size() - 4) == ".sst")) {
      std::ofstream(e.path(), std::ios::trunc) << "garbage";
    }
  }
  CmdResult r = Hyctl("verify " + root_);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("ok: " + root_ + "/node-0/store: 1 versions"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("hyctl verify: " + bad + ": cannot be opened: "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 of 2 stores could not be verified"),
            std::string::npos)
      << r.err;
  r = Hyctl("verify -o json " + root_);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v.size(), 2u) << r.out;
  EXPECT_TRUE(v[0].contains("versions")) << r.out;
  EXPECT_EQ(v[1]["store"], bad) << r.out;
  EXPECT_TRUE(v[1].contains("error")) << r.out;
}

}  // namespace
}  // namespace hy::cli
