// hyctl plan, run as a real subprocess; expectations from hy_reshard.

#include <gtest/gtest.h>

#include "cli/layout/hyctl_reshard_util.h"
#include "hy/statestore/safetensors.h"

namespace hy::cli {
namespace {

TEST(HyctlReshardTest, PlanKnownPair) {
  TempDir dir;
  const std::string spec = WriteFile(
      dir, "spec.json",
      R"([{"name": "lm_head.weight", "dtype": "f32", "shape": [8, 4]}])");
  auto plan = [&](const std::string& args) {
    CmdResult r = Hyctl("plan --model-spec " + spec + " " + args + " -o json");
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  // fsdp=2 cuts the 8x4 f32 tensor into rows 0-3 and 4-7, as tp=2 does.
  auto j = plan("--from fsdp=2 --to tp=2 --ranks-per-node 1");
  EXPECT_EQ(j["local_bytes"], 128);
  EXPECT_EQ(j["network_bytes"], 0);
  EXPECT_EQ(j["steps"], 0);
  // To dp=2 each rank keeps its half and receives the other 64 bytes.
  j = plan("--from fsdp=2 --to dp=2 --ranks-per-node 1");
  EXPECT_EQ(j["dst_bytes"], 256);
  EXPECT_EQ(j["local_bytes"], 128);
  EXPECT_EQ(j["cross_node_bytes"], 128);
  EXPECT_EQ(j["same_node_bytes"], 0);
  EXPECT_EQ(j["max_send_bytes"], 64);
  EXPECT_EQ(j["max_recv_bytes"], 64);
  EXPECT_EQ(j["steps"], 1);
  j = plan("--from fsdp=2 --to dp=2");  // 8 ranks per node.
  EXPECT_EQ(j["same_node_bytes"], 128);
  EXPECT_EQ(j["cross_node_bytes"], 0);
  j = plan("--from fsdp=2 --to dp=2 --bucket-mib 0.000030517578125");
  EXPECT_EQ(j["bucket_bytes"], 32);
  EXPECT_EQ(j["steps"], 2);

  // The same numbers as the library's plan for the small model.
  nlohmann::json model = nlohmann::json::array();
  for (const auto& t : SmallModel()) {
    model.push_back({{"name", t.name},
                     {"dtype", std::string(SafetensorsName(t.dtype))},
                     {"shape", t.shape}});
  }
  const std::string model_spec = WriteFile(dir, "model.json", model.dump());
  CmdResult r = Hyctl("plan --model-spec " + model_spec +
                      " --from fsdp=4 --to tp=2,dp=2 --ranks-per-node 2 "
                      "--bucket-mib 0.001 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  auto lib =
      reshard::Plan(*Layout::Parse("fsdp=4"), *Layout::Parse("tp=2,dp=2"),
                    *ModelSpec::Build(SmallModel(), ModelRules::Default()),
                    reshard::Topology{4, 2}, reshard::PlanOptions{1049});
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_EQ(j["local_bytes"], lib->stats.local_bytes);
  EXPECT_EQ(j["same_node_bytes"], lib->stats.same_node_bytes);
  EXPECT_EQ(j["cross_node_bytes"], lib->stats.cross_node_bytes);
  EXPECT_EQ(j["max_send_bytes"], lib->stats.max_send_bytes);
  EXPECT_EQ(j["peak_staging_bytes"], lib->stats.peak_staging_bytes);
  EXPECT_EQ(j["steps"], lib->steps.size());
  EXPECT_GT(j["cross_node_bytes"].get<int64_t>(), 0);

  r = Hyctl("plan --model-spec " + model_spec +
            " --from fsdp=4 --to tp=2,dp=2 --ranks-per-node 2");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want :
       {"plan fsdp=4 -> tp=2,dp=2: 4 ranks, 2 per node", "local", "same_node",
        "cross_node", "max_send_per_rank", "max_recv_per_rank", "peak_staging",
        " steps, "}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(HyctlReshardTest, PlanErrors) {
  TempDir dir;
  const std::string spec = WriteFile(
      dir, "spec.json",
      R"([{"name": "lm_head.weight", "dtype": "f32", "shape": [8, 4]}])");
  const std::string base = "plan --model-spec " + spec;
  // What the user asked for does not fit: usage errors (64).
  CmdResult r = Hyctl(base + " --from dp=3 --to tp=3");
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("lm_head.weight"), std::string::npos) << r.err;
  r = Hyctl(base + " --from fsdp=2 --to tpp=2");
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("--to"), std::string::npos) << r.err;
  r = Hyctl(base + " --to tp=2");
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("--from is required"), std::string::npos) << r.err;
  EXPECT_EQ(Hyctl("plan --from dp=2 --to tp=2").code, 64);
  EXPECT_EQ(Hyctl(base + " --from dp=2").code, 64);
  EXPECT_EQ(Hyctl("plan --store " + dir.Sub("s") + " --to dp=2").code, 2);
  EXPECT_EQ(Hyctl(base + " --step 1 --from dp=2 --to dp=2").code, 64);
  EXPECT_EQ(Hyctl(base + " --store x --version-id 1 --to dp=2").code, 64);
  EXPECT_EQ(Hyctl(base + " --from dp=2 --to dp=2 --ranks-per-node 0").code, 64);

  r = Hyctl("plan --model-spec " + dir.Sub("absent.json") +
            " --from dp=2 --to dp=2");
  EXPECT_EQ(r.code, 2);
  const std::string bad = WriteFile(
      dir, "bad.json", R"([{"name": "x", "dtype": "f33", "shape": [1]}])");
  r = Hyctl("plan --model-spec " + bad + " --from dp=2 --to dp=2");
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("entry 0 ('x'): unknown dtype 'f33'"), std::string::npos)
      << r.err;
  const std::string unknown = WriteFile(
      dir, "unknown.json", R"([{"name": "x", "dtype": "f32", "shape": [1]}])");
  r = Hyctl("plan --model-spec " + unknown + " --from dp=2 --to dp=2");
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("no model rule matches tensor 'x'"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--rules"), std::string::npos) << r.err;
  const std::string rules =
      WriteFile(dir, "rules.yaml", "rules:\n  - pattern: 'x'\n    tp_dim: 0\n");
  r = Hyctl("plan --model-spec " + unknown + " --rules " + rules +
            " --from dp=2 --to dp=2 -o json");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(HyctlReshardTest, PlanAcrossWorldSizesAndImportedLayouts) {
  TempDir dir;
  const std::string spec = WriteFile(
      dir, "spec.json",
      R"([{"name": "lm_head.weight", "dtype": "f32", "shape": [8, 4]}])");
  // 2 ranks to 4: the new ranks 2 and 3 hold nothing before.
  CmdResult r =
      Hyctl("plan --model-spec " + spec + " --from fsdp=2 --to tp=4 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["dst_bytes"], 8 * 4 * 4);
  EXPECT_EQ(j["local_bytes"].get<int64_t>() + j["network_bytes"].get<int64_t>(),
            8 * 4 * 4);
  EXPECT_GE(j["network_bytes"].get<int64_t>(), 2 * 4 * 4 * 2);  // Ranks 2, 3.
  // And back to 1 rank, which ends up with everything.
  r = Hyctl("plan --model-spec " + spec + " --from tp=4 --to dp=1 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dst_bytes"], 8 * 4 * 4);
  EXPECT_EQ(j["network_bytes"], 3 * 2 * 4 * 4);

  // hyctl import records dp=1 for one shard, which plan takes; a per-tensor
  // cut of 3 is refused with what to do.
  const std::string file = dir.Sub("m.safetensors");
  {
    std::vector<float> data(8 * 4, 1.0f);
    auto w = statestore::SafetensorsWriter::Create(
        file, {TensorMeta{"lm_head.weight", DType::kF32, {8, 4}}}, {});
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Append("lm_head.weight",
                             ConstBytes(reinterpret_cast<uint8_t*>(data.data()),
                                        data.size() * 4))
                    .ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  ASSERT_EQ(Hyctl("import " + dir.Sub("one") + " --safetensors " + file).code,
            0);
  r = Hyctl("plan --store " + dir.Sub("one") + " --to tp=2 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["from"], "dp=1");
  ASSERT_EQ(
      Hyctl("import " + dir.Sub("three") + " --shards 3 --safetensors " + file)
          .code,
      0);
  r = Hyctl("plan --store " + dir.Sub("three") + " --to tp=2");
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("flat=3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hyctl reshard"), std::string::npos) << r.err;
  // ... which reshard turns into a layout plan takes.
  ASSERT_EQ(Hyctl("reshard " + dir.Sub("three") + " --to fsdp=3").code, 0);
  r = Hyctl("plan --store " + dir.Sub("three") + " --to tp=2 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["from"], "fsdp=3");
}

}  // namespace
}  // namespace hy::cli
