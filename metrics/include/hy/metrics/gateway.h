// Gateway: pushes the metrics of registered Collectables to a Prometheus
// Pushgateway, for short jobs (`hyctl reshard`, a one-off recovery) that end
// before Prometheus could scrape them. Modelled on prometheus-cpp's Gateway.
//
//   hy::metrics::GatewayOptions o;
//   o.port = 9091;
//   o.job = "hyctl_reshard";
//   o.grouping = {{"instance", hostname}};
//   HY_ASSIGN_OR_RETURN(auto gateway, hy::metrics::Gateway::Create(o));
//   gateway->RegisterCollectable(registry);
//   HY_RETURN_IF_ERROR(gateway->Push());
//
// The group is addressed as /metrics/job/<job>{/<label>/<value>}: values are
// percent-encoded, and a value that is empty or contains '/' is sent in the
// Pushgateway's base64url form (<label>@base64/<value>), the only form it
// reads back intact. The body is the text format (text_format.h).
//
// Ownership: holds Collectables weakly, like the Exposer.
// Thread-safety: all methods may be called from any thread; pushes run one
// HTTP request each, without a shared connection.

#ifndef HY_METRICS_GATEWAY_H_
#define HY_METRICS_GATEWAY_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/metrics/collectable.h"
#include "hy/metrics/names.h"

namespace hy::metrics {

struct GatewayOptions {
  std::string host = "127.0.0.1";  // Host name or IPv4 address.
  int port = 9091;
  std::string job;  // Required, UTF-8.
  // Further grouping labels (e.g. instance). Valid label names, not "job";
  // values UTF-8, may be empty.
  Labels grouping;
  int timeout_ms = 10000;  // For each request's response.
};

// Returns the URL path of a group: "/metrics/job/<job>/<label>/<value>...".
// Returns kInvalidArgument for an empty or non-UTF-8 job, an invalid label
// name, a "job" grouping label or a non-UTF-8 value.
Result<std::string> GroupingKeyPath(const std::string& job,
                                    const Labels& grouping);

class Gateway {
 public:
  // Returns kInvalidArgument for invalid options (see GroupingKeyPath, and a
  // port outside [1, 65535] or an empty host).
  static Result<std::unique_ptr<Gateway>> Create(GatewayOptions options);

  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  void RegisterCollectable(const std::weak_ptr<Collectable>& collectable);

  // PUT: replaces every metric of the group with the current ones.
  // PushAdd, POST: replaces only the metrics with the names pushed.
  // Delete, DELETE: removes the group. The Pushgateway only queues a DELETE
  // (it answers 202 Accepted): the group may still be served for a moment
  // after Delete returns, though a push sent after that is applied after the
  // deletion. (Push and PushAdd are answered once the push is stored, with
  // the Pushgateway's default consistency check.)
  // Each returns OK on a 2xx answer; kUnavailable if the Pushgateway cannot
  // be reached or answers 5xx; kInvalidArgument if it refuses the push
  // (4xx, e.g. inconsistent metrics), with its explanation in the message.
  Status Push();
  Status PushAdd();
  Status Delete();

  // The group's URL path.
  const std::string& path() const { return path_; }

  // The body Push would send now.
  std::string Render() const;

 private:
  Gateway(GatewayOptions options, std::string path);
  Status Send(const std::string& method, std::string body);

  const GatewayOptions options_;
  const std::string path_;
  mutable std::mutex mu_;
  std::vector<std::weak_ptr<Collectable>> collectables_;  // Guarded by mu_.
};

}  // namespace hy::metrics

#endif  // HY_METRICS_GATEWAY_H_
