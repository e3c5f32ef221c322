// File-based service discovery for Prometheus: the JSON file a
// `file_sd_configs` entry reads, one target group per rank of a run,
//
//   [{"targets": ["127.0.0.1:41234"],
//     "labels": {"run": "a", "rank": "0", "node": "0"}}, ...]
//
// Every worker of `hyctl train` sets its own entry when its exporter is up,
// so the file names each live rank's endpoint also after a restart (a new
// port replaces the old one) or a restart on fewer ranks (entries of ranks
// beyond the world size are dropped).
//
// Thread-safety: SetFileSdTarget may be called by many processes at once:
// it holds an exclusive flock on "<path>.lock" while it reads, changes and
// atomically replaces (rename) the file, so Prometheus never reads a half
// written file.

#ifndef HY_METRICS_FILE_SD_H_
#define HY_METRICS_FILE_SD_H_

#include <prometheus/labels.h>

#include <string>

#include "hy/common/status.h"

namespace hy::metrics {

// Sets the target group of rank `rank` in the file_sd JSON at `path`
// (created if absent) to `target` ("host:port") with `labels` plus
// rank="<rank>", and drops the groups of ranks >= `world_size`. A file that
// does not parse is replaced. Returns IOError if the file or its lock
// cannot be written.
// REQUIRES: 0 <= rank < world_size.
Status SetFileSdTarget(const std::string& path, int rank, int world_size,
                       const std::string& target,
                       const prometheus::Labels& labels);

}  // namespace hy::metrics

#endif  // HY_METRICS_FILE_SD_H_
