// Store: opening and creating a store, and RocksDB plumbing (see store.h).

#include <fcntl.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <filesystem>
#include <limits>

#include "hy/common/gpu.h"
#include "info_log.h"
#include "store_impl.h"

namespace hy::statestore {

namespace fs = std::filesystem;

namespace {

const char* const kChunksCf = "chunks";
const char* const kManifestsCf = "manifests";
const char* const kMetaCf = "meta";

// RocksDB resumes writes by itself after a full disk (its SstFileManager's
// recovery, every 5 s) only once the largest memtable of the DB
// (write_buffer_size) fits in the free space: 64 MiB by default. hy's
// memtables hold records only (chunk data is ingested as SST files), so a
// small one lets a store take saves again as soon as a few MB are free.
constexpr size_t kWriteBufferBytes = 4 << 20;

rocksdb::ColumnFamilyOptions RecordCfOptions() {
  rocksdb::ColumnFamilyOptions o;
  o.write_buffer_size = kWriteBufferBytes;
  return o;
}

rocksdb::ColumnFamilyOptions ChunkCfOptions() {
  rocksdb::ColumnFamilyOptions o = RecordCfOptions();
  // Chunk data is ingested as SST files whose key ranges (one epoch each)
  // never overlap, so they land in the bottom level and never need
  // compacting; Gc reclaims space by dropping or repacking whole epochs.
  o.disable_auto_compactions = true;
  o.level0_slowdown_writes_trigger = std::numeric_limits<int>::max();
  o.level0_stop_writes_trigger = std::numeric_limits<int>::max();
  o.compression = rocksdb::kNoCompression;  // Chunks are compressed already.
  rocksdb::BlockBasedTableOptions t;
  t.block_size = 1 << 20;
  t.cache_index_and_filter_blocks = false;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

}  // namespace

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  const std::string msg = what + ": " + s.ToString();
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return Status::NotFound(msg);
    case rocksdb::Status::kCorruption:
      return Status::DataLoss(msg);
    case rocksdb::Status::kInvalidArgument:
      return Status::InvalidArgument(msg);
    case rocksdb::Status::kIOError:
      // A full disk is a resource running out, not a broken device: the
      // trainer counts it apart (checkpoint failures by cause).
      if (s.IsNoSpace()) return Status::ResourceExhausted(msg);
      return Status::IOError(msg);
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kTryAgain:
      return Status::Unavailable(msg);
    case rocksdb::Status::kNotSupported:
      return Status::FailedPrecondition(msg);
    default:
      return Status::Internal(msg);
  }
}

Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                           const StoreOptions& options) {
  if (options.chunk_bytes == 0 || options.chunk_bytes % 8 != 0 ||
      options.chunk_bytes > kMaxChunkBytes) {
    return Status::InvalidArgument(
        "chunk_bytes must be a positive multiple of 8, at most 1 GiB");
  }
  if (options.delta_max_chain < 0 || options.delta_max_chain > kMaxDeltaChain) {
    return Status::InvalidArgument("delta_max_chain must be in [0, " +
                                   std::to_string(kMaxDeltaChain) + "]");
  }
  if (options.ingest_writers < 1 || options.ingest_writers > 16) {
    return Status::InvalidArgument("ingest_writers must be in [1, 16]");
  }
  auto store = std::make_unique<RocksStore>(path, options);
  HY_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

RocksStore::RocksStore(std::string path, const StoreOptions& options)
    : path_(std::move(path)), options_(options) {
  // Reads wait on the disk as much as on the CPU, so the default runs more
  // threads than cores to keep several reads in flight.
  const size_t threads =
      options.threads
          ? options.threads
          : std::min<size_t>(32, 4 * ThreadPool::DefaultThreadCount());
  // ParallelFor also runs on the caller, so threads - 1 helpers suffice.
  pool_ = std::make_unique<ThreadPool>(threads > 1 ? threads - 1 : 1);
  // Page-locked memory only for shards in CUDA memory (GpuHostAlloc fails
  // cleanly where there is no GPU; those snapshots then take pageable).
  StagingPool::Allocator page_locked{[](size_t n) -> uint8_t* {
                                       Result<void*> p = GpuHostAlloc(n);
                                       return p.ok() ? static_cast<uint8_t*>(*p)
                                                     : nullptr;
                                     },
                                     [](uint8_t* p) { GpuHostFree(p); }};
  staging_pool_ = std::make_unique<StagingPool>(
      options.keep_staging ? options.staging_bytes : 0,
      StagingPool::HeapAllocator(), std::move(page_locked));
  async_pool_ = std::make_unique<ThreadPool>(1);
}

RocksStore::~RocksStore() {
  async_pool_.reset();  // Finish queued SaveAsync work first.
  if (db_ != nullptr) {
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    db_->Close().PermitUncheckedError();
    delete db_;
  }
}

Status RocksStore::Init() {
  std::error_code ec;
  const bool exists = fs::exists(path_, ec);
  const bool is_db = exists && fs::exists(fs::path(path_) / "CURRENT", ec);
  if (exists && !is_db && !fs::is_empty(path_, ec)) {
    return Status::InvalidArgument("'" + path_ +
                                   "' is not an hy store (no RocksDB there)");
  }
  if (!is_db && (!options_.create_if_missing || options_.read_only ||
                 !options_.secondary_path.empty())) {
    return Status::NotFound("no hy store at '" + path_ + "'");
  }
  if (!is_db) HY_RETURN_IF_ERROR(CreateAtomically());
  {
    std::vector<std::string> cfs;
    HY_RETURN_IF_ERROR(FromRocks(
        rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path_, &cfs),
        "listing column families of " + path_));
    for (const char* want : {kChunksCf, kManifestsCf, kMetaCf}) {
      if (std::find(cfs.begin(), cfs.end(), want) == cfs.end()) {
        return Status::InvalidArgument("'" + path_ +
                                       "' is a RocksDB but not an hy store "
                                       "(no column family '" +
                                       std::string(want) + "')");
      }
    }
  }

  rocksdb::DBOptions dbo;
  dbo.paranoid_checks = true;
  dbo.max_background_jobs = 2;
  // Read-only and secondary opens write no log.
  if (!options_.read_only && options_.secondary_path.empty()) {
    dbo.info_log = InfoLog::Open(path_);
  }
  chunk_cf_options_ = ChunkCfOptions();
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, RecordCfOptions()},
      {kChunksCf, chunk_cf_options_},
      {kManifestsCf, RecordCfOptions()},
      {kMetaCf, RecordCfOptions()}};
  rocksdb::Status rs;
  if (!options_.secondary_path.empty()) {
    dbo.max_open_files = -1;  // Required of secondary instances.
    rs = rocksdb::DB::OpenAsSecondary(dbo, path_, options_.secondary_path, cfs,
                                      &handles_, &db_);
  } else if (options_.read_only) {
    // A reader's chunk reads decode straight from the mapped SST files (no
    // copy of each block out of the page cache first); the files of a
    // store are immutable once written.
    dbo.allow_mmap_reads = true;
    // Chunks are read whole, block by block in file order: the kernel's
    // readahead serves a cold read (RocksDB's default advice is random).
    dbo.advise_random_on_open = false;
    rs = rocksdb::DB::OpenForReadOnly(dbo, path_, cfs, &handles_, &db_);
  } else {
    rs = rocksdb::DB::Open(dbo, path_, cfs, &handles_, &db_);
  }
  HY_RETURN_IF_ERROR(FromRocks(rs, "opening store " + path_));
  chunks_ = handles_[1];
  manifests_ = handles_[2];
  meta_ = handles_[3];

  std::string format;
  Status s = Get(meta_, keys::kFormat, &format);
  if (s.IsNotFound()) {
    return Status::InvalidArgument("'" + path_ +
                                   "' is not an hy store (no format record)");
  } else if (!s.ok()) {
    return s;
  } else if (format != std::to_string(kStoreFormatVersion)) {
    return Status::FailedPrecondition("store '" + path_ + "' has format " +
                                      format + "; this build reads format " +
                                      std::to_string(kStoreFormatVersion));
  }

  HY_RETURN_IF_ERROR(ClaimRun());

  // A writer killed while writing an SST for ingestion leaves the file
  // behind (ingested ones are moved into the DB): remove them.
  if (!read_only()) {
    for (const auto& e : fs::directory_iterator(path_, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("hy-ingest-", 0) == 0) fs::remove(e.path(), ec);
    }
  }

  // The next epoch follows the newest epoch record (records are written
  // before their data, so no chunk data can have a later epoch).
  std::string hwm;
  s = Get(meta_, keys::kEpochHighWater, &hwm);
  if (s.ok()) {
    if (hwm.size() != 8)
      return Status::DataLoss("corrupt epoch high-water mark");
    next_epoch_ = keys::GetBE64(hwm, 0) + 1;
  } else if (!s.IsNotFound()) {
    return s;
  }
  return Status::OK();
}

Status RocksStore::ClaimRun() {
  Status s = Get(meta_, keys::kRunId, &run_id_);
  if (s.IsNotFound()) {
    run_id_.clear();
  } else if (!s.ok()) {
    return s;
  }
  const std::string& want = options_.run_id;
  if (want.empty() || want == run_id_) return Status::OK();
  if (!run_id_.empty() && !options_.allow_other_run) {
    return Status::FailedPrecondition(
        "store '" + path_ + "' belongs to run '" + run_id_ +
        "', not to this run '" + want +
        "': it is neither resumed nor garbage-collected (another job's "
        "state?); choose another store, or allow taking it over "
        "(--allow-other-run)");
  }
  if (read_only()) return Status::OK();
  rocksdb::WriteOptions wo;
  wo.sync = true;
  HY_RETURN_IF_ERROR(FromRocks(db_->Put(wo, meta_, keys::kRunId, want),
                               "recording the run id in " + path_));
  run_id_ = want;
  return Status::OK();
}

Status RocksStore::Refresh() {
  if (options_.secondary_path.empty()) return Status::OK();
  std::lock_guard<std::mutex> lock(cache_mu_);
  manifest_cache_.clear();
  return FromRocks(db_->TryCatchUpWithPrimary(),
                   "catching up with the primary of " + path_);
}

// A store is created whole or not at all: built in a hidden sibling folder
// (column families and format record, synced), then renamed into place. A
// process killed half way leaves only the hidden folder, which the next
// creation removes; readers and followers never see a half-made store.
Status RocksStore::CreateAtomically() {
  std::error_code ec;
  fs::path target = fs::absolute(path_, ec).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path parent = target.parent_path();
  const std::string prefix = "." + target.filename().string() + ".hy-creating-";
  fs::create_directories(parent, ec);
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) {
      fs::remove_all(e.path(), ec);
    }
  }
  const fs::path tmp = parent / (prefix + std::to_string(getpid()));
  {
    rocksdb::DBOptions dbo;
    dbo.create_if_missing = true;
    dbo.create_missing_column_families = true;
    dbo.info_log = InfoLog::Open(tmp.string());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
        {rocksdb::kDefaultColumnFamilyName, RecordCfOptions()},
        {kChunksCf, ChunkCfOptions()},
        {kManifestsCf, RecordCfOptions()},
        {kMetaCf, RecordCfOptions()}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    HY_RETURN_IF_ERROR(
        FromRocks(rocksdb::DB::Open(dbo, tmp.string(), cfs, &handles, &db),
                  "creating store " + path_));
    rocksdb::WriteOptions wo;
    wo.sync = true;
    rocksdb::Status rs = db->Put(wo, handles[3], keys::kFormat,
                                 std::to_string(kStoreFormatVersion));
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    db->Close().PermitUncheckedError();
    delete db;
    HY_RETURN_IF_ERROR(FromRocks(rs, "writing the format record"));
  }
  if (fs::exists(target, ec)) fs::remove(target, ec);  // An empty folder.
  fs::rename(tmp, target, ec);
  if (ec) {
    return Status::IOError("creating store " + path_ + ": " + ec.message());
  }
  const int dir = open(parent.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
  return Status::OK();
}

Status RocksStore::Get(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                       std::string* value) {
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf, key, value);
  if (s.IsNotFound()) return Status::NotFound("key not found");
  return FromRocks(s, "reading " + path_);
}

Status RocksStore::WriteSynced(rocksdb::WriteBatch* batch,
                               const std::string& what) {
  HY_RETURN_IF_ERROR(ResumeAfterFailedWrite(what));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  Status s = FromRocks(db_->Write(wo, batch), what);
  if (!s.ok()) NoteFailedWrite(s);
  return s;
}

void RocksStore::NoteFailedWrite(const Status& error) {
  std::lock_guard<std::mutex> lock(write_error_mu_);
  write_error_ = error;
  failed_write_ = true;
}

Status RocksStore::ResumeAfterFailedWrite(const std::string& what) {
  if (!failed_write_) return Status::OK();
  // OK at once when RocksDB holds no background error.
  const rocksdb::Status rs = db_->Resume();
  std::lock_guard<std::mutex> lock(write_error_mu_);
  if (rs.ok()) {
    failed_write_ = false;
    write_error_ = Status::OK();
    return Status::OK();
  }
  // Still failing: said as the write that failed first (its code, so a
  // full disk stays ResourceExhausted), with why resuming did not work.
  return Status(write_error_.code(),
                what + ": the store refuses writes since an earlier one "
                       "failed (" +
                    std::string(write_error_.message()) +
                    "); resuming it: " + rs.ToString());
}

}  // namespace hy::statestore
