// Pusher: sends one process's metrics to a Prometheus Pushgateway through
// prometheus-cpp's Gateway (push), for processes that may end before
// Prometheus scrapes them. hy adds errors as values: the Gateway answers
// with an HTTP status code (or a negative curl error), Pusher with a Status.
//
//   HY_ASSIGN_OR_RETURN(auto p, hy::metrics::Pusher::Create(
//       "127.0.0.1:9091", "hyctl_train", {{"run", "a"}, {"rank", "0"}},
//       registry));
//   HY_RETURN_IF_ERROR(p->Push());
//
// The group is /metrics/job/<job>/<label>/<value>...: the library does not
// encode values, so grouping values must not contain '/' (Create checks).
//
// Ownership: holds the collectable weakly.
// Thread-safety: Push, PushAdd and Delete may be called from any thread
// (the Gateway serializes them).

#ifndef HY_METRICS_PUSHER_H_
#define HY_METRICS_PUSHER_H_

#include <prometheus/labels.h>

#include <memory>
#include <string>

#include "hy/common/result.h"

namespace prometheus {
class Collectable;
class Gateway;
}  // namespace prometheus

namespace hy::metrics {

class Pusher {
 public:
  // `host_port` is "host:port". Returns InvalidArgument for a malformed
  // host_port, an empty job, or a grouping value that is empty or holds a
  // '/'.
  static Result<std::unique_ptr<Pusher>> Create(
      const std::string& host_port, const std::string& job,
      const prometheus::Labels& grouping,
      std::weak_ptr<prometheus::Collectable> collectable);

  ~Pusher();
  Pusher(const Pusher&) = delete;
  Pusher& operator=(const Pusher&) = delete;

  // Push (PUT) replaces the group's metrics; PushAdd (POST) only those with
  // the names pushed; Delete removes the group. Each returns OK on a 2xx
  // answer, InvalidArgument on 4xx (e.g. the Pushgateway's consistency
  // check), Unavailable on 5xx or when the Pushgateway cannot be reached.
  Status Push();
  Status PushAdd();
  Status Delete();

 private:
  explicit Pusher(std::unique_ptr<prometheus::Gateway> gateway,
                  std::string where);
  Status Check(const char* what, int code) const;

  std::unique_ptr<prometheus::Gateway> gateway_;
  std::string where_;  // host:port/metrics/job/... for messages.
};

}  // namespace hy::metrics

#endif  // HY_METRICS_PUSHER_H_
