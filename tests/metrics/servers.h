// Test support: a real Prometheus server and a real Pushgateway, started
// from their Debian binaries on 127.0.0.1 with a temporary directory, waited
// for with a bounded timeout, and stopped when the object is destroyed. Also
// the HTTP helpers the tests use to talk to them.
//
// Each server binds port 0 itself and its port is read back from /proc, so
// the port cannot be taken by another process between picking and binding,
// and the readiness probe can only be answered by this server. Timeouts and
// deadlines are generous (tests run in parallel on a loaded 2-core CI
// machine); waits end as soon as their condition holds.

#ifndef HY_TESTS_METRICS_SERVERS_H_
#define HY_TESTS_METRICS_SERVERS_H_

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http_get.h"
#include "hy/common/result.h"
#include "subprocess.h"

namespace hy::metrics::testing {

// Default timeout for one request to a test server's response headers.
inline constexpr int kHttpTimeoutMs = 30000;

// GET http://127.0.0.1:<port><target>.
Result<HttpResponse> HttpGet(int port, const std::string& target,
                             int timeout_ms = kHttpTimeoutMs);

// Calls `probe` every 100 ms until it returns true or `timeout_ms` passes.
// Returns whether it succeeded.
bool WaitUntil(const std::function<bool()>& probe, int timeout_ms);

struct ScrapeTarget {
  std::string job;
  int port = 0;               // On 127.0.0.1 (unless file_sd is set).
  bool honor_labels = false;  // true for a Pushgateway.
  // If set, the targets come from this file_sd JSON file (re-read every
  // second) instead of port.
  std::string file_sd;
};

class PrometheusServer {
 public:
  static constexpr int kScrapeIntervalSeconds = 1;

  // The prometheus.yml for `targets`: 1 s scrape and evaluation interval.
  static std::string Config(const std::vector<ScrapeTarget>& targets);

  // Starts `binary` with that config and its TSDB under `dir`, on a port the
  // kernel picks, and waits (at most 90 s) until /-/ready answers 200 there.
  // Returns kUnavailable with the server's log if it exits or does not become
  // ready.
  static Result<std::unique_ptr<PrometheusServer>> Start(
      const std::string& binary, const std::string& dir,
      const std::vector<ScrapeTarget>& targets);
  // The same with the config text `yaml` (e.g. the repository's
  // metrics/prometheus.yml, filled in).
  static Result<std::unique_ptr<PrometheusServer>> StartWithConfig(
      const std::string& binary, const std::string& dir,
      const std::string& yaml);

  int port() const { return port_; }
  std::string LogTail() const { return process_->LogTail(); }

  // Runs an instant query (/api/v1/query). Returns the parsed response
  // (with "status", and "data" or "error"), or the transport's error.
  Result<nlohmann::json> Query(const std::string& expr);
  // Runs a range query over the last `seconds` with a 1 s step.
  Result<nlohmann::json> QueryRange(const std::string& expr, int seconds);
  // /api/v1/label/<label>/values?match[]=<selector>.
  Result<nlohmann::json> LabelValues(const std::string& label,
                                     const std::string& selector);

  // Polls Query(expr) until it succeeds with a non-empty result, or
  // `timeout_ms` passes; returns the last response either way (or the
  // transport's error).
  Result<nlohmann::json> WaitForResult(const std::string& expr, int timeout_ms);

 private:
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

class PushgatewayServer {
 public:
  // Starts `binary` on a port the kernel picks, persisting to a file under
  // `dir` (so no state is shared with other runs), and waits (at most 60 s)
  // until /-/ready answers 200 there. Returns kUnavailable with the server's
  // log if it exits or does not become ready.
  static Result<std::unique_ptr<PushgatewayServer>> Start(
      const std::string& binary, const std::string& dir);

  int port() const { return port_; }
  std::string LogTail() const { return process_->LogTail(); }

 private:
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

}  // namespace hy::metrics::testing

#endif  // HY_TESTS_METRICS_SERVERS_H_
