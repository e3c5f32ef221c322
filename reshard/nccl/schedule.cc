#include "schedule.h"

#include <algorithm>
#include <string>

#include "hy/common/dtype.h"

namespace hy::reshard::nccl_internal {

namespace {

struct TensorInfo {
  int src_size = 0;          // Bytes per source element.
  int wire_size = 0;         // Bytes per wire / destination element.
  bool cast = false;         // f32 -> bf16.
  int64_t src_elements = 0;  // This rank's shards.
  int64_t dst_elements = 0;
};

std::string Describe(const Transfer& x) {
  return "transfer of tensor " + std::to_string(x.tensor) + " from rank " +
         std::to_string(x.src_rank) + " offset " +
         std::to_string(x.src_offset) + " to rank " +
         std::to_string(x.dst_rank) + " offset " +
         std::to_string(x.dst_offset) + " length " + std::to_string(x.length);
}

class Builder {
 public:
  Builder(const TransferPlan& plan, int rank) : plan_(plan), rank_(rank) {}

  Status Init(WireFormat wire) {
    const int world = plan_.topology.world_size;
    if (rank_ < 0 || rank_ >= world) {
      return Status::InvalidArgument("rank " + std::to_string(rank_) +
                                     " is not in the plan's world of " +
                                     std::to_string(world));
    }
    const int num_tensors = static_cast<int>(plan_.spec.tensors.size());
    if (plan_.src.world_size() != world || plan_.dst.world_size() != world ||
        plan_.src.num_tensors() != num_tensors ||
        plan_.dst.num_tensors() != num_tensors) {
      return Status::InvalidArgument(
          "plan's shard maps do not match its spec and topology");
    }
    info_.resize(num_tensors);
    for (int t = 0; t < num_tensors; ++t) {
      const DType dtype = plan_.spec.tensors[t].meta.dtype;
      const DType wire_dtype = WireDType(dtype, wire);
      TensorInfo& info = info_[t];
      info.src_size = static_cast<int>(DTypeSize(dtype));
      info.wire_size = static_cast<int>(DTypeSize(wire_dtype));
      info.cast = dtype == DType::kF32 && wire_dtype == DType::kBF16;
      if (info.src_size == 0 || info.wire_size == 0 ||
          (!info.cast && info.src_size != info.wire_size)) {
        return Status::InvalidArgument(
            "tensor " + plan_.spec.tensors[t].meta.name +
            ": no device conversion for its dtype on wire " +
            WireFormatName(wire));
      }
      const RankShard& src = plan_.src.Get(rank_, t);
      const RankShard& dst = plan_.dst.Get(rank_, t);
      info.src_elements = src.has_shard ? src.num_elements : 0;
      info.dst_elements = dst.has_shard ? dst.num_elements : 0;
    }
    return Status::OK();
  }

  Status Check(const Transfer& x) const {
    const int world = plan_.topology.world_size;
    bool ok = x.tensor >= 0 && x.tensor < static_cast<int>(info_.size()) &&
              x.src_rank >= 0 && x.src_rank < world && x.dst_rank >= 0 &&
              x.dst_rank < world && x.length >= 0 && x.src_offset >= 0 &&
              x.dst_offset >= 0;
    if (ok && x.src_rank == rank_) {
      ok = x.src_offset <= info_[x.tensor].src_elements - x.length;
    }
    if (ok && x.dst_rank == rank_) {
      ok = x.dst_offset <= info_[x.tensor].dst_elements - x.length;
    }
    if (!ok) {
      return Status::InvalidArgument(
          "plan refers to elements outside a shard of rank " +
          std::to_string(rank_) + ": " + Describe(x));
    }
    return Status::OK();
  }

  Status AddLocal() {
    for (const Transfer& x : plan_.local) {
      if (x.src_rank != rank_ && x.dst_rank != rank_) continue;
      HY_RETURN_IF_ERROR(Check(x));
      if (x.src_rank != x.dst_rank) {
        return Status::InvalidArgument("plan's local list holds a " +
                                       Describe(x));
      }
      const TensorInfo& info = info_[x.tensor];
      AppendCopy(x.tensor, x.src_offset * info.src_size, x.tensor,
                 x.dst_offset * info.wire_size, x.length, info.src_size,
                 info.cast, &out_.ops);
      out_.local_bytes += x.length * info.wire_size;
    }
    out_.local_end = static_cast<int64_t>(out_.ops.size());
    return Status::OK();
  }

  Status AddStep(int k) {
    const std::vector<Transfer>& transfers = plan_.steps[k].transfers;
    std::vector<const Transfer*> sends;
    std::vector<const Transfer*> recvs;
    for (const Transfer& x : transfers) {
      if (x.src_rank != rank_ && x.dst_rank != rank_) continue;
      HY_RETURN_IF_ERROR(Check(x));
      if (x.length == 0) continue;
      if (x.src_rank == rank_) sends.push_back(&x);
      if (x.dst_rank == rank_) recvs.push_back(&x);
    }
    if (sends.empty() && recvs.empty()) return Status::OK();
    std::stable_sort(sends.begin(), sends.end(),
                     [](const Transfer* a, const Transfer* b) {
                       return a->dst_rank < b->dst_rank;
                     });
    std::stable_sort(recvs.begin(), recvs.end(),
                     [](const Transfer* a, const Transfer* b) {
                       return a->src_rank < b->src_rank;
                     });
    StepWork w;
    w.step = k;
    w.pack_begin = static_cast<int64_t>(out_.ops.size());
    int64_t offset = 0;
    for (const Transfer* x : sends) {
      const TensorInfo& info = info_[x->tensor];
      if (w.sends.empty() || w.sends.back().peer != x->dst_rank) {
        w.sends.push_back(PeerBucket{x->dst_rank, offset, 0});
      }
      const int64_t bytes = x->length * info.wire_size;
      AppendCopy(x->tensor, x->src_offset * info.src_size, kBucketSlot, offset,
                 x->length, info.src_size, info.cast, &out_.ops);
      offset += AlignUp(bytes, kBucketAlign);
      w.sends.back().bytes = offset - w.sends.back().offset;
      const Topology& topo = plan_.topology;
      if (topo.NodeOf(x->dst_rank) == topo.NodeOf(rank_)) {
        out_.same_node_bytes += bytes;
      } else {
        out_.cross_node_bytes += bytes;
      }
    }
    w.pack_end = static_cast<int64_t>(out_.ops.size());
    w.send_bytes = offset;

    w.unpack_begin = w.pack_end;
    offset = 0;
    for (const Transfer* x : recvs) {
      const TensorInfo& info = info_[x->tensor];
      if (w.recvs.empty() || w.recvs.back().peer != x->src_rank) {
        w.recvs.push_back(PeerBucket{x->src_rank, offset, 0});
      }
      const int64_t bytes = x->length * info.wire_size;
      AppendCopy(kBucketSlot, offset, x->tensor, x->dst_offset * info.wire_size,
                 bytes, 1, false, &out_.ops);
      offset += AlignUp(bytes, kBucketAlign);
      w.recvs.back().bytes = offset - w.recvs.back().offset;
    }
    w.unpack_end = static_cast<int64_t>(out_.ops.size());
    w.recv_bytes = offset;

    out_.max_send_bytes = std::max(out_.max_send_bytes, w.send_bytes);
    out_.max_recv_bytes = std::max(out_.max_recv_bytes, w.recv_bytes);
    out_.wire_bytes_sent += w.send_bytes;
    out_.wire_bytes_received += w.recv_bytes;
    out_.steps.push_back(std::move(w));
    return Status::OK();
  }

  Schedule Take() { return std::move(out_); }

 private:
  const TransferPlan& plan_;
  const int rank_;
  std::vector<TensorInfo> info_;
  Schedule out_;
};

}  // namespace

Result<Schedule> BuildSchedule(const TransferPlan& plan, int rank,
                               WireFormat wire) {
  Builder builder(plan, rank);
  HY_RETURN_IF_ERROR(builder.Init(wire));
  HY_RETURN_IF_ERROR(builder.AddLocal());
  for (int k = 0; k < static_cast<int>(plan.steps.size()); ++k) {
    HY_RETURN_IF_ERROR(builder.AddStep(k));
  }
  return builder.Take();
}

}  // namespace hy::reshard::nccl_internal
