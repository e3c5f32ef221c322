// VllmEngine: rollouts on vLLM engines through a shared weight file (see
// vllm_engine.h).

#include "vllm_engine.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "hy/metrics/hy_metrics.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/shared_destination.h"
#include "hy/trainer/data/task.h"

namespace hy::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    const std::string item =
        s.substr(at, comma == std::string::npos ? std::string::npos
                                                : comma - at);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

template <typename T>
void Put(std::vector<uint8_t>* out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof(T));
}

template <typename T>
bool Get(const std::vector<uint8_t>& in, size_t* at, T* v) {
  if (*at + sizeof(T) > in.size()) return false;
  std::memcpy(v, in.data() + *at, sizeof(T));
  *at += sizeof(T);
  return true;
}

// rank 0's status to every rank (the others pass OK). Collective.
Status ShareStatus(Comm* comm, const Status& mine) {
  std::vector<uint8_t> bytes;
  if (comm->rank() == 0) {
    bytes.push_back(static_cast<uint8_t>(mine.code()));
    const std::string m(mine.message());
    bytes.insert(bytes.end(), m.begin(), m.end());
  }
  HY_ASSIGN_OR_RETURN(auto all, comm->AllGatherBytes(bytes));
  if (all.empty() || all[0].empty()) return Status::Internal("no status");
  if (all[0][0] == 0) return Status::OK();
  return Status(static_cast<StatusCode>(all[0][0]),
                std::string(all[0].begin() + 1, all[0].end()));
}

}  // namespace

VllmEngine::VllmEngine(const RolloutContext& ctx) : ctx_(ctx) {}

VllmEngine::~VllmEngine() = default;

void VllmEngine::SaveState(nlohmann::json* state) const {
  // The version the engines held when this step was saved: the weights
  // that generated its last iteration (the step itself is synced to them
  // before the next rollout, here or after a resume).
  (*state)["rollout_engine"] = "vllm";
  (*state)["engine_weight_version"] = version_;
}

void VllmEngine::Restore(int64_t step, const nlohmann::json& state) {
  resumed_ = true;
  resumed_step_ = step;
  if (state.contains("engine_weight_version")) {
    saved_version_ = state.at("engine_weight_version").get<int64_t>();
  }
}

Status VllmEngine::SetupEngines() {
  const VllmConfig& vc = ctx_.config->rollout.vllm;
  Comm* comm = ctx_.comm;
  const std::vector<std::string>& hosts = *ctx_.hosts;
  // The engines and their weight file live on rank 0's host. Ranks there
  // write their pieces into the file; ranks on other hosts send theirs to
  // rank 0 over c10d (hy's executor, the engine's dtype on the wire).
  const int world = comm->world_size();
  std::vector<bool> remote(static_cast<size_t>(world), false);
  int local_ranks = 0;
  for (int r = 0; r < world; ++r) {
    remote[static_cast<size_t>(r)] =
        hosts[static_cast<size_t>(r)] != hosts.front();
    if (!remote[static_cast<size_t>(r)]) ++local_ranks;
  }
  const bool here = !remote[static_cast<size_t>(comm->rank())];
  HY_ASSIGN_OR_RETURN(const DType dtype, EngineDType(vc.dtype));
  std::vector<TensorMeta> metas;
  for (const reshard::TensorSpec& t : ctx_.actor->spec().tensors) {
    metas.push_back(t.meta);
  }
  HY_ASSIGN_OR_RETURN(
      weight_layout_,
      LayoutWeightFile(metas, ctx_.config->model.tie_word_embeddings, dtype));
  weight_manifest_ = weight_layout_.ManifestJson();
  std::string path = Env("HY_VLLM_WEIGHT_FILE");
  if (path.empty()) {
    path = "/dev/shm/hy-weights-" +
           (ctx_.run_id->empty() ? Env("MASTER_PORT") : *ctx_.run_id);
  }
  HY_RETURN_IF_ERROR(MapWeightFile(here, path));
  HY_RETURN_IF_ERROR(PlanTransfer(remote, local_ranks));
  if (comm->rank() != 0) return Status::OK();
  return ConnectEngines(path);
}

Status VllmEngine::MapWeightFile(bool here, const std::string& path) {
  Comm* comm = ctx_.comm;
  // Every rank learns whether rank 0 made the file (a collective either
  // way, so that no rank waits in a barrier for one that gave up).
  Status made;
  if (comm->rank() == 0) {
    Result<std::unique_ptr<SharedWeightFile>> f =
        SharedWeightFile::Create(path, weight_layout_.size);
    if (f.ok()) {
      weight_file_ = std::move(f).value();
    } else {
      made = f.status();
    }
  }
  HY_RETURN_IF_ERROR(ShareStatus(comm, made));
  if (comm->rank() != 0 && here) {
    HY_ASSIGN_OR_RETURN(weight_file_,
                        SharedWeightFile::Open(path, weight_layout_.size));
  }
  return Status::OK();
}

Status VllmEngine::PlanTransfer(const std::vector<bool>& remote,
                                int local_ranks) {
  const VllmConfig& vc = ctx_.config->rollout.vllm;
  Comm* comm = ctx_.comm;
  const int world = comm->world_size();
  HY_ASSIGN_OR_RETURN(reshard::Layout train,
                      reshard::Layout::Make(1, 1, 1, world));
  HY_ASSIGN_OR_RETURN(reshard::Layout whole, reshard::Layout::Make(1, 1, 1, 1));
  reshard::Topology topology;
  topology.world_size = world;
  // Host-major ranks (torchrun's order) make rank 0's host the first node.
  topology.ranks_per_node = local_ranks;
  HY_ASSIGN_OR_RETURN(
      reshard::TransferPlan plan,
      reshard::Plan(train, whole, ctx_.actor->spec(), topology));
  plan_ = std::make_shared<const reshard::TransferPlan>(std::move(plan));
  if (local_ranks == world) return Status::OK();
  remote_plan_ = std::make_shared<const reshard::TransferPlan>(
      reshard::PlanFromRanks(*plan_, remote));
  reshard::ExecutorOptions eo;
  eo.wire = weight_layout_.dtype == DType::kBF16 ? reshard::WireFormat::kBf16
                                                 : reshard::WireFormat::kRaw;
  // rank 0's destinations are the file, which holds what the engines
  // loaded last: the base every delta is taken against (config.h).
  eo.sparse_delta = vc.delta != "off";
  eo.learn_link_speed = vc.delta == "auto";
  eo.metrics = ctx_.metrics;
  executor_ = std::make_unique<reshard::Executor>(remote_plan_,
                                                  comm->transport(), eo);
  if (comm->rank() == 0) {
    Log(std::to_string(world - local_ranks) + " of " + std::to_string(world) +
        " ranks run on other hosts than the engines' (" +
        ctx_.hosts->front() + "): they send their pieces (" +
        std::to_string(remote_plan_->stats.network_bytes() >> 20) +
        " MiB as f32) to rank 0 over c10d");
  }
  return Status::OK();
}

Status VllmEngine::ConnectEngines(const std::string& path) {
  const VllmConfig& vc = ctx_.config->rollout.vllm;
  std::vector<std::string> urls = vc.urls;
  if (urls.empty()) urls = SplitList(Env("HY_VLLM_URLS"));
  if (urls.empty()) {
    return Status::InvalidArgument(
        "rollout.engine vllm: no engine (rollout.vllm.urls, or hyctl train "
        "starts them)");
  }
  const std::string key = Env("HY_VLLM_API_KEY");
  for (const std::string& u : urls) {
    engines_.push_back(
        std::make_unique<EngineClient>(u, key, vc.request_timeout_s));
  }
  engine_dir_ = Env("HY_VLLM_ENGINE_DIR");
  loaded_.assign(engines_.size(), false);
  if (resumed_ || saved_version_ >= 0) {
    Log("resumed at step " + std::to_string(resumed_step_) +
        (saved_version_ >= 0
             ? " (its checkpoint recorded engine version " +
                   std::to_string(saved_version_) + ")"
             : std::string()) +
        ": the engines get step " + std::to_string(resumed_step_) +
        " before any rollout");
  }
  Log("rollout on " + std::to_string(engines_.size()) + " vLLM engine(s) (" +
      vc.dtype + "), weights through " + path + " (" +
      std::to_string(weight_layout_.size >> 20) + " MiB)");
  return Status::OK();
}

void VllmEngine::KillEngine(size_t e) {
  if (engine_dir_.empty()) return;  // Not ours to kill: wait for it.
  std::ifstream in(engine_dir_ + "/engine-" + std::to_string(e) + ".pid");
  long pgid = 0;
  if (in >> pgid && pgid > 1) {
    Log("vLLM engine " + std::to_string(e) +
        " does not answer; killing it (process group " +
        std::to_string(pgid) + ") for a restart");
    kill(static_cast<pid_t>(-pgid), SIGKILL);
  }
}

Status VllmEngine::ReviveEngine(size_t e, const Status& why, bool starting) {
  const VllmConfig& vc = ctx_.config->rollout.vllm;
  EngineClient& c = *engines_[e];
  if (starting) {
    Log("waiting for vLLM engine " + std::to_string(e) + " (" + c.url() +
        ") to start");
  } else {
    Log("vLLM engine " + std::to_string(e) + " (" + c.url() +
        ") failed: " + why.ToString() + "; waiting for it");
  }
  if (!starting && why.code() == StatusCode::kDeadlineExceeded) {
    KillEngine(e);  // Hung, even on its first load: the keeper restarts it.
  }
  const auto start = Clock::now();
  // A killed engine may still answer for a moment: first let it go.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (;;) {
    if (c.Health(5).ok()) break;
    if (MsSince(start) > vc.start_timeout_s * 1000) {
      return Status::Unavailable(
          "vLLM engine " + std::to_string(e) + " (" + c.url() +
          ") did not come back within rollout.vllm.start_timeout_s (" +
          std::to_string(static_cast<int>(vc.start_timeout_s)) +
          " s): " + why.ToString());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const std::string waited =
      std::to_string(static_cast<int>(MsSince(start) / 1000)) + " s";
  if (starting) {
    Log("vLLM engine " + std::to_string(e) + " answers after " + waited);
    return Status::OK();
  }
  ++restarts_;
  if (ctx_.metrics != nullptr) ctx_.metrics->engine_restarts->Increment();
  Log("vLLM engine " + std::to_string(e) + " is back after " + waited +
      "; reloading version " + std::to_string(version_));
  return Status::OK();
}

Status VllmEngine::LoadEngine(size_t e) {
  const std::string version = std::to_string(version_);
  EngineClient& c = *engines_[e];
  // An engine never loaded may still be starting (hyctl train starts it
  // beside the workers): waiting for it spends none of its restarts.
  if (!loaded_[e]) {
    const Status up = c.Health(5);
    if (!up.ok()) HY_RETURN_IF_ERROR(ReviveEngine(e, up, /*starting=*/true));
  }
  int attempts = 0;
  for (;;) {
    Status s = c.InitWeightTransfer(weight_file_->path());
    if (s.ok()) {
      s = c.UpdateWeights(weight_manifest_, weight_layout_.size, version);
    }
    if (s.ok()) {
      loaded_[e] = true;
      return s;
    }
    const bool engine_failed = s.code() == StatusCode::kUnavailable ||
                               s.code() == StatusCode::kDeadlineExceeded;
    if (!engine_failed ||
        ++attempts > ctx_.config->rollout.vllm.max_restarts) {
      return s;
    }
    HY_RETURN_IF_ERROR(ReviveEngine(e, s, /*starting=*/false));
  }
}

Status VllmEngine::ForEachEngine(const std::function<Status(size_t)>& fn) {
  std::vector<Status> st(engines_.size());
  std::vector<std::thread> threads;
  for (size_t e = 0; e < engines_.size(); ++e) {
    threads.emplace_back([&, e] { st[e] = fn(e); });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : st) HY_RETURN_IF_ERROR(s);
  return Status::OK();
}

Status VllmEngine::SendRemotePieces(const std::vector<ConstBytes>& src,
                                    const std::vector<MutableBytes>& into,
                                    Status* moved, double* sent) {
  Comm* comm = ctx_.comm;
  reshard::ReshardStats rs;
  *moved = executor_->Run(src, into, &rs);
  // A delta whose base is not what the file holds (an earlier sync that
  // failed half way, a file written by something else) is DataLoss at
  // rank 0, never applied: every rank forgets its delta state and sends
  // everything, once.
  HY_ASSIGN_OR_RETURN(auto damaged,
                      comm->SumAcrossRanks({moved->IsDataLoss() ? 1.0 : 0.0}));
  if (damaged[0] > 0) {
    if (comm->rank() == 0) {
      Log("weight sync: a delta did not match the weight file (" +
          moved->ToString() + "); sending the full weights");
    }
    executor_->ResetDelta();
    *sent += static_cast<double>(rs.wire_bytes_sent);
    rs = reshard::ReshardStats();
    *moved = executor_->Run(src, into, &rs);
  }
  *sent += static_cast<double>(rs.wire_bytes_sent);
  return Status::OK();
}

Result<double> VllmEngine::WriteWeightFile() {
  Comm* comm = ctx_.comm;
  FsdpModel& actor = *ctx_.actor;
  std::vector<ConstBytes> src;
  std::vector<MutableBytes> dst;
  // On a GPU the rank's pieces are copied to host memory first (its own
  // pieces only); on the CPU they are read where they are.
  std::vector<at::Tensor> staged;
  for (int t = 0; t < actor.num_tensors(); ++t) {
    at::Tensor local = actor.LocalSlice(actor.params(), t);
    if (!local.device().is_cpu()) {
      staged.push_back(local.to(at::kCPU).contiguous());
      local = staged.back();
    }
    src.emplace_back(static_cast<const uint8_t*>(local.data_ptr()),
                     static_cast<size_t>(local.numel() * 4));
    const WeightFileEntry& e = weight_layout_.tensors[static_cast<size_t>(t)];
    // Only rank 0 receives from other hosts: its views of the file; the
    // other ranks' destinations are empty.
    dst.push_back(weight_file_ != nullptr
                      ? weight_file_->bytes(e.offset, e.bytes)
                      : MutableBytes());
  }
  reshard::SharedDestinationStats stats;
  Status wrote;
  if (weight_file_ != nullptr) {
    wrote = reshard::RunToSharedDestination(*plan_, comm->rank(), 0, src, dst,
                                            weight_layout_.dtype, &stats);
  }
  double sent = 0;
  if (executor_ != nullptr) {
    // Collective: every rank takes part, those on rank 0's host with
    // nothing to send.
    std::vector<MutableBytes> into(dst.size());
    if (comm->rank() == 0) into = dst;
    Status moved;
    HY_RETURN_IF_ERROR(SendRemotePieces(src, into, &moved, &sent));
    if (wrote.ok()) wrote = moved;
  }
  HY_RETURN_IF_ERROR(wrote);
  HY_ASSIGN_OR_RETURN(auto sums,
                      comm->SumAcrossRanks(
                          {static_cast<double>(stats.bytes_written) + sent}));
  return sums[0];
}

Status VllmEngine::LoadWeights(int64_t weight_version,
                               IterationReport* report) {
  const auto start = Clock::now();
  // Every rank plans (SetupEngines) once; only rank 0's host maps the file.
  if (plan_ == nullptr) HY_RETURN_IF_ERROR(SetupEngines());
  HY_ASSIGN_OR_RETURN(const double bytes, WriteWeightFile());
  // Every rank's bytes are in the file (the collective above is the
  // barrier); rank 0 has the engines load them.
  Status loaded;
  if (ctx_.comm->rank() == 0) {
    version_ = weight_version;
    loaded = ForEachEngine([this](size_t e) { return LoadEngine(e); });
  }
  HY_RETURN_IF_ERROR(ShareStatus(ctx_.comm, loaded));
  version_ = weight_version;
  report->rollout_engine = "vllm";
  report->weight_sync_ms = MsSince(start);
  report->weight_sync_bytes = static_cast<int64_t>(bytes);
  if (ctx_.metrics != nullptr) {
    ctx_.metrics->weight_sync_duration->Observe(report->weight_sync_ms /
                                                1000.0);
    ctx_.metrics->weight_sync_bytes->Increment(
        static_cast<double>(report->weight_sync_bytes));
    ctx_.metrics->weight_version->Set(static_cast<double>(weight_version));
  }
  return Status::OK();
}

Status VllmEngine::GenerateOnEngine(size_t e,
                                    const std::vector<SampleRequest>& requests,
                                    const SamplingParams& params,
                                    std::vector<SampleResult>* out,
                                    int64_t* retries) {
  EngineClient& c = *engines_[e];
  const std::string want = std::to_string(version_);
  int attempts = 0;
  for (;;) {
    Status s;
    Result<std::string> before = c.WeightVersion();
    if (!before.ok()) {
      s = before.status();
    } else if (*before != want) {
      s = Status::Unavailable("holds version '" + *before + "', not " + want);
    } else {
      Result<std::vector<SampleResult>> r = c.Generate("", requests, params);
      Result<std::string> after =
          r.ok() ? c.WeightVersion() : Result<std::string>(r.status());
      if (!after.ok()) {
        s = after.status();
      } else if (*after != want) {
        // Restarted (dummy weights) or updated while generating.
        s = Status::Unavailable("generated across versions " + want +
                                " -> '" + *after + "'");
      } else {
        *out = std::move(r).value();
        return Status::OK();
      }
    }
    if (++attempts > ctx_.config->rollout.vllm.max_restarts) return s;
    ++*retries;
    HY_RETURN_IF_ERROR(ReviveEngine(e, s, /*starting=*/false));
    HY_RETURN_IF_ERROR(LoadEngine(e));
  }
}

Status VllmEngine::SampleOnEngines(const std::vector<Prompt>& items,
                                   uint64_t iteration, const RolloutConfig& rc,
                                   std::vector<uint8_t>* payload) {
  const int64_t total = static_cast<int64_t>(items.size());
  const int64_t R = rc.response_length;
  const TokenSpec& spec = ctx_.source->token_spec();
  SamplingParams params;
  params.max_tokens = static_cast<int>(R);
  params.temperature = rc.temperature;
  params.top_k = rc.top_k;
  params.top_p = rc.top_p;
  params.stop_token_ids = spec.eos;
  const size_t E = engines_.size();
  std::vector<std::vector<SampleRequest>> shares(E);
  for (int64_t j = 0; j < total; ++j) {
    SampleRequest q;
    q.prompt = items[static_cast<size_t>(j)].tokens;
    // The seed hy's own rollout gives the sample's first token: a run
    // is as repeatable on vLLM as on hy's decoder.
    q.seed = SamplingSeed(ctx_.config->trainer.seed, iteration,
                          static_cast<uint64_t>(j), 0);
    shares[static_cast<size_t>(j * static_cast<int64_t>(E) / total)].push_back(
        std::move(q));
  }
  std::vector<std::vector<SampleResult>> results(E);
  std::vector<int64_t> retries(E, 0);
  HY_RETURN_IF_ERROR(ForEachEngine([&](size_t e) {
    return GenerateOnEngine(e, shares[e], params, &results[e], &retries[e]);
  }));
  int64_t redone = 0;
  for (int64_t r : retries) redone += r;
  Put(payload, version_);
  Put(payload, redone);
  Put(payload, restarts_);
  for (const auto& share : results) {
    for (const SampleResult& s : share) {
      for (int64_t t = 0; t < R; ++t) {
        const bool in = t < static_cast<int64_t>(s.tokens.size());
        Put(payload, static_cast<int64_t>(in ? s.tokens[t] : spec.pad));
        Put(payload, in ? s.logprobs[t] : 0.0f);
      }
    }
  }
  return Status::OK();
}

Result<at::Tensor> VllmEngine::Generate(const std::vector<Prompt>& items,
                                        int64_t prompt_len, uint64_t iteration,
                                        const RolloutConfig& rc,
                                        at::Tensor* engine_logp,
                                        IterationReport* report) {
  (void)prompt_len;
  Comm* comm = ctx_.comm;
  const int64_t total = static_cast<int64_t>(items.size());
  const int64_t R = rc.response_length;
  std::vector<uint8_t> payload;
  Status st;
  if (comm->rank() == 0) st = SampleOnEngines(items, iteration, rc, &payload);
  HY_RETURN_IF_ERROR(ShareStatus(comm, st));
  HY_ASSIGN_OR_RETURN(auto all, comm->AllGatherBytes(payload));
  const std::vector<uint8_t>& in = all[0];
  size_t at = 0;
  int64_t version = 0, redone = 0, restarts = 0;
  if (!Get(in, &at, &version) || !Get(in, &at, &redone) ||
      !Get(in, &at, &restarts) ||
      in.size() - at != static_cast<size_t>(total * R * 12)) {
    return Status::Internal("rollout: a malformed batch from rank 0");
  }
  at::Tensor responses = at::empty({total, R}, at::kLong);
  *engine_logp = at::empty({total, R}, at::kFloat);
  int64_t* tok = responses.data_ptr<int64_t>();
  float* lp = engine_logp->data_ptr<float>();
  for (int64_t i = 0; i < total * R; ++i) {
    Get(in, &at, &tok[i]);
    Get(in, &at, &lp[i]);
  }
  report->weight_version = version;
  report->rollout_retries = redone;
  report->engine_restarts = restarts;
  return responses;
}

}  // namespace hy::trainer
