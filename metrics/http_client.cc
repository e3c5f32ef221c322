#include "http_client.h"

#include <civetweb.h>
#include <strings.h>

#include <mutex>

namespace hy::metrics::internal {
namespace {

bool HasCrLf(std::string_view s) {
  return s.find('\r') != std::string_view::npos ||
         s.find('\n') != std::string_view::npos;
}

}  // namespace

std::string_view HttpResponse::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() &&
        strncasecmp(key.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return {};
}

void EnsureCivetwebInitialized() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

Result<HttpResponse> SendHttpRequest(const HttpRequest& request) {
  if (request.port <= 0 || request.port > 65535) {
    return Status::InvalidArgument("HTTP request without a valid port");
  }
  if (request.target.empty() || request.target[0] != '/' ||
      HasCrLf(request.target) || HasCrLf(request.method) ||
      HasCrLf(request.host)) {
    return Status::InvalidArgument("malformed HTTP request line");
  }
  std::string head = request.method + " " + request.target + " HTTP/1.1\r\n";
  head += "Host: " + request.host + ":" + std::to_string(request.port) +
          "\r\nConnection: close\r\n";
  for (const auto& [key, value] : request.headers) {
    if (HasCrLf(key) || HasCrLf(value) || key.empty()) {
      return Status::InvalidArgument("malformed HTTP header \"" + key + "\"");
    }
    head += key + ": " + value + "\r\n";
  }
  bool bodiless = request.method == "GET" || request.method == "HEAD";
  if (!bodiless || !request.body.empty()) {
    head += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  head += "\r\n";

  EnsureCivetwebInitialized();
  char error[256] = "";
  std::string where =
      request.host + ":" + std::to_string(request.port) + request.target;
  mg_connection* conn = mg_connect_client(request.host.c_str(), request.port,
                                          /*use_ssl=*/0, error, sizeof(error));
  if (conn == nullptr) {
    return Status::Unavailable("cannot connect to " + where + ": " + error);
  }
  struct Closer {
    mg_connection* c;
    ~Closer() { mg_close_connection(c); }
  } closer{conn};

  if (mg_write(conn, head.data(), head.size()) !=
          static_cast<int>(head.size()) ||
      (!request.body.empty() &&
       mg_write(conn, request.body.data(), request.body.size()) !=
           static_cast<int>(request.body.size()))) {
    return Status::IOError("cannot send the request to " + where);
  }
  if (mg_get_response(conn, error, sizeof(error), request.timeout_ms) < 0) {
    return Status::Unavailable("no response from " + where + " within " +
                               std::to_string(request.timeout_ms) +
                               " ms: " + error);
  }
  const mg_response_info* info = mg_get_response_info(conn);
  HttpResponse response;
  response.status = info->status_code;
  for (int i = 0; i < info->num_headers; ++i) {
    response.headers.emplace_back(info->http_headers[i].name,
                                  info->http_headers[i].value);
  }
  if (request.method != "HEAD") {
    char buf[16384];
    while (true) {
      int n = mg_read(conn, buf, sizeof(buf));
      if (n < 0) {
        return Status::IOError("connection to " + where +
                               " broke while reading the response");
      }
      if (n == 0) break;
      response.body.append(buf, static_cast<size_t>(n));
    }
  }
  return response;
}

}  // namespace hy::metrics::internal
