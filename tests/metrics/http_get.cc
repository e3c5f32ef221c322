#include "http_get.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdio>
#include <mutex>

namespace hy::metrics::testing {
namespace {

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

}  // namespace

Result<HttpResponse> HttpGet(const std::string& host, int port,
                             const std::string& target, int timeout_ms) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_ALL); });
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Status::Internal("curl_easy_init failed");
  const std::string url =
      "http://" + host + ":" + std::to_string(port) + target;
  HttpResponse r;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");  // Any it decodes.
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) {
    curl_easy_cleanup(curl);
    return Status::Unavailable("GET " + url + ": " + curl_easy_strerror(code));
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  char* type = nullptr;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
  r.status = static_cast<int>(status);
  if (type != nullptr) r.content_type = type;
  curl_easy_cleanup(curl);
  return r;
}

std::string PercentEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace hy::metrics::testing
