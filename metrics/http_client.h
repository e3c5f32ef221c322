// Internal to hy_metrics (tests reach in on purpose): a minimal blocking
// HTTP/1.1 client on civetweb's client API, one request per connection, for
// the Pushgateway client and for talking to Prometheus in tests.
//
// Thread-safety: SendHttpRequest may be called from many threads at once;
// each call uses its own connection.

#ifndef HY_METRICS_HTTP_CLIENT_H_
#define HY_METRICS_HTTP_CLIENT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hy/common/result.h"

namespace hy::metrics::internal {

struct HttpRequest {
  std::string method = "GET";
  std::string host = "127.0.0.1";
  int port = 0;
  std::string target = "/";  // Path and query, already encoded.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // Sent with a Content-Length unless method is GET/HEAD
                     // and the body is empty.
  int timeout_ms = 10000;  // For the response headers to arrive.
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // Returns the first header of that name (case-insensitive), or "".
  std::string_view Header(std::string_view name) const;
};

// Calls mg_init_library once per process (thread-safe).
void EnsureCivetwebInitialized();

// Sends `request` and reads the whole response. Returns kInvalidArgument for
// a malformed request (no port, CR/LF in a header or target), kUnavailable if
// the server cannot be reached or does not answer within timeout_ms, and
// kIOError if the connection breaks mid-response. A response with any status
// code is a success: the caller judges the status.
Result<HttpResponse> SendHttpRequest(const HttpRequest& request);

}  // namespace hy::metrics::internal

#endif  // HY_METRICS_HTTP_CLIENT_H_
