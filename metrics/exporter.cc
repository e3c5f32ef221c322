#include "hy/metrics/exporter.h"

#include <CivetServer.h>
#include <prometheus/exposer.h>
#include <unistd.h>

#include <exception>
#include <mutex>
#include <vector>

namespace hy::metrics {
namespace {

bool IsWildcard(const std::string& host) {
  return host == "0.0.0.0" || host == "[::]" || host == "[0:0:0:0:0:0:0:0]";
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

// civetweb reports why it could not start only through this callback.
std::mutex civet_mu;
std::string civet_error;  // Guarded by civet_mu.

int RecordCivetError(const struct mg_connection*, const char* message) {
  std::lock_guard<std::mutex> lock(civet_mu);
  civet_error = message != nullptr ? message : "";
  return 1;  // Handled: civetweb prints nothing itself.
}

}  // namespace

Exporter::Exporter(std::unique_ptr<prometheus::Exposer> exposer,
                   std::string host, int port)
    : exposer_(std::move(exposer)), host_(std::move(host)), port_(port) {}

Exporter::~Exporter() = default;

Result<std::unique_ptr<Exporter>> Exporter::Start(
    const std::string& address, int port,
    std::weak_ptr<prometheus::Collectable> collectable) {
  if (address.empty()) {
    return Status::InvalidArgument("metrics: empty bind address");
  }
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument("metrics: port " + std::to_string(port) +
                                   " outside [0, 65535]");
  }
  std::string host = address;
  if (host.find(':') != std::string::npos && host.front() != '[') {
    host = "[" + host + "]";  // civetweb's form of an IPv6 address.
  }
  const std::string listen = host + ":" + std::to_string(port);
  std::unique_ptr<prometheus::Exposer> exposer;
  CivetCallbacks callbacks;
  callbacks.log_message = RecordCivetError;
  {
    std::lock_guard<std::mutex> lock(civet_mu);
    civet_error.clear();  // Only this start's message explains its failure.
  }
  try {
    exposer = std::make_unique<prometheus::Exposer>(listen, 2, &callbacks);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(civet_mu);
    return Status::Unavailable(
        "metrics: cannot serve on " + listen + ": " + e.what() +
        (civet_error.empty() ? "" : " (" + civet_error + ")"));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return Status::Unavailable("metrics: no port bound on " + listen);
  }
  exposer->RegisterCollectable(collectable);
  return std::unique_ptr<Exporter>(
      new Exporter(std::move(exposer), std::move(host), ports.front()));
}

std::string Exporter::target() const {
  return (IsWildcard(host_) ? HostName() : host_) + ":" + std::to_string(port_);
}

std::string Exporter::url() const { return "http://" + target() + "/metrics"; }

}  // namespace hy::metrics
