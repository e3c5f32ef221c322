// Exposer: serves the metrics of registered Collectables over HTTP at
// /metrics (civetweb), for Prometheus to scrape. Modelled on prometheus-cpp's
// Exposer.
//
//   HY_ASSIGN_OR_RETURN(auto exposer, hy::metrics::Exposer::Start({}));
//   exposer->RegisterCollectable(registry);   // a shared_ptr<Registry>
//   LOG << "metrics on " << exposer->url();   // port 0 -> ephemeral port
//
// It binds to 127.0.0.1 unless told otherwise: a non-loopback address needs
// ExposerOptions::allow_non_loopback as well, so exposing metrics to the
// network is always an explicit choice. GET and HEAD are answered (405
// otherwise); other paths give 404. The body is gzip-compressed when the
// client's Accept-Encoding admits gzip (Prometheus's does) and
// enable_gzip is set. The Exposer counts its own work in
// hy_exporter_scrapes_total, hy_exporter_scrape_duration_seconds and
// hy_exporter_transferred_bytes_total, which every scrape includes. A scrape
// is counted in hy_exporter_scrapes_total before its body is rendered (it
// sees itself); its duration (collect, encode and send) and the bytes sent
// are recorded only after the response has been written, so they show from
// a later scrape, and the client may already hold the complete response a
// moment before they are recorded: a scrape that follows it at once, on
// another request thread, can still miss them.
//
// Ownership: the Exposer owns the server and its threads; it holds
// Collectables weakly (an expired one is skipped and forgotten). Destroying
// the Exposer stops the server and waits for in-flight requests.
//
// Thread-safety: all methods may be called from any thread, also while
// scrapes are being served.

#ifndef HY_METRICS_EXPOSER_H_
#define HY_METRICS_EXPOSER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/metrics/collectable.h"
#include "hy/metrics/registry.h"

struct mg_connection;
struct mg_context;

namespace hy::metrics {

struct ExposerOptions {
  // IPv4 address or "localhost". Loopback (127.0.0.0/8) by default.
  std::string bind_address = "127.0.0.1";
  // Required to bind to anything but loopback (e.g. "0.0.0.0").
  bool allow_non_loopback = false;
  // 0 picks a free ephemeral port; Exposer::port() reports it.
  int port = 0;
  // Where metrics are served: starts with '/', no civetweb pattern
  // characters (* ? | $).
  std::string path = "/metrics";
  int num_threads = 2;  // Request threads; >= 1.
  bool enable_gzip = true;
  int request_timeout_ms = 10000;  // Per request, >= 1.
};

// The Exposer's own metrics. Registered on the Exposer's internal registry;
// RegisterExporterMetrics also lets tools (hyctl metrics) list them.
struct ExporterMetrics {
  Counter* scrapes = nullptr;            // hy_exporter_scrapes_total
  Histogram* scrape_duration = nullptr;  // hy_exporter_scrape_duration_seconds
  Counter* transferred_bytes = nullptr;  // hy_exporter_transferred_bytes_total
};

// Registers the three exporter families on `registry` (idempotent).
// Returns the Registry's error if a different family holds a name.
Result<ExporterMetrics> RegisterExporterMetrics(Registry& registry);

class Exposer {
 public:
  // Validates `options`, starts the server and returns it listening.
  // Returns kInvalidArgument for bad options (a non-loopback address without
  // allow_non_loopback, a port outside [0, 65535], a bad path), and
  // kUnavailable if the address cannot be bound (e.g. port in use).
  static Result<std::unique_ptr<Exposer>> Start(ExposerOptions options = {});

  ~Exposer();
  Exposer(const Exposer&) = delete;
  Exposer& operator=(const Exposer&) = delete;

  // Adds a source of metrics. Registering the same one twice has no effect.
  void RegisterCollectable(const std::weak_ptr<Collectable>& collectable);
  // Stops serving a source; unknown ones are ignored.
  void RemoveCollectable(const std::weak_ptr<Collectable>& collectable);

  // The port actually bound (never 0 once started).
  int port() const { return port_; }
  const std::string& bind_address() const { return options_.bind_address; }
  // "http://<bind_address>:<port><path>".
  std::string url() const;
  // Number of scrapes served so far (GET/HEAD of path).
  uint64_t scrapes() const;

  // The body a scrape would get right now (without counting a scrape).
  std::string Render() const;

 private:
  explicit Exposer(ExposerOptions options);
  static int HandleRequest(mg_connection* conn, void* self);
  int Serve(mg_connection* conn);
  std::vector<std::shared_ptr<Collectable>> LiveCollectables() const;

  const ExposerOptions options_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
  std::shared_ptr<Registry> self_registry_;
  ExporterMetrics self_;
  mutable std::mutex mu_;
  // Guarded by mu_.
  mutable std::vector<std::weak_ptr<Collectable>> collectables_;
};

}  // namespace hy::metrics

#endif  // HY_METRICS_EXPOSER_H_
