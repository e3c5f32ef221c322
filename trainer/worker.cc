#include "hy/trainer/worker.h"

namespace hy::trainer {

Result<RunSummary> RunWorker(const TrainConfig&, const WorkerOptions&) {
  return Status::FailedPrecondition("RunWorker: not implemented yet");
}

}  // namespace hy::trainer
