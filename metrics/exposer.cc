#include "hy/metrics/exposer.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "http_client.h"
#include "http_util.h"
#include "hy/metrics/text_format.h"

namespace hy::metrics {
namespace {

// civetweb reports start-up errors (cannot bind, bad option) through the
// log callback, on the thread that calls mg_start.
thread_local std::string* start_error = nullptr;

int LogMessage(const mg_connection*, const char* message) {
  if (start_error != nullptr && start_error->empty()) *start_error = message;
  return 1;  // Handled: civetweb prints nothing itself.
}

bool SameOwner(const std::weak_ptr<Collectable>& a,
               const std::weak_ptr<Collectable>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

void SendPlain(mg_connection* conn, int status, const char* extra_header,
               const char* extra_value, std::string_view body) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
  std::string length = std::to_string(body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  if (extra_header != nullptr) {
    mg_response_header_add(conn, extra_header, extra_value, -1);
  }
  mg_response_header_send(conn);
  mg_write(conn, body.data(), body.size());
}

// Opens and closes one TCP connection to host:port, ignoring failures.
void Poke(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
}

}  // namespace

Result<ExporterMetrics> RegisterExporterMetrics(Registry& registry) {
  ExporterMetrics m;
  HY_ASSIGN_OR_RETURN(
      auto* scrapes,
      BuildCounter()
          .Name("hy_exporter_scrapes_total")
          .Help("Scrapes of the metrics endpoint served by this process.")
          .Register(registry));
  HY_ASSIGN_OR_RETURN(m.scrapes, scrapes->Add({}));
  HY_ASSIGN_OR_RETURN(
      auto* duration,
      BuildHistogram()
          .Name("hy_exporter_scrape_duration_seconds")
          .Help("Time to collect, encode and send one scrape of the metrics "
                "endpoint.")
          .Buckets({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                    0.05, 0.1, 0.25, 0.5, 1})
          .Register(registry));
  HY_ASSIGN_OR_RETURN(m.scrape_duration, duration->Add({}));
  HY_ASSIGN_OR_RETURN(
      auto* bytes,
      BuildCounter()
          .Name("hy_exporter_transferred_bytes_total")
          .Help("Response body bytes sent by the metrics endpoint, after "
                "compression.")
          .Register(registry));
  HY_ASSIGN_OR_RETURN(m.transferred_bytes, bytes->Add({}));
  return m;
}

Exposer::Exposer(ExposerOptions options)
    : options_(std::move(options)),
      self_registry_(std::make_shared<Registry>()) {}

Result<std::unique_ptr<Exposer>> Exposer::Start(ExposerOptions options) {
  const std::string& addr = options.bind_address;
  if (!internal::IsIpv4Address(addr) && addr != "localhost") {
    return Status::InvalidArgument("bind address \"" + addr +
                                   "\" is not an IPv4 address or localhost");
  }
  if (!internal::IsLoopbackAddress(addr) && !options.allow_non_loopback) {
    return Status::InvalidArgument(
        "bind address \"" + addr +
        "\" is not loopback; set allow_non_loopback to expose metrics there");
  }
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(options.port) +
                                   " is outside [0, 65535]");
  }
  if (options.path.empty() || options.path[0] != '/' ||
      options.path.find_first_of("*?|$ \r\n") != std::string::npos) {
    return Status::InvalidArgument("metrics path \"" + options.path +
                                   "\" must start with '/' and contain no "
                                   "'*', '?', '|', '$' or whitespace");
  }
  if (options.num_threads < 1 || options.request_timeout_ms < 1) {
    return Status::InvalidArgument(
        "num_threads and request_timeout_ms must be >= 1");
  }

  std::unique_ptr<Exposer> exposer(new Exposer(std::move(options)));
  HY_ASSIGN_OR_RETURN(exposer->self_,
                      RegisterExporterMetrics(*exposer->self_registry_));

  const ExposerOptions& o = exposer->options_;
  std::string host =
      o.bind_address == "localhost" ? "127.0.0.1" : o.bind_address;
  std::string ports = host + ":" + std::to_string(o.port);
  std::string threads = std::to_string(o.num_threads);
  std::string timeout = std::to_string(o.request_timeout_ms);
  const char* civet_options[] = {"listening_ports",
                                 ports.c_str(),
                                 "num_threads",
                                 threads.c_str(),
                                 "request_timeout_ms",
                                 timeout.c_str(),
                                 "enable_keep_alive",
                                 "yes",
                                 nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = &LogMessage;

  internal::EnsureCivetwebInitialized();
  std::string error;
  start_error = &error;
  exposer->ctx_ = mg_start(&callbacks, exposer.get(), civet_options);
  start_error = nullptr;
  if (exposer->ctx_ == nullptr) {
    return Status::Unavailable("cannot serve metrics on " + ports + ": " +
                               (error.empty() ? "civetweb failed" : error));
  }
  // One handler for every path: it answers the metrics path and 404s the
  // rest, so civetweb never falls back to serving files.
  mg_set_request_handler(exposer->ctx_, "/", &Exposer::HandleRequest,
                         exposer.get());
  mg_server_port bound[4];
  int n = mg_get_server_ports(exposer->ctx_, 4, bound);
  if (n < 1 || bound[0].port <= 0) {
    return Status::Internal("civetweb reports no listening port");
  }
  exposer->port_ = bound[0].port;
  return exposer;
}

Exposer::~Exposer() {
  if (ctx_ == nullptr) return;
  // civetweb's listener polls in 2 s quanta and only then sees the stop
  // flag; a connection wakes it at once. Bounded: at most 100 pokes.
  std::string host =
      options_.bind_address == "localhost" || options_.bind_address == "0.0.0.0"
          ? "127.0.0.1"
          : options_.bind_address;
  std::atomic<bool> stopped{false};
  std::thread waker([&] {
    for (int i = 0; i < 100 && !stopped.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!stopped.load()) Poke(host, port_);
    }
  });
  mg_stop(ctx_);
  stopped = true;
  waker.join();
}

void Exposer::RegisterCollectable(
    const std::weak_ptr<Collectable>& collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& c : collectables_) {
    if (SameOwner(c, collectable)) return;
  }
  collectables_.push_back(collectable);
}

void Exposer::RemoveCollectable(const std::weak_ptr<Collectable>& collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  collectables_.erase(std::remove_if(collectables_.begin(), collectables_.end(),
                                     [&](const std::weak_ptr<Collectable>& c) {
                                       return SameOwner(c, collectable);
                                     }),
                      collectables_.end());
}

std::string Exposer::url() const {
  return "http://" + options_.bind_address + ":" + std::to_string(port_) +
         options_.path;
}

uint64_t Exposer::scrapes() const {
  return static_cast<uint64_t>(self_.scrapes->Value());
}

std::vector<std::shared_ptr<Collectable>> Exposer::LiveCollectables() const {
  std::vector<std::shared_ptr<Collectable>> live;
  std::lock_guard<std::mutex> lock(mu_);
  auto expired = [](const std::weak_ptr<Collectable>& c) {
    return c.expired();
  };
  collectables_.erase(
      std::remove_if(collectables_.begin(), collectables_.end(), expired),
      collectables_.end());
  for (const auto& c : collectables_) {
    if (auto p = c.lock()) live.push_back(std::move(p));
  }
  return live;
}

std::string Exposer::Render() const {
  std::vector<MetricFamilySnapshot> all;
  for (const auto& c : LiveCollectables()) {
    for (auto& f : c->Collect()) all.push_back(std::move(f));
  }
  for (auto& f : self_registry_->Collect()) all.push_back(std::move(f));
  return SerializeText(MergeFamilies(std::move(all)));
}

int Exposer::HandleRequest(mg_connection* conn, void* self) {
  return static_cast<Exposer*>(self)->Serve(conn);
}

int Exposer::Serve(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  std::string_view uri = info->local_uri ? info->local_uri : "";
  if (uri != options_.path) {
    SendPlain(conn, 404, nullptr, nullptr,
              "not found; metrics are at " + options_.path + "\n");
    return 404;
  }
  std::string_view method = info->request_method ? info->request_method : "";
  if (method != "GET" && method != "HEAD") {
    SendPlain(conn, 405, "Allow", "GET, HEAD", "use GET or HEAD\n");
    return 405;
  }
  auto start = std::chrono::steady_clock::now();
  self_.scrapes->Increment();
  std::string body = Render();
  const char* accept = mg_get_header(conn, "Accept-Encoding");
  bool gzip = false;
  if (options_.enable_gzip && accept != nullptr &&
      internal::AcceptsGzip(accept)) {
    Result<std::string> packed = internal::GzipCompress(body);
    if (packed.ok()) {
      body = std::move(*packed);
      gzip = true;
    }
  }
  mg_response_header_start(conn, 200);
  mg_response_header_add(conn, "Content-Type",
                         std::string(kTextContentType).c_str(), -1);
  std::string length = std::to_string(body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  if (gzip) mg_response_header_add(conn, "Content-Encoding", "gzip", -1);
  if (options_.enable_gzip) {
    mg_response_header_add(conn, "Vary", "Accept-Encoding", -1);
  }
  mg_response_header_send(conn);
  // Bytes and duration are recorded after the body is sent: the duration
  // covers sending, and only bytes that reached the connection count. So
  // the client may hold the whole response before they are recorded, and a
  // scrape never includes its own duration or bytes (exposer.h).
  if (method == "GET") {
    int written = mg_write(conn, body.data(), body.size());
    if (written > 0) {
      self_.transferred_bytes->Increment(static_cast<double>(written));
    }
  }
  self_.scrape_duration->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  return 200;
}

}  // namespace hy::metrics
