// Tests of the c10d Gloo transport (hy/reshard/c10d_transport.h) and of the
// reshard executor over it, with real processes on 127.0.0.1: the test
// hosts a TCPStore on a port the kernel picks and starts one worker process
// (hy_reshard_c10d_worker, fork + exec) per rank; each worker checks its own
// results (worker_*.cc) and reports through its exit status.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hy/reshard/c10d_transport.h"

extern char** environ;

namespace hy::reshard {
namespace {

// A job that runs longer than this is taken for a hang and killed.
constexpr auto kJobDeadline = std::chrono::seconds(150);

using EnvFn = std::function<std::map<std::string, std::string>(int rank)>;

// Exit status per started rank: the process's own, 128 + signal if it was
// killed, -1 for a rank killed because the job hung.
struct JobResult {
  std::vector<int> exit_codes;
  bool hung = false;
};

pid_t Spawn(const std::vector<std::string>& args,
            const std::map<std::string, std::string>& extra_env) {
  // Everything exec needs is built before fork: the child of a threaded
  // process may only make async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (extra_env.count(key) == 0) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env_strings)
    envp.push_back(const_cast<char*>(e.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive a crashed test.
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// Starts ranks 0 .. started-1 of a world of `world` running `scenario`
// against the store at `port`, and waits for all of them.
JobResult RunWorkers(const std::string& scenario, int world, int started,
                     int port, int64_t timeout_ms, const EnvFn& env = nullptr) {
  std::vector<pid_t> pids;
  for (int r = 0; r < started; ++r) {
    pids.push_back(Spawn(
        {HY_C10D_WORKER_PATH, "--scenario", scenario, "--rank",
         std::to_string(r), "--world", std::to_string(world), "--port",
         std::to_string(port), "--timeout-ms", std::to_string(timeout_ms)},
        env ? env(r) : std::map<std::string, std::string>()));
  }
  JobResult result;
  result.exit_codes.assign(started, -1);
  std::vector<bool> done(started, false);
  const auto deadline = std::chrono::steady_clock::now() + kJobDeadline;
  int left = started;
  while (left > 0) {
    for (int r = 0; r < started; ++r) {
      int status = 0;
      if (done[r] || pids[r] <= 0) {
        if (!done[r]) --left;
        done[r] = true;
        continue;
      }
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --left;
      result.exit_codes[r] =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      result.hung = true;
      for (int r = 0; r < started; ++r) {
        if (done[r]) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        done[r] = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

void ExpectAllSucceeded(const JobResult& job) {
  EXPECT_FALSE(job.hung) << "the job hung and was killed";
  for (size_t r = 0; r < job.exit_codes.size(); ++r) {
    EXPECT_EQ(job.exit_codes[r], 0) << "rank " << r << " failed (see stderr)";
  }
}

// Every test gets its own store on a port the kernel picked.
class C10dJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = C10dStoreServer::Start(0, 60000);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }

  JobResult Run(const std::string& scenario, int world, int started,
                int64_t timeout_ms) {
    return RunWorkers(scenario, world, started, server_->port(), timeout_ms);
  }

  std::unique_ptr<C10dStoreServer> server_;
};

TEST_F(C10dJobTest, AllToAllVUnevenAndEmptyMessagesAllGatherAndKv) {
  ExpectAllSucceeded(Run("alltoallv", 4, 4, 60000));
}

TEST_F(C10dJobTest, WorldOfOneRank) {
  ExpectAllSucceeded(Run("alltoallv", 1, 1, 60000));
}

TEST_F(C10dJobTest, CollectiveTimesOutWhenARankNeverJoins) {
  // Ranks 0-2 enter AllToAllV, rank 3 stays out: 0-2 get DeadlineExceeded
  // after about 3 s, and no process hangs.
  ExpectAllSucceeded(Run("collective_timeout", 4, 4, 3000));
}

TEST_F(C10dJobTest, PeerThatExitsIsAnErrorNotAHang) {
  // Rank 3 exits right after connecting; the others' AllToAllV fails
  // (Unavailable once Gloo sees the closed sockets, at worst after 20 s).
  ExpectAllSucceeded(Run("peer_exits", 4, 4, 20000));
}

TEST_F(C10dJobTest, ConnectTimesOutWhenARankNeverArrives) {
  ExpectAllSucceeded(Run("connect_timeout", 3, 2, 3000));
}

TEST_F(C10dJobTest, ReshardFsdp4ToTp2Dp2RawAndBf16AndBack) {
  ExpectAllSucceeded(Run("reshard_round_trip", 4, 4, 60000));
}

TEST_F(C10dJobTest, SparseDeltaMatchesFullModeWithProportionalBytes) {
  ExpectAllSucceeded(Run("sparse_delta", 4, 4, 60000));
}

TEST_F(C10dJobTest, StoreServerKvSetGetAndTimeout) {
  KeyValueStore* kv = server_->kv();
  ASSERT_TRUE(kv->Set("a", std::string("x\0y", 3)).ok());
  auto got = kv->Get("a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("x\0y", 3));
  // Short, but not so short that the server's own client (which connects
  // under the same timeout, retrying once a second) may give up.
  auto short_server = C10dStoreServer::Start(0, 2500);
  ASSERT_TRUE(short_server.ok()) << short_server.status();
  auto missing = (*short_server)->kv()->Get("missing");
  EXPECT_EQ(missing.status().code(), StatusCode::kDeadlineExceeded)
      << missing.status();
}

// A port that was free a moment ago; rank 0 binds it for its store. The
// caller retries if someone else took it meanwhile (worker exit 75).
int LikelyFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(C10dFromEnvTest, TorchrunEnvironmentWithRank0HostingTheStore) {
  JobResult job;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = LikelyFreePort();
    ASSERT_GT(port, 0);
    job = RunWorkers("from_env", 2, 2, port, 60000, [port](int rank) {
      return std::map<std::string, std::string>{
          {"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", "2"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"TORCHELASTIC_USE_AGENT_STORE", "False"}};
    });
    if (job.exit_codes.empty() || job.exit_codes[0] != 75) break;
  }
  ExpectAllSucceeded(job);
}

// Sets environment variables for one scope and restores them after.
class ScopedEnv {
 public:
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        setenv(name.c_str(), old->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  void Set(const std::string& name, const char* value) {
    if (saved_.count(name) == 0) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      setenv(name.c_str(), value, 1);
    } else {
      unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(C10dFromEnvTest, MissingOrBadVariablesAreInvalidArgument) {
  struct Case {
    const char* world;
    const char* rank;
    const char* local_rank;
    const char* addr;
    const char* port;
    const char* names;  // The variable the message must name.
  };
  const Case cases[] = {
      {nullptr, "0", "0", "127.0.0.1", "29500", "WORLD_SIZE"},
      {"abc", "0", "0", "127.0.0.1", "29500", "WORLD_SIZE"},
      {"0", "0", "0", "127.0.0.1", "29500", "WORLD_SIZE"},
      {"4", nullptr, "0", "127.0.0.1", "29500", "RANK"},
      {"4", "4", "0", "127.0.0.1", "29500", "RANK"},
      {"4", "-1", "0", "127.0.0.1", "29500", "RANK"},
      {"4", "1x", "0", "127.0.0.1", "29500", "RANK"},
      {"4", "1", "2", "127.0.0.1", "29500", "LOCAL_RANK"},
      {"4", "1", "0", nullptr, "29500", "MASTER_ADDR"},
      {"4", "1", "0", "", "29500", "MASTER_ADDR"},
      {"4", "1", "0", "127.0.0.1", nullptr, "MASTER_PORT"},
      {"4", "1", "0", "127.0.0.1", "0", "MASTER_PORT"},
      {"4", "1", "0", "127.0.0.1", "70000", "MASTER_PORT"},
  };
  for (const Case& c : cases) {
    ScopedEnv env;
    env.Set("WORLD_SIZE", c.world);
    env.Set("RANK", c.rank);
    env.Set("LOCAL_RANK", c.local_rank);
    env.Set("MASTER_ADDR", c.addr);
    env.Set("MASTER_PORT", c.port);
    auto t = C10dTransport::FromEnv();
    ASSERT_FALSE(t.ok()) << c.names;
    EXPECT_TRUE(t.status().IsInvalidArgument()) << t.status();
    EXPECT_NE(std::string(t.status().message()).find(c.names),
              std::string::npos)
        << t.status();
  }
}

TEST(C10dConnectTest, BadArgumentsAreInvalidArgument) {
  EXPECT_TRUE(C10dTransport::Connect(4, 4, "127.0.0.1", 29500)
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(C10dTransport::Connect(-1, 4, "127.0.0.1", 29500)
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(C10dTransport::Connect(0, 0, "127.0.0.1", 29500)
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(
      C10dTransport::Connect(0, 2, "", 29500).status().IsInvalidArgument());
  EXPECT_TRUE(C10dTransport::Connect(0, 2, "127.0.0.1", 0)
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(C10dTransport::Connect(0, 2, "127.0.0.1", 65536)
                  .status()
                  .IsInvalidArgument());
}

}  // namespace
}  // namespace hy::reshard
