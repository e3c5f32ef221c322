// Encoding and decoding many chunks in parallel (see codec.h).

#include <string>

#include "hy/common/thread_pool.h"
#include "hy/statestore/codec.h"

namespace hy::statestore {

namespace {

template <typename Job, typename Fn>
Status RunJobs(ThreadPool* pool, std::vector<Job>* jobs, const Fn& fn) {
  auto run_one = [&](size_t i) { (*jobs)[i].status = fn((*jobs)[i]); };
  if (pool == nullptr) {
    for (size_t i = 0; i < jobs->size(); ++i) run_one(i);
  } else {
    pool->ParallelFor(jobs->size(), run_one);
  }
  for (size_t i = 0; i < jobs->size(); ++i) {
    if (!(*jobs)[i].status.ok()) {
      return (*jobs)[i].status.WithContext("chunk " + std::to_string(i));
    }
  }
  return Status::OK();
}

}  // namespace

Status EncodeChunks(const EncodeOptions& options, ThreadPool* pool,
                    std::vector<EncodeJob>* jobs) {
  return RunJobs(pool, jobs, [&options](const EncodeJob& job) {
    if (job.out == nullptr) {
      return Status::InvalidArgument("encode job without an output");
    }
    return EncodeChunk(options, job.dtype, job.raw, job.base, job.out);
  });
}

Status DecodeChunks(ThreadPool* pool, std::vector<DecodeJob>* jobs) {
  return RunJobs(pool, jobs, [](const DecodeJob& job) {
    return DecodeChunk(job.encoded, job.base, job.out);
  });
}

}  // namespace hy::statestore
