// Transport-level scenarios: AllToAllV with uneven and empty messages,
// AllGatherV, AllGatherEqual, the key-value store, torchrun's environment,
// and timeouts (a rank that never joins a collective or never arrives).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hy/reshard/c10d_transport.h"
#include "worker.h"

namespace hy::reshard::testing {
namespace {

Result<std::unique_ptr<C10dTransport>> ConnectToTestStore(
    const WorkerArgs& args) {
  C10dTransportOptions options;
  options.timeout_ms = args.timeout_ms;
  options.prefix = "test/" + args.scenario;
  options.rank0_hosts_store = false;  // The test process hosts it.
  options.gloo_hostname = "127.0.0.1";
  return C10dTransport::Connect(args.rank, args.world, "127.0.0.1", args.port,
                                options);
}

// Byte i of the message src sends dst in round `round`.
uint8_t PatternByte(int src, int dst, int round, size_t i) {
  uint64_t x = (static_cast<uint64_t>(src) << 48) ^
               (static_cast<uint64_t>(dst) << 40) ^
               (static_cast<uint64_t>(round) << 32) ^ i;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 29;
  return static_cast<uint8_t>(x);
}

// Bytes src sends dst in AllToAllV round `round`: uneven, some zero, one
// round all zero, one large, one with a single message.
size_t MessageSize(int src, int dst, int round, int world) {
  switch (round) {
    case 0:
      return (src + dst) % 3 == 0 ? 0 : ((src * 5 + dst * 3) % 7 + 1) * 1013;
    case 1:
      return 0;
    case 2:
      return (size_t{3} << 20) + src * 17 + dst;
    default:
      return src == 0 && dst == world - 1 ? 12345 : 0;
  }
}

Status CheckAllToAllVRound(C10dTransport* t, int round) {
  const int world = t->world_size();
  const int me = t->rank();
  std::vector<std::vector<uint8_t>> bufs(world);
  std::vector<ConstBytes> send(world);
  for (int p = 0; p < world; ++p) {
    // send[me] is not sent; give it bytes to check that it is ignored.
    const size_t n = p == me ? 77 : MessageSize(me, p, round, world);
    for (size_t i = 0; i < n; ++i)
      bufs[p].push_back(PatternByte(me, p, round, i));
    send[p] = ConstBytes(bufs[p]);
  }
  // Stale contents the call must replace.
  std::vector<std::vector<uint8_t>> recv(world + 2, std::vector<uint8_t>(5, 1));
  HY_RETURN_IF_ERROR(t->AllToAllV(send, &recv));
  const std::string where = "AllToAllV round " + std::to_string(round);
  HY_RETURN_IF_ERROR(Check(static_cast<int>(recv.size()) == world,
                           where + ": recv has world_size entries"));
  HY_RETURN_IF_ERROR(Check(recv[me].empty(), where + ": recv[rank] empty"));
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    const size_t n = MessageSize(p, me, round, world);
    HY_RETURN_IF_ERROR(Check(recv[p].size() == n,
                             where + ": size from rank " + std::to_string(p) +
                                 " is " + std::to_string(recv[p].size()) +
                                 ", want " + std::to_string(n)));
    for (size_t i = 0; i < n; ++i) {
      if (recv[p][i] != PatternByte(p, me, round, i)) {
        return Status::Internal(where + ": byte " + std::to_string(i) +
                                " from rank " + std::to_string(p) + " differs");
      }
    }
  }
  return Status::OK();
}

Status CheckAllGathers(C10dTransport* t) {
  const int world = t->world_size();
  const int me = t->rank();
  // Rank 1 contributes nothing.
  auto contribution = [](int r) {
    std::vector<uint8_t> v(r == 1 ? 0 : 1000 * r + 3);
    for (size_t i = 0; i < v.size(); ++i) v[i] = PatternByte(r, 99, 7, i);
    return v;
  };
  const std::vector<uint8_t> mine = contribution(me);
  std::vector<std::vector<uint8_t>> out;
  HY_RETURN_IF_ERROR(t->AllGatherV(ConstBytes(mine), &out));
  HY_RETURN_IF_ERROR(Check(static_cast<int>(out.size()) == world,
                           "AllGatherV: one entry per rank"));
  for (int p = 0; p < world; ++p) {
    HY_RETURN_IF_ERROR(Check(out[p] == contribution(p),
                             "AllGatherV: bytes of rank " + std::to_string(p)));
  }

  // In place: each rank's bytes straight into its own region of one
  // buffer (with gaps the call must not touch); rank 1's region is empty.
  {
    std::vector<size_t> at(world + 1, 0);
    for (int p = 0; p < world; ++p) at[p + 1] = at[p] + contribution(p).size() + 8;
    std::vector<uint8_t> buffer(at[world], 0xEE);
    std::vector<MutableBytes> into(world);
    for (int p = 0; p < world; ++p) {
      into[p] = MutableBytes(buffer.data() + at[p], contribution(p).size());
    }
    HY_RETURN_IF_ERROR(t->AllGatherInto(ConstBytes(mine), into));
    for (int p = 0; p < world; ++p) {
      const std::vector<uint8_t> want =
          p == me ? std::vector<uint8_t>(mine.size(), 0xEE) : contribution(p);
      HY_RETURN_IF_ERROR(Check(
          std::equal(want.begin(), want.end(), buffer.begin() + at[p]),
          "AllGatherInto: bytes of rank " + std::to_string(p)));
      for (size_t i = at[p] + want.size(); i < at[p + 1]; ++i) {
        HY_RETURN_IF_ERROR(Check(buffer[i] == 0xEE, "AllGatherInto: a gap"));
      }
    }
    HY_RETURN_IF_ERROR(
        Check(t->AllGatherInto(ConstBytes(mine), {}).IsInvalidArgument(),
              "AllGatherInto without an output per rank is InvalidArgument"));
    // Rank 0 expects one byte less from the last rank than it sends (Gloo
    // alone would abort the process): Internal there, OK elsewhere, and
    // the transport goes on (the gathers below).
    const int last = world - 1;
    if (me == 0 && last > 0) {
      into[last] = MutableBytes(buffer.data() + at[last],
                                contribution(last).size() - 1);
    }
    const Status s = t->AllGatherInto(ConstBytes(mine), into);
    if (me == 0 && last > 0) {
      HY_RETURN_IF_ERROR(Check(s.code() == StatusCode::kInternal,
                               "AllGatherInto of a wrong size is Internal: " +
                                   s.ToString()));
    } else {
      HY_RETURN_IF_ERROR(s);
    }
  }

  const size_t n = 4096 + 1;
  std::vector<uint8_t> in(n), all(n * world);
  for (size_t i = 0; i < n; ++i) in[i] = PatternByte(me, 98, 8, i);
  HY_RETURN_IF_ERROR(t->AllGatherEqual(ConstBytes(in), MutableBytes(all)));
  for (int p = 0; p < world; ++p) {
    for (size_t i = 0; i < n; ++i) {
      if (all[p * n + i] != PatternByte(p, 98, 8, i)) {
        return Status::Internal("AllGatherEqual: byte " + std::to_string(i) +
                                " of rank " + std::to_string(p) + " differs");
      }
    }
  }
  std::vector<uint8_t> too_small(n * world - 1);
  HY_RETURN_IF_ERROR(
      Check(t->AllGatherEqual(ConstBytes(in), MutableBytes(too_small))
                .IsInvalidArgument(),
            "AllGatherEqual with a short output is InvalidArgument"));
  return Status::OK();
}

Status CheckKv(C10dTransport* t) {
  const std::string mine = "hello from " + std::to_string(t->rank());
  HY_RETURN_IF_ERROR(
      t->kv()->Set("greeting/" + std::to_string(t->rank()), mine));
  for (int p = 0; p < t->world_size(); ++p) {
    HY_ASSIGN_OR_RETURN(std::string got,
                        t->kv()->Get("greeting/" + std::to_string(p)));
    HY_RETURN_IF_ERROR(Check(got == "hello from " + std::to_string(p),
                             "kv value of rank " + std::to_string(p)));
  }
  return Status::OK();
}

}  // namespace

Status RunAllToAllV(const WorkerArgs& args) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<C10dTransport> t,
                      ConnectToTestStore(args));
  HY_RETURN_IF_ERROR(Check(t->rank() == args.rank &&
                               t->world_size() == args.world &&
                               std::string(t->name()) == "gloo",
                           "rank, world size and name"));
  for (int round = 0; round < 4; ++round) {
    HY_RETURN_IF_ERROR(CheckAllToAllVRound(t.get(), round));
  }
  // A malformed call is refused locally and leaves the transport usable.
  std::vector<std::vector<uint8_t>> recv;
  HY_RETURN_IF_ERROR(
      Check(t->AllToAllV(std::vector<ConstBytes>(args.world + 1), &recv)
                .IsInvalidArgument(),
            "AllToAllV with world_size + 1 buffers is InvalidArgument"));
  HY_RETURN_IF_ERROR(CheckAllGathers(t.get()));
  HY_RETURN_IF_ERROR(CheckKv(t.get()));
  HY_RETURN_IF_ERROR(CheckAllToAllVRound(t.get(), 0));
  return t->Barrier();
}

Status RunFromEnv(const WorkerArgs& args) {
  C10dTransportOptions options;
  options.timeout_ms = args.timeout_ms;
  options.gloo_hostname = "127.0.0.1";
  HY_ASSIGN_OR_RETURN(std::unique_ptr<C10dTransport> t,
                      C10dTransport::FromEnv(options));
  HY_RETURN_IF_ERROR(Check(t->rank() == args.rank &&
                               t->world_size() == args.world &&
                               t->local_rank() == args.rank,
                           "rank, world size and local rank from the env"));
  HY_RETURN_IF_ERROR(CheckAllToAllVRound(t.get(), 0));
  HY_RETURN_IF_ERROR(CheckKv(t.get()));
  // Rank 0 hosts the store: everyone is done with it after this barrier.
  return t->Barrier();
}

Status RunCollectiveTimeout(const WorkerArgs& args) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<C10dTransport> t,
                      ConnectToTestStore(args));
  const int laggard = args.world - 1;
  if (args.rank != laggard) {
    std::vector<uint8_t> bytes(100, 7);
    std::vector<ConstBytes> send(args.world, ConstBytes(bytes));
    std::vector<std::vector<uint8_t>> recv;
    const auto start = std::chrono::steady_clock::now();
    const Status s = t->AllToAllV(send, &recv);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::fprintf(stderr,
                 "[rank %d] AllToAllV without rank %d: %s after %.1f s\n",
                 args.rank, laggard, s.ToString().c_str(), secs);
    HY_RETURN_IF_ERROR(Check(s.code() == StatusCode::kDeadlineExceeded,
                             "AllToAllV without the laggard is "
                             "DeadlineExceeded, got " +
                                 s.ToString()));
    // The transport is unusable now: the same error, at once.
    HY_RETURN_IF_ERROR(Check(t->Barrier() == s, "Barrier after the error"));
    HY_RETURN_IF_ERROR(
        Check(t->AllToAllV(send, &recv) == s, "AllToAllV after the error"));
    return t->kv()->Set("done/" + std::to_string(args.rank), "1");
  }
  // The laggard: a key nobody sets times out too.
  Result<std::string> never = t->kv()->Get("never/set");
  HY_RETURN_IF_ERROR(Check(
      !never.ok() && never.status().code() == StatusCode::kDeadlineExceeded,
      "Get of a key nobody sets is DeadlineExceeded, got " +
          never.status().ToString()));
  // Stay out of the collective, alive, until the others saw their error.
  for (int p = 0; p < laggard; ++p) {
    Result<std::string> done = Status::Internal("not yet");
    for (int attempt = 0; attempt < 40 && !done.ok(); ++attempt) {
      done = t->kv()->Get("done/" + std::to_string(p));
    }
    HY_RETURN_IF_ERROR(done.status().ok() ? Status::OK() : done.status());
  }
  return Status::OK();
}

Status RunPeerExits(const WorkerArgs& args) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<C10dTransport> t,
                      ConnectToTestStore(args));
  const int quitter = args.world - 1;
  if (args.rank == quitter) {
    // Once everyone is connected: gone, sockets closed, no goodbye.
    for (int p = 0; p < quitter; ++p) {
      HY_RETURN_IF_ERROR(
          t->kv()->Get("connected/" + std::to_string(p)).status());
    }
    std::_Exit(0);
  }
  HY_RETURN_IF_ERROR(
      t->kv()->Set("connected/" + std::to_string(args.rank), "1"));
  std::vector<uint8_t> bytes(1 << 20, 7);
  std::vector<ConstBytes> send(args.world, ConstBytes(bytes));
  std::vector<std::vector<uint8_t>> recv;
  const Status s = t->AllToAllV(send, &recv);
  std::fprintf(stderr, "[rank %d] AllToAllV after rank %d exited: %s\n",
               args.rank, quitter, s.ToString().c_str());
  HY_RETURN_IF_ERROR(Check(s.code() == StatusCode::kUnavailable ||
                               s.code() == StatusCode::kDeadlineExceeded,
                           "AllToAllV with a dead peer is Unavailable (or "
                           "DeadlineExceeded), got " +
                               s.ToString()));
  return Check(t->Barrier() == s, "Barrier after the error");
}

Status RunConnectTimeout(const WorkerArgs& args) {
  // The test starts world - 1 ranks: the last never arrives.
  Result<std::unique_ptr<C10dTransport>> t = ConnectToTestStore(args);
  std::fprintf(stderr, "[rank %d] Connect without rank %d: %s\n", args.rank,
               args.world - 1, t.status().ToString().c_str());
  return Check(!t.ok() && t.status().code() == StatusCode::kDeadlineExceeded,
               "Connect without the last rank is DeadlineExceeded, got " +
                   t.status().ToString());
}

}  // namespace hy::reshard::testing
