// Test support: a blocking HTTP GET on libcurl (which prometheus-cpp's push
// library already brings in), for talking to Prometheus, the Pushgateway
// and hy's exporters in tests.
//
// Thread-safety: HttpGet may be called from many threads at once; each call
// uses its own curl handle.

#ifndef HY_TESTS_METRICS_HTTP_GET_H_
#define HY_TESTS_METRICS_HTTP_GET_H_

#include <string>
#include <string_view>

#include "hy/common/result.h"

namespace hy::metrics::testing {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;  // Decoded if the server compressed it.
};

// GET http://<host>:<port><target> (target already encoded). A response
// with any status is a success; returns Unavailable if the server cannot
// be reached or does not answer within timeout_ms.
Result<HttpResponse> HttpGet(const std::string& host, int port,
                             const std::string& target, int timeout_ms);

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string PercentEncode(std::string_view s);

}  // namespace hy::metrics::testing

#endif  // HY_TESTS_METRICS_HTTP_GET_H_
