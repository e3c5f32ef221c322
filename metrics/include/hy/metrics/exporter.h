// Exporter: one process's metrics endpoint, http://<address>:<port>/metrics,
// served by prometheus-cpp's Exposer (pull). hy adds only what the library
// leaves to its caller: errors as values (the Exposer throws when it cannot
// bind), the port actually bound when port 0 asked for a free one, and the
// target address a Prometheus scrape config names.
//
//   HY_ASSIGN_OR_RETURN(auto e, hy::metrics::Exporter::Start("127.0.0.1", 0,
//                                                            registry));
//   std::cerr << "metrics: " << e->url() << "\n";
//
// Besides the registered collectable, every scrape includes the Exposer's
// own exposer_scrapes_total, exposer_transferred_bytes_total and
// exposer_request_latencies (a summary, in microseconds).
//
// Ownership: the Exporter owns the server and its threads and holds the
// collectable weakly; destroying it stops the server.
// Thread-safety: the accessors may be called from any thread.

#ifndef HY_METRICS_EXPORTER_H_
#define HY_METRICS_EXPORTER_H_

#include <memory>
#include <string>

#include "hy/common/result.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace hy::metrics {

class Exporter {
 public:
  // Starts serving `collectable` on `address` (an IPv4 address, a host name,
  // or an IPv6 address with or without brackets) and `port` (0: a free
  // port). Returns InvalidArgument for an empty address or a port outside
  // [0, 65535], and Unavailable if the address cannot be bound (in use, not
  // local, unresolvable).
  static Result<std::unique_ptr<Exporter>> Start(
      const std::string& address, int port,
      std::weak_ptr<prometheus::Collectable> collectable);

  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // The port bound (never 0).
  int port() const { return port_; }
  // "host:port" for a scrape config: the bind address, or this machine's
  // host name when bound to a wildcard address (0.0.0.0, ::).
  std::string target() const;
  // "http://<target>/metrics".
  std::string url() const;

 private:
  Exporter(std::unique_ptr<prometheus::Exposer> exposer, std::string host,
           int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;  // Bracketed if IPv6.
  int port_ = 0;
};

}  // namespace hy::metrics

#endif  // HY_METRICS_EXPORTER_H_
