#include "servers.h"

#include <chrono>
#include <thread>


namespace hy::metrics::testing {
namespace {

// Starts a server with argv (which must make it listen on 127.0.0.1:0),
// reads the port it bound from /proc, and waits until /-/ready answers 200
// there. The port is the server's own from the moment it is bound, so the
// answer can only come from this server.
Result<std::pair<std::unique_ptr<ChildProcess>, int>> StartReady(
    const std::vector<std::string>& argv, const std::string& log_path,
    int timeout_ms) {
  HY_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(argv, log_path));
  int port = 0;
  bool ready = WaitUntil(
      [&] {
        if (!child->Running()) return true;  // Stop waiting; it died.
        if (port == 0) port = child->ListeningPort();
        if (port == 0) return false;  // Not listening yet.
        auto r = HttpGet(port, "/-/ready", 5000);
        return r.ok() && r->status == 200;
      },
      timeout_ms);
  if (ready && child->Running()) {
    return std::make_pair(std::move(child), port);
  }
  std::string within = " within " + std::to_string(timeout_ms) + " ms";
  std::string what;
  if (!child->Running()) {
    what = "exited";
  } else if (port == 0) {
    what = "did not listen" + within;
  } else {
    what = "was not ready on port " + std::to_string(port) + within;
  }
  return Status::Unavailable(argv[0] + " " + what + "; its log:\n" +
                             child->LogTail());
}

Result<nlohmann::json> GetJson(int port, const std::string& target) {
  HY_ASSIGN_OR_RETURN(auto response, HttpGet(port, target));
  nlohmann::json j = nlohmann::json::parse(response.body, nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::DataLoss("HTTP " + std::to_string(response.status) +
                            " with a body that is not JSON: " + response.body);
  }
  return j;
}

}  // namespace

Result<HttpResponse> HttpGet(int port, const std::string& target,
                             int timeout_ms) {
  return HttpGet("127.0.0.1", port, target, timeout_ms);
}

bool WaitUntil(const std::function<bool()>& probe, int timeout_ms) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (probe()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string PrometheusServer::Config(const std::vector<ScrapeTarget>& targets) {
  std::string interval = std::to_string(kScrapeIntervalSeconds) + "s";
  std::string yaml = "global:\n  scrape_interval: " + interval +
                     "\n  scrape_timeout: " + interval +
                     "\n  evaluation_interval: " + interval +
                     "\nscrape_configs:\n";
  for (const ScrapeTarget& t : targets) {
    yaml += "  - job_name: " + t.job + "\n";
    yaml += std::string("    honor_labels: ") +
            (t.honor_labels ? "true" : "false") + "\n";
    if (!t.file_sd.empty()) {
      yaml += "    file_sd_configs:\n      - files: ['" + t.file_sd +
              "']\n        refresh_interval: 1s\n";
    } else {
      yaml += "    static_configs:\n      - targets: ['127.0.0.1:" +
              std::to_string(t.port) + "']\n";
    }
  }
  return yaml;
}

Result<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const std::string& binary, const std::string& dir,
    const std::vector<ScrapeTarget>& targets) {
  return StartWithConfig(binary, dir, Config(targets));
}

Result<std::unique_ptr<PrometheusServer>> PrometheusServer::StartWithConfig(
    const std::string& binary, const std::string& dir,
    const std::string& yaml) {
  if (dir.empty()) return Status::InvalidArgument("no state directory");
  std::string config = dir + "/prometheus.yml";
  HY_RETURN_IF_ERROR(WriteFile(config, yaml));
  std::vector<std::string> argv = {
      binary,
      "--config.file=" + config,
      "--storage.tsdb.path=" + dir + "/tsdb",
      "--web.listen-address=127.0.0.1:0",
      "--web.console.templates=" + dir,
      "--web.console.libraries=" + dir,
  };
  HY_ASSIGN_OR_RETURN(auto started,
                      StartReady(argv, dir + "/prometheus.log", 90000));
  std::unique_ptr<PrometheusServer> server(new PrometheusServer());
  server->process_ = std::move(started.first);
  server->port_ = started.second;
  return server;
}

Result<nlohmann::json> PrometheusServer::Query(const std::string& expr) {
  return GetJson(port_, "/api/v1/query?query=" + PercentEncode(expr));
}

Result<nlohmann::json> PrometheusServer::QueryRange(const std::string& expr,
                                                    int seconds) {
  double now = std::chrono::duration<double>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  return GetJson(port_,
                 "/api/v1/query_range?query=" + PercentEncode(expr) +
                     "&start=" + std::to_string(now - seconds) +
                     "&end=" + std::to_string(now) + "&step=1");
}

Result<nlohmann::json> PrometheusServer::LabelValues(
    const std::string& label, const std::string& selector) {
  return GetJson(port_, "/api/v1/label/" + label + "/values?match%5B%5D=" +
                            PercentEncode(selector));
}

Result<nlohmann::json> PrometheusServer::WaitForResult(const std::string& expr,
                                                       int timeout_ms) {
  Result<nlohmann::json> last = Status::Unavailable("no query ran");
  WaitUntil(
      [&] {
        last = Query(expr);
        return last.ok() && (*last)["status"] == "success" &&
               !(*last)["data"]["result"].empty();
      },
      timeout_ms);
  return last;
}

Result<std::unique_ptr<PushgatewayServer>> PushgatewayServer::Start(
    const std::string& binary, const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("no state directory");
  // Debian's build persists to /var/lib/prometheus by default: keep each
  // test's state in its own directory instead.
  std::vector<std::string> argv = {
      binary, "--web.listen-address=127.0.0.1:0",
      "--persistence.file=" + dir + "/pushgateway.data"};
  HY_ASSIGN_OR_RETURN(auto started,
                      StartReady(argv, dir + "/pushgateway.log", 60000));
  std::unique_ptr<PushgatewayServer> server(new PushgatewayServer());
  server->process_ = std::move(started.first);
  server->port_ = started.second;
  return server;
}

}  // namespace hy::metrics::testing
