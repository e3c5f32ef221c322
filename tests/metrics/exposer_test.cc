// The HTTP exporter, over real loopback HTTP.

#include "hy/metrics/exposer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "http_client.h"
#include "http_util.h"
#include "hy/metrics/text_format.h"
#include "servers.h"

namespace hy::metrics {
namespace {

using internal::HttpRequest;
using internal::HttpResponse;

Result<HttpResponse> Request(int port, const std::string& method,
                             const std::string& target,
                             const std::string& accept_encoding = "") {
  HttpRequest r;
  r.method = method;
  r.port = port;
  r.target = target;
  if (!accept_encoding.empty()) {
    r.headers.emplace_back("Accept-Encoding", accept_encoding);
  }
  return internal::SendHttpRequest(r);
}

// The value of the unlabelled sample `name` in exposition `text`, or NaN.
double SampleValue(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  size_t at = text.find(key);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

std::shared_ptr<Registry> SampleRegistry(Counter** counter = nullptr) {
  auto r = std::make_shared<Registry>();
  auto f = BuildCounter().Name("app_events_total").Help("Events.").Register(*r);
  Counter* c = *(*f)->Add({});
  c->Increment(41);
  if (counter != nullptr) *counter = c;
  return r;
}

TEST(ExposerTest, ServesTextFormatOnEphemeralLoopbackPort) {
  auto exposer = Exposer::Start();
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  Exposer& e = **exposer;
  EXPECT_GT(e.port(), 0);
  EXPECT_EQ(e.bind_address(), "127.0.0.1");
  EXPECT_EQ(e.url(),
            "http://127.0.0.1:" + std::to_string(e.port()) + "/metrics");
  Counter* c = nullptr;
  auto registry = SampleRegistry(&c);
  e.RegisterCollectable(registry);
  c->Increment();

  auto response = Request(e.port(), "GET", "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->Header("Content-Type"), kTextContentType);
  EXPECT_EQ(response->Header("Content-Length"),
            std::to_string(response->body.size()));
  EXPECT_EQ(response->Header("Content-Encoding"), "");
  const std::string& body = response->body;
  EXPECT_EQ(body.rfind("# HELP app_events_total Events.\n"
                       "# TYPE app_events_total counter\n"
                       "app_events_total 42\n",
                       0),
            0u)
      << body;
  EXPECT_NE(body.find("\nhy_exporter_scrapes_total 1\n"), std::string::npos)
      << body;
  EXPECT_NE(body.find("# TYPE hy_exporter_scrape_duration_seconds histogram"),
            std::string::npos);
  EXPECT_EQ(body.back(), '\n');
}

TEST(ExposerTest, CountsItsOwnScrapes) {
  auto e = Exposer::Start();
  ASSERT_TRUE(e.ok());
  double sent = 0;  // Identity encoding: the bodies are what was sent.
  for (int i = 1; i <= 3; ++i) {
    auto r = Request((*e)->port(), "GET", "/metrics");
    ASSERT_TRUE(r.ok());
    // A scrape is counted before its body is rendered: it sees itself.
    EXPECT_NE(
        r->body.find("\nhy_exporter_scrapes_total " + std::to_string(i) + "\n"),
        std::string::npos);
    sent += static_cast<double>(r->body.size());
  }
  EXPECT_EQ((*e)->scrapes(), 3u);

  // A scrape's duration and bytes are recorded once its response has been
  // sent, so a client can have the whole response (and start the next
  // scrape, on another request thread) before they are: wait, bounded, for
  // the exporter to finish recording. Render() does not count a scrape.
  std::string text;
  bool recorded = testing::WaitUntil(
      [&] {
        text = (*e)->Render();
        return SampleValue(text, "hy_exporter_scrape_duration_seconds_count") ==
                   3 &&
               SampleValue(text, "hy_exporter_transferred_bytes_total") == sent;
      },
      10000);
  EXPECT_TRUE(recorded) << text;
  EXPECT_EQ((*e)->scrapes(), 3u);

  // The next scrape shows exactly the recorded durations and bytes.
  auto r = Request((*e)->port(), "GET", "/metrics");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(SampleValue(r->body, "hy_exporter_scrapes_total"), 4) << r->body;
  EXPECT_EQ(SampleValue(r->body, "hy_exporter_scrape_duration_seconds_count"),
            3)
      << r->body;
  EXPECT_EQ(SampleValue(r->body, "hy_exporter_transferred_bytes_total"), sent)
      << r->body;
  // Render() shows the same text without counting a scrape.
  EXPECT_EQ(SampleValue((*e)->Render(), "hy_exporter_scrapes_total"), 4);
  EXPECT_EQ((*e)->scrapes(), 4u);
}

TEST(ExposerTest, GzipWhenTheClientAsks) {
  auto e = Exposer::Start();
  ASSERT_TRUE(e.ok());
  auto registry = SampleRegistry();  // Held weakly: keep it alive.
  (*e)->RegisterCollectable(registry);
  auto zipped = Request((*e)->port(), "GET", "/metrics", "gzip, deflate");
  ASSERT_TRUE(zipped.ok());
  EXPECT_EQ(zipped->status, 200);
  EXPECT_EQ(zipped->Header("Content-Encoding"), "gzip");
  EXPECT_EQ(zipped->Header("Vary"), "Accept-Encoding");
  EXPECT_EQ(zipped->Header("Content-Type"), kTextContentType);
  auto text = internal::GzipDecompress(zipped->body);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->rfind("# HELP app_events_total Events.\n", 0), 0u);
  EXPECT_NE(text->find("\nhy_exporter_scrapes_total 1\n"), std::string::npos);

  auto refused = Request((*e)->port(), "GET", "/metrics", "gzip;q=0");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->Header("Content-Encoding"), "");
  EXPECT_EQ(refused->body.rfind("# HELP app_events_total", 0), 0u);
}

TEST(ExposerTest, GzipCanBeDisabled) {
  ExposerOptions o;
  o.enable_gzip = false;
  auto e = Exposer::Start(o);
  ASSERT_TRUE(e.ok());
  auto r = Request((*e)->port(), "GET", "/metrics", "gzip");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Header("Content-Encoding"), "");
  EXPECT_NE(r->body.find("hy_exporter_scrapes_total 1"), std::string::npos);
}

TEST(ExposerTest, HeadMethodsAndPaths) {
  auto e = Exposer::Start();
  ASSERT_TRUE(e.ok());
  int port = (*e)->port();
  auto head = Request(port, "HEAD", "/metrics");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_NE(head->Header("Content-Length"), "");

  for (const char* method : {"POST", "PUT", "DELETE"}) {
    auto r = Request(port, method, "/metrics");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 405) << method;
    EXPECT_EQ(r->Header("Allow"), "GET, HEAD");
  }
  for (const char* path :
       {"/", "/metricsx", "/metrics/x", "/index.html", "/../etc/passwd"}) {
    auto r = Request(port, "GET", path);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 404) << path;
  }
  EXPECT_EQ((*e)->scrapes(), 1u);  // Only the HEAD counted.
}

TEST(ExposerTest, CustomPathAndLoopbackAddresses) {
  ExposerOptions o;
  o.path = "/hy/metrics";
  o.bind_address = "127.0.0.2";
  auto e = Exposer::Start(o);
  ASSERT_TRUE(e.ok()) << e.status();
  HttpRequest r;
  r.host = "127.0.0.2";
  r.port = (*e)->port();
  r.target = "/hy/metrics";
  auto response = internal::SendHttpRequest(r);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);

  ExposerOptions local;
  local.bind_address = "localhost";
  auto l = Exposer::Start(local);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Request((*l)->port(), "GET", "/metrics")->status, 200);
}

TEST(ExposerTest, RefusesBadOptions) {
  auto refused = [](ExposerOptions o) {
    return Exposer::Start(o).status().IsInvalidArgument();
  };
  ExposerOptions o;
  o.bind_address = "0.0.0.0";  // Not loopback, no opt-in.
  EXPECT_TRUE(refused(o));
  o.bind_address = "10.1.2.3";
  EXPECT_TRUE(refused(o));
  o.bind_address = "example.com";
  o.allow_non_loopback = true;
  EXPECT_TRUE(refused(o));  // Not an address.
  o = {};
  o.port = 70000;
  EXPECT_TRUE(refused(o));
  o = {};
  o.port = -1;
  EXPECT_TRUE(refused(o));
  for (const char* path : {"", "metrics", "/a*b", "/a$", "/a?b", "/a b"}) {
    o = {};
    o.path = path;
    EXPECT_TRUE(refused(o)) << path;
  }
  o = {};
  o.num_threads = 0;
  EXPECT_TRUE(refused(o));
}

TEST(ExposerTest, PortInUseIsUnavailable) {
  auto first = Exposer::Start();
  ASSERT_TRUE(first.ok());
  ExposerOptions o;
  o.port = (*first)->port();
  Status s = Exposer::Start(o).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
}

TEST(ExposerTest, CollectablesAreHeldWeaklyAndMerged) {
  auto e = Exposer::Start();
  ASSERT_TRUE(e.ok());
  auto a = SampleRegistry();
  auto b = SampleRegistry();  // Same family, same (empty) label set.
  auto c = std::make_shared<Registry>();
  ASSERT_TRUE(BuildGauge()
                  .Name("app_events_total_other")
                  .Help("Other.")
                  .Register(*c)
                  .ok());
  (*e)->RegisterCollectable(a);
  (*e)->RegisterCollectable(a);  // Twice: no effect.
  (*e)->RegisterCollectable(b);
  (*e)->RegisterCollectable(c);
  std::string text = (*e)->Render();
  EXPECT_EQ(text.find("# TYPE app_events_total counter"),
            text.rfind("# TYPE app_events_total counter"));  // One group.
  EXPECT_NE(text.find("# TYPE app_events_total_other gauge"),
            std::string::npos);

  a.reset();
  b.reset();
  text = (*e)->Render();
  EXPECT_EQ(text.find("app_events_total "), std::string::npos);
  (*e)->RemoveCollectable(c);
  text = (*e)->Render();
  EXPECT_EQ(text.find("app_events_total_other"), std::string::npos);
  EXPECT_NE(text.find("hy_exporter_scrapes_total"), std::string::npos);
}

TEST(ExposerTest, ConcurrentScrapesWhileUpdating) {
  ExposerOptions o;
  o.num_threads = 4;
  auto e = Exposer::Start(o);
  ASSERT_TRUE(e.ok());
  Counter* c = nullptr;
  auto registry = SampleRegistry(&c);
  (*e)->RegisterCollectable(registry);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) c->Increment();
  });
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        auto r = Request((*e)->port(), "GET", "/metrics", "gzip");
        if (r.ok() && r->status == 200 &&
            internal::GzipDecompress(r->body).ok()) {
          ++ok;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  stop = true;
  writer.join();
  EXPECT_EQ(ok.load(), 100);
  EXPECT_EQ((*e)->scrapes(), 100u);
}

TEST(ExposerTest, StopsWhenDestroyed) {
  int port = 0;
  {
    auto e = Exposer::Start();
    ASSERT_TRUE(e.ok());
    port = (*e)->port();
    ASSERT_TRUE(Request(port, "GET", "/metrics").ok());
  }
  EXPECT_EQ(Request(port, "GET", "/metrics").status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hy::metrics
