#include "hy/metrics/gateway.h"

#include "http_client.h"
#include "http_util.h"
#include "hy/metrics/text_format.h"

namespace hy::metrics {
namespace {

// One "<name>/<value>" pair of the grouping key path.
std::string Segment(const std::string& name, const std::string& value) {
  if (value.empty() || value.find('/') != std::string::npos) {
    // Base64 ("=" for empty) is the only way a '/' or an empty value
    // survives the Pushgateway's path handling.
    std::string encoded =
        value.empty() ? std::string("=") : internal::Base64UrlEncode(value);
    return "/" + name + "@base64/" + encoded;
  }
  return "/" + name + "/" + internal::PercentEncode(value);
}

}  // namespace

Result<std::string> GroupingKeyPath(const std::string& job,
                                    const Labels& grouping) {
  if (job.empty()) return Status::InvalidArgument("Pushgateway job is empty");
  HY_RETURN_IF_ERROR(ValidateUtf8(job, "Pushgateway job"));
  std::string path = "/metrics" + Segment("job", job);
  for (const auto& [name, value] : grouping) {
    HY_RETURN_IF_ERROR(ValidateLabelName(name));
    if (name == "job") {
      return Status::InvalidArgument(
          "grouping label \"job\" is set through the job name");
    }
    HY_RETURN_IF_ERROR(
        ValidateUtf8(value, "value of grouping label \"" + name + "\""));
    path += Segment(name, value);
  }
  return path;
}

Result<std::unique_ptr<Gateway>> Gateway::Create(GatewayOptions options) {
  if (options.host.empty()) {
    return Status::InvalidArgument("Pushgateway host is empty");
  }
  if (options.port < 1 || options.port > 65535) {
    return Status::InvalidArgument("Pushgateway port " +
                                   std::to_string(options.port) +
                                   " is outside [1, 65535]");
  }
  HY_ASSIGN_OR_RETURN(std::string path,
                      GroupingKeyPath(options.job, options.grouping));
  return std::unique_ptr<Gateway>(
      new Gateway(std::move(options), std::move(path)));
}

Gateway::Gateway(GatewayOptions options, std::string path)
    : options_(std::move(options)), path_(std::move(path)) {}

void Gateway::RegisterCollectable(
    const std::weak_ptr<Collectable>& collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& c : collectables_) {
    if (!c.owner_before(collectable) && !collectable.owner_before(c)) return;
  }
  collectables_.push_back(collectable);
}

std::string Gateway::Render() const {
  std::vector<std::shared_ptr<Collectable>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : collectables_) {
      if (auto p = c.lock()) live.push_back(std::move(p));
    }
  }
  std::vector<MetricFamilySnapshot> all;
  for (const auto& c : live) {
    for (auto& f : c->Collect()) all.push_back(std::move(f));
  }
  return SerializeText(MergeFamilies(std::move(all)));
}

Status Gateway::Push() { return Send("PUT", Render()); }
Status Gateway::PushAdd() { return Send("POST", Render()); }
Status Gateway::Delete() { return Send("DELETE", ""); }

Status Gateway::Send(const std::string& method, std::string body) {
  internal::HttpRequest request;
  request.method = method;
  request.host = options_.host;
  request.port = options_.port;
  request.target = path_;
  request.timeout_ms = options_.timeout_ms;
  if (method != "DELETE") {
    request.headers.emplace_back("Content-Type", std::string(kTextContentType));
  }
  request.body = std::move(body);
  std::string what = method + " " + options_.host + ":" +
                     std::to_string(options_.port) + path_;
  HY_ASSIGN_OR_RETURN(internal::HttpResponse response,
                      internal::SendHttpRequest(request));
  if (response.status >= 200 && response.status < 300) return Status::OK();
  std::string message = "Pushgateway answered " +
                        std::to_string(response.status) + " to " + what +
                        (response.body.empty() ? "" : ": " + response.body);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (response.status >= 400 && response.status < 500) {
    return Status::InvalidArgument(message);
  }
  return Status::Unavailable(message);
}

}  // namespace hy::metrics
