// The Pushgateway client: grouping-key paths, and pushes to a real
// prometheus-pushgateway.

#include "hy/metrics/gateway.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "hy/metrics/registry.h"
#include "servers.h"

namespace hy::metrics {
namespace {

using testing::FindExecutable;
using testing::MissingBinaryMessage;
using testing::PushgatewayServer;
using testing::TempDir;

TEST(GroupingKeyPathTest, EncodesValues) {
  EXPECT_EQ(*GroupingKeyPath("hyctl_reshard", {}),
            "/metrics/job/hyctl_reshard");
  EXPECT_EQ(
      *GroupingKeyPath("j", {{"instance", "host-1:9100"}, {"a", "x y&z=1?%"}}),
      "/metrics/job/j/a/x%20y%26z%3D1%3F%25/instance/host-1%3A9100");
  // '/' and empty values only survive in the base64 form.
  EXPECT_EQ(*GroupingKeyPath("j", {{"path", "/var/tmp"}}),
            "/metrics/job/j/path@base64/L3Zhci90bXA=");
  EXPECT_EQ(*GroupingKeyPath("j", {{"empty", ""}}),
            "/metrics/job/j/empty@base64/=");
  EXPECT_EQ(*GroupingKeyPath("a/b", {}), "/metrics/job@base64/YS9i");
  EXPECT_EQ(*GroupingKeyPath("\xC3\xBC", {}), "/metrics/job/%C3%BC");
}

TEST(GroupingKeyPathTest, RefusesInvalidKeys) {
  EXPECT_TRUE(GroupingKeyPath("", {}).status().IsInvalidArgument());
  EXPECT_TRUE(GroupingKeyPath("\xFF", {}).status().IsInvalidArgument());
  EXPECT_TRUE(
      GroupingKeyPath("j", {{"job", "x"}}).status().IsInvalidArgument());
  EXPECT_TRUE(
      GroupingKeyPath("j", {{"1bad", "x"}}).status().IsInvalidArgument());
  EXPECT_TRUE(
      GroupingKeyPath("j", {{"__x", "x"}}).status().IsInvalidArgument());
  EXPECT_TRUE(
      GroupingKeyPath("j", {{"a", "\xC3"}}).status().IsInvalidArgument());
}

TEST(GatewayTest, RefusesBadOptions) {
  GatewayOptions o;
  o.job = "j";
  o.port = 0;
  EXPECT_TRUE(Gateway::Create(o).status().IsInvalidArgument());
  o.port = 9091;
  o.host = "";
  EXPECT_TRUE(Gateway::Create(o).status().IsInvalidArgument());
  o.host = "127.0.0.1";
  o.job = "";
  EXPECT_TRUE(Gateway::Create(o).status().IsInvalidArgument());
}

TEST(GatewayTest, UnreachableGatewayIsUnavailable) {
  // Held for the whole test: connections are refused, and no server of a
  // test running in parallel can take the port meanwhile.
  auto port = testing::ReservedPort::Create();
  ASSERT_TRUE(port.ok()) << port.status();
  GatewayOptions o;
  o.port = (*port)->port();
  o.job = "j";
  auto g = Gateway::Create(o);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->Push().code(), StatusCode::kUnavailable);
}

using Group = std::map<std::string, std::string>;

// Labels of every group the Pushgateway holds, from /api/v1/metrics. An
// error if it cannot be read: an unreadable answer is not "no groups".
Result<std::vector<Group>> Groups(int port) {
  HY_ASSIGN_OR_RETURN(auto r, testing::HttpGet(port, "/api/v1/metrics"));
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (r.status != 200 || j.is_discarded() || !j.contains("data") ||
      !j["data"].is_array()) {
    return Status::DataLoss("/api/v1/metrics answered " +
                            std::to_string(r.status) + ": " + r.body);
  }
  std::vector<Group> out;
  for (const auto& group : j["data"]) {
    out.push_back(group["labels"].get<Group>());
  }
  return out;
}

std::string Describe(const Result<std::vector<Group>>& groups) {
  if (!groups.ok()) return groups.status().ToString();
  std::string out = std::to_string(groups->size()) + " group(s):";
  for (const Group& g : *groups) {
    out += " {";
    for (const auto& [name, value] : g) out += name + "=" + value + ",";
    out += "}";
  }
  return out;
}

class RealPushgatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string binary = FindExecutable("prometheus-pushgateway");
    ASSERT_FALSE(binary.empty()) << MissingBinaryMessage(
        "prometheus-pushgateway", "prometheus-pushgateway");
    auto server = PushgatewayServer::Start(binary, dir_.path());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // The Pushgateway's /metrics; a failed read fails the test (and returns
  // "", which must not pass for "the metric is gone").
  std::string Metrics() {
    auto r = testing::HttpGet(server_->port(), "/metrics");
    if (!r.ok() || r->status != 200) {
      ADD_FAILURE() << "cannot read the Pushgateway's /metrics: "
                    << (r.ok() ? std::to_string(r->status) + " " + r->body
                               : r.status().ToString());
      return "";
    }
    return r->body;
  }

  // The Pushgateway only queues a DELETE: its handler submits the request
  // to the store's write queue and answers 202 Accepted at once, so a read
  // right after Delete() returns can still see the group. Wait, bounded, for
  // the group to go. Returns whether no group is left.
  bool WaitUntilNoGroups() {
    return testing::WaitUntil(
        [&] {
          auto groups = Groups(server_->port());
          return groups.ok() && groups->empty();
        },
        kDeleteDeadlineMs);
  }

  std::unique_ptr<Gateway> MakeGateway(const Labels& grouping) {
    GatewayOptions o;
    o.port = server_->port();
    o.timeout_ms = testing::kHttpTimeoutMs;
    o.job = "hyctl_reshard";
    o.grouping = grouping;
    auto g = Gateway::Create(o);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? std::move(*g) : nullptr;
  }

  static constexpr int kDeleteDeadlineMs = 30000;

  TempDir dir_;
  std::unique_ptr<PushgatewayServer> server_;
};

TEST_F(RealPushgatewayTest, PushPushAddDelete) {
  auto registry = std::make_shared<Registry>();
  auto bytes = BuildCounter()
                   .Name("hy_test_bytes_total")
                   .Help("Bytes.")
                   .LabelNames({"kind"})
                   .Register(*registry);
  auto step =
      BuildGauge().Name("hy_test_step").Help("Step.").Register(*registry);
  ASSERT_TRUE(bytes.ok() && step.ok());
  (*(*bytes)->Add({{"kind", "remote"}}))->Increment(1234);
  (*(*step)->Add({}))->Set(7);

  auto gateway = MakeGateway({{"instance", "node-1"}});
  ASSERT_NE(gateway, nullptr);
  gateway->RegisterCollectable(registry);
  ASSERT_TRUE(gateway->Push().ok()) << server_->LogTail();
  std::string text = Metrics();
  EXPECT_NE(text.find("hy_test_bytes_total{instance=\"node-1\",job=\"hyctl_"
                      "reshard\",kind=\"remote\"} 1234"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hy_test_step{instance=\"node-1\",job=\"hyctl_reshard\"}"
                      " 7"),
            std::string::npos);

  // POST replaces only the families pushed: hy_test_step survives.
  auto only_bytes = std::make_shared<Registry>();
  auto b2 = BuildCounter()
                .Name("hy_test_bytes_total")
                .Help("Bytes.")
                .LabelNames({"kind"})
                .Register(*only_bytes);
  (*(*b2)->Add({{"kind", "local"}}))->Increment(5);
  auto add_gateway = MakeGateway({{"instance", "node-1"}});
  ASSERT_NE(add_gateway, nullptr);
  add_gateway->RegisterCollectable(only_bytes);
  ASSERT_TRUE(add_gateway->PushAdd().ok());
  text = Metrics();
  EXPECT_NE(text.find("kind=\"local\"} 5"), std::string::npos) << text;
  EXPECT_EQ(text.find("kind=\"remote\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("hy_test_step{"), std::string::npos) << text;

  // PUT replaces the whole group: hy_test_step is gone.
  ASSERT_TRUE(add_gateway->Push().ok());
  text = Metrics();
  EXPECT_EQ(text.find("hy_test_step{"), std::string::npos) << text;
  EXPECT_NE(text.find("kind=\"local\"} 5"), std::string::npos);

  // PUT and POST are synchronous (the Pushgateway answers once the push is
  // stored and checked), so the reads above see them. DELETE is not.
  ASSERT_TRUE(add_gateway->Delete().ok());
  EXPECT_TRUE(WaitUntilNoGroups()) << Describe(Groups(server_->port()));
  text = Metrics();
  EXPECT_EQ(text.find("hy_test_bytes_total{"), std::string::npos) << text;
  EXPECT_EQ(text.find("hy_test_step{"), std::string::npos) << text;
}

TEST_F(RealPushgatewayTest, GroupingLabelsSurviveEncoding) {
  auto registry = std::make_shared<Registry>();
  auto g = BuildGauge().Name("hy_test_value").Help("V.").Register(*registry);
  (*(*g)->Add({}))->Set(1);
  const Labels grouping = {{"instance", "host:9100"},
                           {"path", "/var/lib/hy store"},
                           {"note", "a&b=c?d%e \xC3\xBC"},
                           {"empty", ""}};
  auto gateway = MakeGateway(grouping);
  ASSERT_NE(gateway, nullptr);
  gateway->RegisterCollectable(registry);
  ASSERT_TRUE(gateway->Push().ok()) << server_->LogTail();
  auto groups = Groups(server_->port());
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->size(), 1u) << Describe(groups);
  std::map<std::string, std::string> want(grouping.begin(), grouping.end());
  want.erase("empty");  // An empty label is no label in Prometheus.
  want["job"] = "hyctl_reshard";
  auto got = (*groups)[0];
  if (got.count("empty") != 0 && got["empty"].empty()) got.erase("empty");
  EXPECT_EQ(got, want);
  // The same encoded path addresses the group for DELETE.
  ASSERT_TRUE(gateway->Delete().ok());
  EXPECT_TRUE(WaitUntilNoGroups()) << Describe(Groups(server_->port()));
}

TEST_F(RealPushgatewayTest, InconsistentPushIsRefused) {
  auto first = std::make_shared<Registry>();
  ASSERT_TRUE((*BuildGauge().Name("hy_test_clash").Help("C.").Register(*first))
                  ->Add({})
                  .ok());
  auto g1 = MakeGateway({{"instance", "a"}});
  ASSERT_NE(g1, nullptr);
  g1->RegisterCollectable(first);
  ASSERT_TRUE(g1->Push().ok());

  // The same name as a histogram in another group: the Pushgateway refuses.
  auto second = std::make_shared<Registry>();
  ASSERT_TRUE((*BuildHistogram()
                    .Name("hy_test_clash")
                    .Help("C.")
                    .Buckets({1})
                    .Register(*second))
                  ->Add({})
                  .ok());
  auto g2 = MakeGateway({{"instance", "b"}});
  ASSERT_NE(g2, nullptr);
  g2->RegisterCollectable(second);
  Status s = g2->Push();
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  EXPECT_NE(s.message().find("400"), std::string_view::npos) << s;
}

}  // namespace
}  // namespace hy::metrics
