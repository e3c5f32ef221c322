// EngineClient's failures without an engine: a port nobody listens on is
// Unavailable (the caller waits for a restart); a server that never
// answers (a hung engine) times out as DeadlineExceeded (the caller has it
// killed).

#include "hy/trainer/vllm/engine_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace hy::trainer {
namespace {

// A listening socket that accepts nothing: connections queue, no answer.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 16);
    socklen_t n = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
  }
  ~SilentServer() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int ClosedPort() {
  SilentServer s;  // Bound, then closed: nobody listens there.
  return s.port();
}

TEST(EngineClientTest, NoServerIsUnavailable) {
  EngineClient c("http://127.0.0.1:" + std::to_string(ClosedPort()) + "/",
                 "key", 5);
  EXPECT_EQ(c.Health(1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(c.InitWeightTransfer("/dev/shm/x").code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(c.WeightVersion().status().code(), StatusCode::kUnavailable);
  auto g = c.Generate("", {{{1, 2, 3}, 7}, {{4}, 8}}, SamplingParams());
  EXPECT_EQ(g.status().code(), StatusCode::kUnavailable);
}

TEST(EngineClientTest, AHungServerTimesOutAsDeadlineExceeded) {
  SilentServer s;
  EngineClient c("http://127.0.0.1:" + std::to_string(s.port()), "key", 1);
  const auto start = std::chrono::steady_clock::now();
  Status st = c.UpdateWeights("[]", 0, "3");
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("imed out"), std::string::npos) << st.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace hy::trainer
