// hy_bench_rocksdb_paths: RocksDB's bulk write paths for big values, all
// durable, side by side with the physical baseline (one file, write + fsync):
// WriteBatch + WAL with sync per 16 MiB batch; integrated BlobDB the same way,
// then Flush; SstFileWriter + IngestExternalFile(move_files), one SST per
// 256 MiB of sorted keys in disjoint ranges (as hy's epochs). Each is then
// read back once, cold (reopened, posix_fadvise DONTNEED on every file), with
// a bit-exact check.
//
//   hy_bench_rocksdb_paths [--json] [--size-gib N] [--value-mib N] [--dir D]
//
// MB/s count value bytes, 10^6 per MB. "disk" is write_bytes of /proc/self/io
// while timed (all threads, RocksDB's background ones included).

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_util.h"

namespace hy::bench {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kBatchBytes = 16 * kMiB;
constexpr uint64_t kSstBytes = 256 * kMiB;

struct Flags {
  bool json = false;
  double size_gib = 1;
  uint64_t value_mib = 4;
  std::string dir = "/tmp";
};

// n values with 16-byte random keys; value i is a window of a random pool.
struct Data {
  std::string pool;
  std::vector<std::string> keys;
  std::map<std::string, size_t> index;  // Key -> value number.
  size_t value_bytes = 0;

  rocksdb::Slice Value(size_t i) const {
    const size_t off = i * (value_bytes + 4096) % (pool.size() - value_bytes);
    return rocksdb::Slice(pool.data() + off, value_bytes);
  }
  double mb() const { return keys.size() * double(value_bytes) / 1e6; }
};

void Die(const std::string& what) {
  std::fprintf(stderr, "hy_bench_rocksdb_paths: %s\n", what.c_str());
  std::exit(1);
}

void Check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

// Bytes this process (all threads) sent to disk so far, in MB.
double DiskMb() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t v = 0;
  while (in >> key >> v) {
    if (key == "write_bytes:") return v / 1e6;
  }
  return 0;
}

// Runs fn and returns its seconds; *disk_mb, if given, gets the MB it wrote
// (and fn, a write, starts with no other writeback pending).
double Timed(const std::function<void()>& fn, double* disk_mb = nullptr) {
  if (disk_mb != nullptr) sync();
  const double disk0 = DiskMb();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const std::chrono::duration<double> s = std::chrono::steady_clock::now() - t0;
  if (disk_mb != nullptr) *disk_mb = DiskMb() - disk0;
  return s.count();
}

// Writes (out) or reads all n bytes at p.
void FullIo(bool out, int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = out ? write(fd, p, n) : read(fd, const_cast<char*>(p), n);
    if (r <= 0) Die(out ? "write failed" : "read failed");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void FillRandom(std::mt19937_64* rng, char* p, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t r = (*rng)();
    std::memcpy(p + i, &r, 8);
  }
}

std::string Mb(double mb) { return std::to_string(std::lround(mb)) + " MB"; }

void Print(const Flags& f, const Data& d, const std::string& path,
           double seconds, const std::string& notes) {
  const double mbps = d.mb() / seconds;
  if (f.json) {
    std::printf(
        "{\"path\":\"%s\",\"mb\":%.1f,\"seconds\":%.3f,"
        "\"mbps\":%.0f,\"notes\":\"%s\"}\n",
        path.c_str(), d.mb(), seconds, mbps, notes.c_str());
  } else {
    std::printf("| %-44s | %7.0f | %7.2f | %s\n", path.c_str(), mbps, seconds,
                notes.c_str());
  }
  std::fflush(stdout);
}

rocksdb::Options BaseOptions() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.max_background_jobs = 2;
  o.compression = rocksdb::kNoCompression;  // The values are incompressible.
  rocksdb::BlockBasedTableOptions t;
  t.block_size = 1 << 20;  // As hy's chunk column family.
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

std::unique_ptr<rocksdb::DB> OpenDb(const rocksdb::Options& o,
                                    const std::string& dir) {
  rocksdb::DB* db = nullptr;
  Check(rocksdb::DB::Open(o, dir, &db), "open");
  return std::unique_ptr<rocksdb::DB>(db);
}

// Puts every value in 16 MiB WriteBatches, each written with sync=true.
void WriteBatches(rocksdb::DB* db, const Data& d) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::WriteBatch b;
  for (size_t i = 0; i < d.keys.size(); ++i) {
    b.Put(d.keys[i], d.Value(i));
    if (b.GetDataSize() >= kBatchBytes || i + 1 == d.keys.size()) {
      Check(db->Write(wo, &b), "write");
      b.Clear();
    }
  }
}

// Reopens the DB at `dir`, drops it from the page cache and scans it.
double ReadBack(std::unique_ptr<rocksdb::DB> db, const rocksdb::Options& o,
                const std::string& dir, const Data& d,
                const std::string& name) {
  Check(db->Close(), "close");
  db = OpenDb(o, dir);
  DropPageCache(dir);
  size_t seen = 0;
  const double s = Timed([&] {
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++seen) {
      auto i = d.index.find(it->key().ToString());
      if (i == d.index.end() || it->value() != d.Value(i->second)) {
        Die(name + ": read back a wrong value");
      }
    }
    Check(it->status(), "scan");
  });
  if (seen != d.keys.size()) Die(name + ": read back too few values");
  Check(db->Close(), "close");
  return s;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app(
      "RocksDB's bulk write paths for big values, durable, beside "
      "write + fsync of one file",
      "hy_bench_rocksdb_paths");
  AddJsonFlag(&app, &f.json);
  app.add_option("--size-gib", f.size_gib, "Total bytes in GiB")
      ->capture_default_str()
      ->check(Positive());
  app.add_option("--value-mib", f.value_mib, "Value size in MiB")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--dir", f.dir, "Where the databases go")
      ->capture_default_str();
  if (int code = ParseFlags(&app, argc, argv); code >= 0) return code;
  Data d;
  d.value_bytes = f.value_mib * kMiB;
  const uint64_t total = static_cast<uint64_t>(f.size_gib * 1024 * kMiB);
  const size_t n = std::max<uint64_t>(1, total / d.value_bytes);
  std::mt19937_64 rng(42);
  d.pool.resize(std::min<uint64_t>(n * d.value_bytes, kSstBytes) +
                2 * d.value_bytes);
  FillRandom(&rng, d.pool.data(), d.pool.size());
  while (d.keys.size() < n) {
    std::string k(16, '\0');
    FillRandom(&rng, k.data(), k.size());
    if (d.index.emplace(k, d.keys.size()).second) d.keys.push_back(k);
  }
  std::string tmpl = f.dir + "/hy-bench-rocksdb-paths-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp failed in " + f.dir);
  const std::string root = tmpl;
  if (!f.json) {
    std::printf(
        "hy_bench_rocksdb_paths: %zu values of %llu MiB (%.0f MB), "
        "16-byte keys, %s\n\n",
        n, static_cast<unsigned long long>(f.value_mib), d.mb(), root.c_str());
    std::printf("| %-44s | %7s | %7s | notes\n", "path", "MB/s", "seconds");
    std::printf(
        "|----------------------------------------------|---------|"
        "---------|------\n");
  }
  double disk = 0;

  // 1. Physical baseline.
  const std::string raw = root + "/raw.bin";
  // `stream`: drop each value from the page cache once written, as
  // SstFileWriter does (invalidate_page_cache), so writeback starts at once.
  auto raw_write = [&](bool stream) {
    return Timed(
        [&] {
          const int fd = open(raw.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
          for (size_t i = 0; i < n; ++i) {
            const rocksdb::Slice v = d.Value(i);
            FullIo(true, fd, v.data(), v.size());
            if (stream) {
              posix_fadvise(fd, i * v.size(), v.size(), POSIX_FADV_DONTNEED);
            }
          }
          if (fsync(fd) != 0 || close(fd) != 0) Die("fsync " + raw);
        },
        &disk);
  };
  double s = raw_write(false);
  Print(f, d, "1 raw write+fsync (baseline)", s, "disk " + Mb(disk));
  s = raw_write(true);
  Print(f, d, "1 raw write+DONTNEED per value+fsync", s, "disk " + Mb(disk));
  DropPageCache(root);
  std::string back(d.value_bytes, '\0');
  const double raw_read_s = Timed([&] {
    const int fd = open(raw.c_str(), O_RDONLY);
    for (size_t i = 0; i < n; ++i) {
      FullIo(false, fd, back.data(), back.size());
      if (rocksdb::Slice(back) != d.Value(i)) Die("raw: wrong bytes");
    }
    close(fd);
  });
  Print(f, d, "1 raw: read, cold", raw_read_s, "bit-exact");
  fs::remove(raw);

  // 2. WriteBatch + WAL, sync per batch.
  rocksdb::Options o = BaseOptions();
  std::string dir = root + "/wal";
  auto db = OpenDb(o, dir);
  s = Timed([&] { WriteBatches(db.get(), d); }, &disk);
  Print(f, d, "2 WriteBatch+WAL, sync per 16 MiB", s,
        "durable in the WAL; disk " + Mb(disk) + " (WAL + memtable flushes)");
  s = ReadBack(std::move(db), o, dir, d, "2 WriteBatch+WAL");
  Print(f, d, "2 WriteBatch+WAL: read, cold", s, "bit-exact");

  // 3. Integrated BlobDB, WAL on.
  o.enable_blob_files = true;
  o.min_blob_size = 4096;
  o.blob_file_size = 256 * kMiB;
  dir = root + "/blob";
  db = OpenDb(o, dir);
  const double disk0 = DiskMb();
  s = Timed([&] { WriteBatches(db.get(), d); }, &disk);
  Print(f, d, "3 BlobDB, sync per 16 MiB: until last sync", s,
        "durable in the WAL; disk " + Mb(disk));
  s += Timed([&] { Check(db->Flush(rocksdb::FlushOptions()), "flush"); });
  Print(f, d, "3 BlobDB: including flush", s,
        "in blob files; disk " + Mb(DiskMb() - disk0) + " in all");
  s = ReadBack(std::move(db), o, dir, d, "3 BlobDB");
  Print(f, d, "3 BlobDB: read, cold", s, "bit-exact");

  // 4. SstFileWriter + IngestExternalFile(move_files).
  o = BaseOptions();
  o.disable_auto_compactions = true;  // As hy's chunk column family.
  dir = root + "/sst";
  db = OpenDb(o, dir);
  std::vector<size_t> order;  // Value numbers in key order.
  for (const auto& [key, i] : d.index) order.push_back(i);
  const size_t per_sst = std::max<uint64_t>(1, kSstBytes / d.value_bytes);
  rocksdb::IngestExternalFileOptions io;
  io.move_files = true;
  io.snapshot_consistency = false;
  size_t files = 0;
  s = Timed(
      [&] {
        for (size_t first = 0; first < n; first += per_sst, ++files) {
          const std::string file =
              dir + "/in-" + std::to_string(files) + ".sst";
          rocksdb::SstFileWriter w(rocksdb::EnvOptions(), o);
          Check(w.Open(file), "sst open");
          for (size_t j = first; j < std::min(n, first + per_sst); ++j) {
            Check(w.Put(d.keys[order[j]], d.Value(order[j])), "sst put");
          }
          Check(w.Finish(), "sst finish");  // Syncs the file.
          Check(db->IngestExternalFile({file}, io), "ingest");
        }
      },
      &disk);
  Print(f, d, "4 SstFileWriter + Ingest(move_files)", s,
        std::to_string(files) + " SSTs, MANIFEST synced per ingest; disk " +
            Mb(disk));
  s = ReadBack(std::move(db), o, dir, d, "4 SstFileWriter+Ingest");
  Print(f, d, "4 SstFileWriter+Ingest: read, cold", s, "bit-exact");

  // The baseline again, for the disk's drift over the run.
  s = raw_write(false);
  Print(f, d, "1 raw write+fsync, again at the end", s, "disk " + Mb(disk));
  fs::remove(raw);
  fs::remove_all(root);
  return 0;
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) { return hy::bench::Main(argc, argv); }
