// A committed part as a stream of bounded messages (see replica_stream.h).

#include "replica_stream.h"

#include <algorithm>
#include <cstring>

#include "hy/statestore/codec.h"
#include "wire_util.h"

namespace hy::recovery::internal {

Result<PartSender> PartSender::Open(statestore::Store* own, uint64_t version,
                                    uint64_t piece_bytes,
                                    uint64_t record_bytes) {
  PartSender s;
  s.own_ = own;
  s.version_ = version;
  HY_ASSIGN_OR_RETURN(statestore::Manifest m, own->ReadManifest(version));
  s.part_.version = version;
  s.part_.rank = m.commit.LocalRanks().empty() ? 0 : m.commit.LocalRanks()[0];
  for (const auto& [name, entry] : m.tensors) s.part_.tensors.push_back(entry);
  s.part_.blobs = m.blobs;
  std::vector<uint8_t> header;
  const std::string commit = statestore::EncodeCommitRecord(m.commit);
  const std::string manifest = statestore::EncodeRankManifest(s.part_);
  PutBytes(&header, commit.data(), commit.size());
  PutBytes(&header, manifest.data(), manifest.size());
  s.header_.assign(header.begin(), header.end());

  // Records and their grouping into messages, from the sizes alone.
  for (const statestore::TensorEntry& t : s.part_.tensors) {
    const uint64_t es = DTypeSize(t.meta.dtype);
    // Pieces end on element boundaries: each is read as a region.
    const uint64_t most =
        std::max<uint64_t>(es, std::min(piece_bytes, record_bytes) / es * es);
    for (const statestore::ShardEntry& e : t.shards) {
      const uint64_t bytes =
          static_cast<uint64_t>(e.geometry.NumElements()) * es;
      Result<std::vector<FlatRun>> runs = e.geometry.ToFlatRuns(t.meta.shape);
      if (!runs.ok()) {
        return Status::DataLoss("replica stream: tensor '" + t.meta.name +
                                "': " + runs.status().ToString());
      }
      s.shards_.push_back({t.meta.name, t.meta.dtype, bytes, *runs});
      const int index = static_cast<int>(s.shards_.size()) - 1;
      uint64_t off = 0;
      do {
        const uint64_t n = std::min(most, bytes - off);
        s.records_.push_back({index, -1, off, n});
        off += n;
      } while (off < bytes);
      s.raw_bytes_ += bytes;
    }
  }
  for (size_t b = 0; b < s.part_.blobs.size(); ++b) {
    s.records_.push_back({-1, static_cast<int>(b), 0, s.part_.blobs[b].size});
  }
  std::vector<uint64_t> lengths;
  for (const Record& r : s.records_) lengths.push_back(r.length);
  s.message_starts_ = BatchStarts(lengths, piece_bytes);
  // A part of no records still sends its header.
  if (s.message_starts_.empty()) s.message_starts_.push_back(0);
  s.messages_ = s.message_starts_.size();
  return s;
}

Status PartSender::Next(std::vector<uint8_t>* out) {
  out->clear();
  if (sent_ >= messages_) return Status::OK();
  if (sent_ == 0) out->assign(header_.begin(), header_.end());
  const size_t begin = message_starts_[sent_];
  const size_t end =
      sent_ + 1 < messages_ ? message_starts_[sent_ + 1] : records_.size();
  ++sent_;
  std::string encoded;
  statestore::EncodeOptions eo;
  for (size_t r = begin; r < end; ++r) {
    const Record& rec = records_[r];
    if (rec.blob >= 0) {
      const statestore::BlobEntry& b = part_.blobs[rec.blob];
      HY_ASSIGN_OR_RETURN(std::string data,
                          own_->ReadBlob(version_, b.name, b.rank));
      PutBytes(out, data.data(), data.size());
      continue;
    }
    const Shard& s = shards_[rec.shard];
    // The piece's elements, as regions of the tensor (a shard's local order
    // is its flat runs', in order).
    const int64_t es = static_cast<int64_t>(DTypeSize(s.dtype));
    const FlatRun local{static_cast<int64_t>(rec.offset) / es,
                        static_cast<int64_t>(rec.length) / es};
    raw_.resize(rec.length);
    int64_t at = 0;  // Local element offset of the run below.
    for (const FlatRun& run : s.runs) {
      const int64_t lo = std::max(at, local.offset);
      const int64_t hi = std::min(at + run.length, local.end());
      if (lo < hi) {
        HY_RETURN_IF_ERROR(own_->ReadRegion(
            version_, s.tensor, {run.offset + (lo - at), hi - lo},
            MutableBytes(raw_.data() + (lo - local.offset) * es,
                         (hi - lo) * es)));
      }
      at += run.length;
    }
    HY_RETURN_IF_ERROR(
        statestore::EncodeChunk(eo, s.dtype, ConstBytes(raw_), {}, &encoded));
    PutU64(out, rec.length);
    PutBytes(out, encoded.data(), encoded.size());
  }
  return Status::OK();
}

Status PartReceiver::Fail(Status s) {
  if (broken_.ok()) broken_ = std::move(s);
  writer_.reset();  // Nothing of the part gets prepared.
  return broken_;
}

Status PartReceiver::Header(Reader* in, uint64_t version) {
  auto garbled = [&](const std::string& why) {
    return Fail(Status::DataLoss("replica stream: " + why));
  };
  std::string commit_text, manifest_text;
  if (!in->String(&commit_text) || !in->String(&manifest_text)) {
    return garbled("garbled header");
  }
  Result<statestore::CommitRecord> commit =
      statestore::DecodeCommitRecord(commit_text);
  if (!commit.ok()) return garbled(commit.status().ToString());
  Result<statestore::RankManifest> manifest =
      statestore::DecodeRankManifest(manifest_text);
  if (!manifest.ok()) return garbled(manifest.status().ToString());
  if (commit->version != version || manifest->version != version) {
    return garbled("a message for another version");
  }
  commit_ = std::move(commit).value();
  manifest_ = std::move(manifest).value();
  for (const statestore::TensorEntry& t : manifest_.tensors) {
    for (const statestore::ShardEntry& s : t.shards) {
      shards_.push_back({t.meta, s.geometry,
                         static_cast<uint64_t>(s.geometry.NumElements()) *
                             DTypeSize(t.meta.dtype)});
    }
  }
  Result<std::unique_ptr<statestore::PartWriter>> writer =
      store_->NewPartWriter(version, manifest_.rank, buffer_bytes_);
  if (writer.ok()) {
    writer_ = std::move(writer).value();
  } else if (writer.status().code() != StatusCode::kAlreadyExists) {
    return Fail(writer.status());
  }  // Prepared already: the stream is checked, not written again.
  have_header_ = true;
  return Status::OK();
}

Status PartReceiver::Add(const std::vector<uint8_t>& message,
                         uint64_t version) {
  if (!broken_.ok()) return broken_;
  auto garbled = [&](const std::string& why) {
    return Fail(Status::DataLoss("replica stream: " + why));
  };
  Reader in(message);
  if (!have_header_) HY_RETURN_IF_ERROR(Header(&in, version));
  while (!in.done()) {
    if (shard_ < shards_.size()) {
      const Shard& shard = shards_[shard_];
      uint64_t length = 0;
      ConstBytes encoded;
      if (!in.U64(&length) || !in.Bytes(&encoded)) return garbled("truncated");
      if (length > shard.bytes - filled_)
        return garbled("piece past its shard");
      piece_.resize(length);
      Status s = statestore::DecodeChunk(encoded, {}, MutableBytes(piece_));
      if (!s.ok()) return garbled(s.ToString());
      if (writer_ != nullptr) {
        if (filled_ == 0) {
          s = writer_->BeginShard(shard.meta, shard.geometry, false);
        }
        if (s.ok()) s = writer_->Append(ConstBytes(piece_));
        if (!s.ok()) return Fail(s);
      }
      filled_ += length;
      if (filled_ == shard.bytes) {
        ++shard_;
        filled_ = 0;
      }
      continue;
    }
    if (blobs_.size() >= manifest_.blobs.size()) return garbled("too long");
    std::string data;
    if (!in.String(&data)) return garbled("truncated blob");
    blobs_.push_back(std::move(data));
  }
  return Status::OK();
}

bool PartReceiver::complete() const {
  return broken_.ok() && have_header_ && shard_ == shards_.size() &&
         blobs_.size() == manifest_.blobs.size();
}

Status PartReceiver::status() const {
  if (!broken_.ok() || complete()) return broken_;
  return Status::DataLoss("replica stream ended early (the sender failed)");
}

Status PartReceiver::Finish() {
  if (writer_ == nullptr) return Status::OK();  // Prepared already.
  std::vector<statestore::BlobData> blobs;
  for (size_t b = 0; b < blobs_.size(); ++b) {
    blobs.push_back({manifest_.blobs[b].name, manifest_.blobs[b].rank,
                     ConstBytes(blobs_[b])});
  }
  Status s = writer_->Finish(blobs, nullptr);
  writer_.reset();
  if (s.code() == StatusCode::kAlreadyExists) return Status::OK();
  return s;
}

}  // namespace hy::recovery::internal
