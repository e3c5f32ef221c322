// Internal to hy_metrics: small HTTP helpers shared by the Exposer and the
// Gateway (content negotiation, URL path encoding, gzip, address checks).
//
// Thread-safety: free functions without state; safe from any thread.

#ifndef HY_METRICS_HTTP_UTIL_H_
#define HY_METRICS_HTTP_UTIL_H_

#include <string>
#include <string_view>

#include "hy/common/result.h"

namespace hy::metrics::internal {

// Returns true if an Accept-Encoding header value admits gzip: a "gzip",
// "x-gzip" or "*" coding whose q-value is not 0 (and gzip is not itself
// refused with q=0 when "*" is what admits it). Case-insensitive.
bool AcceptsGzip(std::string_view accept_encoding);

// Percent-encodes every byte except RFC 3986's unreserved characters
// (A-Z a-z 0-9 - . _ ~), for use as one URL path segment.
std::string PercentEncode(std::string_view s);

// Base64 with the URL- and filename-safe alphabet (RFC 4648 section 5), with
// '=' padding.
std::string Base64UrlEncode(std::string_view s);

// Returns `data` as one gzip member (RFC 1952), or kInternal if zlib fails.
Result<std::string> GzipCompress(std::string_view data);

// Inflates gzip data. Returns kDataLoss if it is not valid gzip.
Result<std::string> GzipDecompress(std::string_view data);

// True for "localhost" and IPv4 addresses in 127.0.0.0/8 (dotted quad).
bool IsLoopbackAddress(std::string_view address);

// True for a dotted-quad IPv4 address ("0.0.0.0" included).
bool IsIpv4Address(std::string_view address);

}  // namespace hy::metrics::internal

#endif  // HY_METRICS_HTTP_UTIL_H_
