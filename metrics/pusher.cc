#include "hy/metrics/pusher.h"

#include <prometheus/gateway.h>

#include <charconv>
#include <exception>

namespace hy::metrics {

Pusher::Pusher(std::unique_ptr<prometheus::Gateway> gateway, std::string where)
    : gateway_(std::move(gateway)), where_(std::move(where)) {}

Pusher::~Pusher() = default;

Result<std::unique_ptr<Pusher>> Pusher::Create(
    const std::string& host_port, const std::string& job,
    const prometheus::Labels& grouping,
    std::weak_ptr<prometheus::Collectable> collectable) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  const char* end = host_port.data() + host_port.size();
  if (colon == std::string::npos || colon == 0 ||
      std::from_chars(host_port.data() + colon + 1, end, port).ptr != end ||
      port < 1 || port > 65535) {
    return Status::InvalidArgument("pushgateway \"" + host_port +
                                   "\" is not host:port");
  }
  if (job.empty() || job.find('/') != std::string::npos) {
    return Status::InvalidArgument("pushgateway job \"" + job +
                                   "\" is empty or holds a '/'");
  }
  std::string where = host_port + "/metrics/job/" + job;
  for (const auto& [name, value] : grouping) {
    if (value.empty() || value.find('/') != std::string::npos) {
      return Status::InvalidArgument("pushgateway grouping label " + name +
                                     "=\"" + value +
                                     "\" is empty or holds a '/'");
    }
    where += "/" + name + "/" + value;
  }
  std::unique_ptr<prometheus::Gateway> gateway;
  try {
    gateway = std::make_unique<prometheus::Gateway>(
        host_port.substr(0, colon), host_port.substr(colon + 1), job,
        grouping);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("pushgateway " + where + ": " + e.what());
  }
  gateway->RegisterCollectable(collectable);
  return std::unique_ptr<Pusher>(
      new Pusher(std::move(gateway), std::move(where)));
}

Status Pusher::Check(const char* what, int code) const {
  if (code >= 200 && code < 300) return Status::OK();
  const std::string msg = std::string(what) + " " + where_ + ": " +
                          (code < 100 ? "cannot reach it (curl error " +
                                            std::to_string(-code) + ")"
                                      : "HTTP " + std::to_string(code));
  if (code >= 400 && code < 500) return Status::InvalidArgument(msg);
  return Status::Unavailable(msg);
}

Status Pusher::Push() {
  try {
    return Check("push to", gateway_->Push());
  } catch (const std::exception& e) {
    return Status::Unavailable("push to " + where_ + ": " + e.what());
  }
}

Status Pusher::PushAdd() {
  try {
    return Check("push to", gateway_->PushAdd());
  } catch (const std::exception& e) {
    return Status::Unavailable("push to " + where_ + ": " + e.what());
  }
}

Status Pusher::Delete() {
  try {
    return Check("delete", gateway_->Delete());
  } catch (const std::exception& e) {
    return Status::Unavailable("delete " + where_ + ": " + e.what());
  }
}

}  // namespace hy::metrics
