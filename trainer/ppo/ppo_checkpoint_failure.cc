// PpoWorker: checkpoints that fail. What the loop tells the operator when
// a checkpoint cannot be saved (a full disk, a write error, a rank that
// does not answer), and when checkpoint.on_failure stops the run.

#include <sys/statvfs.h>

#include <cstdio>

#include "hy/checkpoint/checkpoint.h"
#include "hy/metrics/hy_metrics.h"
#include "ppo_worker.h"

namespace hy::trainer {
namespace {

std::string Num(int64_t v) { return std::to_string(v); }

std::string Mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

// The first `n` characters of `s`, marked where cut.
std::string Shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n) + " ...";
}

}  // namespace

std::string PpoWorker::DescribeCheckpointFailure(int64_t step,
                                                 const Status& error) const {
  const std::string& root = config_.checkpoint.store_root;
  std::string why;
  switch (checkpoint::FailureCause(error)) {
    case metrics::CheckpointFailureCause::kNoSpace: {
      why = "no space left on " + root;
      struct statvfs v;
      if (statvfs(root.c_str(), &v) == 0) {
        why += " (" + Mb(static_cast<double>(v.f_bavail) * v.f_frsize) +
               " free of " + Mb(static_cast<double>(v.f_blocks) * v.f_frsize) +
               ")";
      }
      break;
    }
    case metrics::CheckpointFailureCause::kIo:
      why = "a read or write error under " + root;
      break;
    case metrics::CheckpointFailureCause::kPeer:
      why = "a rank did not answer in time";
      break;
    default:
      why = "it failed";
      break;
  }
  const int64_t saved = checkpointer_->status().committed_step;
  return "checkpoint: step " + (step >= 0 ? Num(step) : std::string("?")) +
         " not saved: " + why + "; newest saved step " +
         (saved >= 0 ? Num(saved) : std::string("none"));
}

void PpoWorker::NoteCheckpointFailures(const checkpoint::CheckpointStatus& cs,
                                       IterationReport* report) {
  report->checkpoint_failures = static_cast<int64_t>(cs.failures);
  if (cs.failures == failures_seen_) return;
  const uint64_t fresh = cs.failures - failures_seen_;
  failures_seen_ = cs.failures;
  report->checkpoint_failure_cause = std::string(
      metrics::LabelValue(checkpoint::FailureCause(cs.last_error)));
  const CheckpointConfig& k = config_.checkpoint;
  std::string line = DescribeCheckpointFailure(cs.failed_step, cs.last_error);
  if (fresh > 1) line += " (" + Num(fresh - 1) + " earlier one(s) failed too)";
  line += "; " + Num(cs.consecutive_failures) + " failed in a row, ";
  line += k.on_failure == "stop"
              ? "the run stops at " + Num(k.max_consecutive_failures) +
                    " (checkpoint.on_failure: stop)"
              : "training goes on unsaved (checkpoint.on_failure: continue)";
  Log(line + " [" + Shorten(cs.last_error.ToString(), 400) + "]");
}

bool PpoWorker::CheckpointsExhausted() const {
  const CheckpointConfig& k = config_.checkpoint;
  return k.on_failure == "stop" && checkpointer_ != nullptr &&
         checkpointer_->status().consecutive_failures >=
             k.max_consecutive_failures;
}

std::string PpoWorker::CheckpointStopLine(int64_t iterations_done) const {
  const checkpoint::CheckpointStatus cs = checkpointer_->status();
  const int64_t saved = cs.committed_step;
  return "checkpoint: stopping after iteration " + Num(iterations_done) +
         ": " + Num(cs.consecutive_failures) +
         " checkpoints failed in a row (checkpoint.on_failure: stop, "
         "checkpoint.max_consecutive_failures: " +
         Num(config_.checkpoint.max_consecutive_failures) +
         "); newest saved step " +
         (saved >= 0 ? Num(saved) : std::string("none")) + ResumeHint();
}

std::string PpoWorker::ResumeHint() const {
  const std::string& root = config_.checkpoint.store_root;
  return ". Make room (or mend the disk) under " + root +
         " and continue with hyctl train --resume " + root;
}

}  // namespace hy::trainer
