// Test support: a real Prometheus server and a real Pushgateway, started
// from their Debian binaries on 127.0.0.1 with free ports and a temporary
// directory, waited for with a bounded timeout, and stopped when the object
// is destroyed. Also the HTTP helpers the tests use to talk to them.

#ifndef HY_TESTS_METRICS_SERVERS_H_
#define HY_TESTS_METRICS_SERVERS_H_

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http_client.h"
#include "hy/common/result.h"
#include "subprocess.h"

namespace hy::metrics::testing {

// GET http://127.0.0.1:<port><target>.
Result<internal::HttpResponse> HttpGet(int port, const std::string& target,
                                       int timeout_ms = 5000);

// Calls `probe` every 100 ms until it returns true or `timeout_ms` passes.
// Returns whether it succeeded.
bool WaitUntil(const std::function<bool()>& probe, int timeout_ms);

struct ScrapeTarget {
  std::string job;
  int port = 0;               // On 127.0.0.1.
  bool honor_labels = false;  // true for a Pushgateway.
};

class PrometheusServer {
 public:
  static constexpr int kScrapeIntervalSeconds = 1;

  // The prometheus.yml for `targets`: 1 s scrape and evaluation interval.
  static std::string Config(const std::vector<ScrapeTarget>& targets);

  // Starts `binary` with that config and its TSDB under `dir`, on a free
  // port, and waits (at most 30 s) until /-/ready answers 200. Retries with
  // another port if the first is taken meanwhile. Returns kUnavailable with
  // the server's log if it does not become ready.
  static Result<std::unique_ptr<PrometheusServer>> Start(
      const std::string& binary, const std::string& dir,
      const std::vector<ScrapeTarget>& targets);

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
  // Starts `binary` on a free port (no persistence) and waits (at most 20 s)
  // until /-/ready answers 200.
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
