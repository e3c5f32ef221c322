// hy_bench_gpu_save: a checkpoint of state in GPU memory. One f32 tensor of
// --size-mib in device memory is saved with Store::SaveAsync
// (ShardData::on_gpu): the call copies it into the store's page-locked
// staging memory on a stream of its own and returns; encoding, writing and
// the sync go on in the background. Beside it, the limit: a
// device-to-host copy of the same bytes into page-locked memory (GpuCopy).
//
//   hy_bench_gpu_save [--json] [--size-mib N] [--reps N] [--dir DIR]
//
// Rows: the D2H copy (best of --reps); SaveAsync's blocking time on the
// first save (the staging memory is allocated and locked then) and from
// the second on (best of --reps; the kept staging is reused), each with its
// ratio to the copy (the target: <= 1.2x); the durable time of a
// save (call to Wait). Every save is committed and read back bitwise; a
// mismatch exits 1. Without a GPU it says so and exits 0, so it runs
// anywhere.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_util.h"
#include "hy/common/gpu.h"
#include "hy/statestore/store.h"

namespace hy::bench {
namespace {

struct Flags {
  bool json = false;
  int64_t size_mib = 512;
  int reps = 3;
  std::string dir;
};

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "hy_bench_gpu_save: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  return 1;
}

int Run(const Flags& f) {
  if (GpuDeviceCount() == 0) {
    std::printf("hy_bench_gpu_save: no CUDA device%s; nothing measured\n",
                BuiltWithCuda() ? "" : " (built without CUDA)");
    return 0;
  }
  const size_t bytes = static_cast<size_t>(f.size_mib) << 20;
  const int64_t elements = static_cast<int64_t>(bytes / 4);
  std::vector<float> host(elements);
  for (int64_t i = 0; i < elements; ++i) {
    host[i] = static_cast<float>((i * 2654435761u) % 100003) * 1e-3f;
  }
  Result<void*> dev = GpuAlloc(bytes);
  if (!dev.ok()) return Fail("GpuAlloc", dev.status());
  Result<void*> pinned = GpuHostAlloc(bytes);
  if (!pinned.ok()) return Fail("GpuHostAlloc", pinned.status());
  if (Status s = GpuCopy(*dev, host.data(), bytes); !s.ok()) {
    return Fail("upload", s);
  }
  double copy = 1e30;
  for (int r = 0; r < f.reps; ++r) {
    Status s;
    copy = std::min(copy, Seconds([&] { s = GpuCopy(*pinned, *dev, bytes); }));
    if (!s.ok()) return Fail("GpuCopy", s);
  }

  const std::string dir =
      f.dir.empty() ? std::filesystem::temp_directory_path().string() +
                          "/hy-bench-gpu-save-" + std::to_string(getpid())
                    : f.dir;
  std::filesystem::remove_all(dir);
  statestore::StoreOptions o;
  o.staging_bytes = std::max<uint64_t>(o.staging_bytes, 2 * bytes);
  auto store = statestore::Store::Open(dir, o);
  if (!store.ok()) return Fail("open " + dir, store.status());
  double first = 0, steady = 1e30, durable = 0;
  std::vector<float> back(elements);
  for (int r = 0; r <= f.reps; ++r) {
    const uint64_t version = static_cast<uint64_t>(r) + 1;
    statestore::SavePart part{version, 0, {}, {}};
    statestore::ShardData shard;
    shard.meta = {"w", DType::kF32, {elements}};
    shard.geometry = ShardGeometry::WholeTensor({elements});
    shard.data = ConstBytes(static_cast<const uint8_t*>(*dev), bytes);
    shard.on_gpu = true;
    part.shards.push_back(shard);
    Result<std::unique_ptr<statestore::SaveHandle>> h =
        Status::Internal("SaveAsync not called");
    const double call =
        Seconds([&] { h = (*store)->SaveAsync(std::move(part)); });
    if (!h.ok()) return Fail("SaveAsync", h.status());
    Status s;
    const double wait = Seconds([&] { s = (*h)->Wait(nullptr); });
    if (!s.ok()) return Fail("save", s);
    if (r == 0) {
      first = call;
    } else {
      steady = std::min(steady, call);
    }
    durable = call + wait;
    statestore::CommitRecord c;
    c.version = version;
    c.step = version;
    c.world_size = 1;
    c.layout = "dp=1";
    if (Status cs = (*store)->Commit(c); !cs.ok()) return Fail("commit", cs);
    Status rs = (*store)->ReadRegion(
        version, "w", FlatRun{0, elements},
        MutableBytes(reinterpret_cast<uint8_t*>(back.data()), bytes));
    if (!rs.ok()) return Fail("read back", rs);
    if (std::memcmp(back.data(), host.data(), bytes) != 0) {
      std::fprintf(stderr,
                   "hy_bench_gpu_save: version %llu read back "
                   "differs\n",
                   static_cast<unsigned long long>(version));
      return 1;
    }
  }
  GpuHostFree(*pinned);
  GpuFree(*dev);
  store->reset();
  std::filesystem::remove_all(dir);

  const double mb = static_cast<double>(bytes) / 1e6;
  if (f.json) {
    std::printf(
        "{\"gpu\": \"%s\", \"mb\": %.1f, \"d2h_copy_s\": %.6f, "
        "\"save_async_first_s\": %.6f, \"save_async_s\": %.6f, "
        "\"save_async_vs_copy\": %.3f, \"durable_s\": %.4f}\n",
        GpuDeviceName(0).c_str(), mb, copy, first, steady, steady / copy,
        durable);
    return 0;
  }
  std::printf("%s, %.1f MB of f32 in device memory\n", GpuDeviceName(0).c_str(),
              mb);
  std::printf("%-38s %10s %8s %10s\n", "operation", "seconds", "GB/s",
              "vs copy");
  auto row = [&](const char* what, double s) {
    std::printf("%-38s %10.4f %8.2f %9.2fx\n", what, s, mb / 1e3 / s, s / copy);
  };
  row("D2H copy into page-locked memory", copy);
  row("SaveAsync blocking, first save", first);
  row("SaveAsync blocking, later saves", steady);
  row("save durable (SaveAsync + Wait)", durable);
  return 0;
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) {
  hy::bench::Flags f;
  CLI::App app(
      "A checkpoint of state in GPU memory: SaveAsync of a device tensor "
      "beside a device-to-host copy of its bytes",
      "hy_bench_gpu_save");
  hy::bench::AddJsonFlag(&app, &f.json);
  app.add_option("--size-mib", f.size_mib, "Tensor size in MiB")
      ->capture_default_str()
      ->check(hy::bench::AtLeast(1));
  app.add_option("--reps", f.reps, "Repetitions")
      ->capture_default_str()
      ->check(hy::bench::AtLeast(1));
  app.add_option("--dir", f.dir, "Where the store goes (default: a temp dir)");
  if (int code = hy::bench::ParseFlags(&app, argc, argv); code >= 0) {
    return code;
  }
  return hy::bench::Run(f);
}
