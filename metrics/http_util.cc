#include "http_util.h"

#include <zlib.h>

#include <cctype>
#include <cstdlib>
#include <vector>

namespace hy::metrics::internal {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Parses "coding;q=0.5" into the lower-cased coding and its q-value (1 if
// absent, 0 if malformed, so a garbled entry never enables anything).
void ParseCoding(std::string_view item, std::string* coding, double* q) {
  size_t semi = item.find(';');
  *coding = Lower(Trim(item.substr(0, semi)));
  *q = 1.0;
  while (semi != std::string_view::npos) {
    std::string_view rest = item.substr(semi + 1);
    size_t next = rest.find(';');
    std::string param = Lower(Trim(rest.substr(0, next)));
    if (param.size() >= 2 && param[0] == 'q' && param[1] == '=') {
      std::string value = param.substr(2);
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      *q =
          (end != nullptr && *end == '\0' && !value.empty() && v >= 0 && v <= 1)
              ? v
              : 0.0;
    }
    semi = next == std::string_view::npos ? next : semi + 1 + next;
  }
}

}  // namespace

bool AcceptsGzip(std::string_view accept_encoding) {
  double gzip_q = -1;  // -1: not mentioned.
  double star_q = -1;
  while (!accept_encoding.empty()) {
    size_t comma = accept_encoding.find(',');
    std::string_view item = accept_encoding.substr(0, comma);
    accept_encoding = comma == std::string_view::npos
                          ? std::string_view()
                          : accept_encoding.substr(comma + 1);
    std::string coding;
    double q;
    ParseCoding(item, &coding, &q);
    if (coding == "gzip" || coding == "x-gzip") {
      gzip_q = std::max(gzip_q, q);
    } else if (coding == "*") {
      star_q = std::max(star_q, q);
    }
  }
  if (gzip_q >= 0) return gzip_q > 0;
  return star_q > 0;
}

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string Base64UrlEncode(std::string_view s) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  auto byte = [&](size_t k) {
    return static_cast<uint32_t>(static_cast<unsigned char>(s[k]));
  };
  for (; i + 3 <= s.size(); i += 3) {
    uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) {
      out += kAlphabet[(v >> shift) & 63];
    }
  }
  size_t rest = s.size() - i;
  if (rest == 1) {
    uint32_t v = byte(i) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

Result<std::string> GzipCompress(std::string_view data) {
  z_stream zs{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return Status::Internal("deflateInit2 failed");
  }
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  size_t written = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return Status::Internal("deflate did not finish: " + std::to_string(rc));
  }
  out.resize(written);
  return out;
}

Result<std::string> GzipDecompress(std::string_view data) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {
    return Status::Internal("inflateInit2 failed");
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  std::vector<char> buf(64 * 1024);
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - zs.avail_out);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;
  }
  bool complete = rc == Z_STREAM_END && zs.avail_in == 0;
  inflateEnd(&zs);
  if (!complete) return Status::DataLoss("not a complete gzip stream");
  return out;
}

bool IsIpv4Address(std::string_view address) {
  int parts = 0;
  while (true) {
    size_t dot = address.find('.');
    std::string_view part = address.substr(0, dot);
    if (part.empty() || part.size() > 3) return false;
    int v = 0;
    for (char c : part) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    if (v > 255) return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    address.remove_prefix(dot + 1);
  }
  return parts == 4;
}

bool IsLoopbackAddress(std::string_view address) {
  if (address == "localhost") return true;
  return IsIpv4Address(address) && address.substr(0, 4) == "127.";
}

}  // namespace hy::metrics::internal
