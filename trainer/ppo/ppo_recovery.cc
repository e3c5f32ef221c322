// PpoWorker's fault tolerance: node ids, heartbeats, resuming through
// hy::recovery (see hy/trainer/ppo/worker.h), what a checkpoint holds and how
// long training waits for it, and what a resume restores.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hy/metrics/hy_metrics.h"
#include "hy/recovery/node_identity.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/run_identity.h"
#include "hy/trainer/data/special_tokens.h"
#include "hy/trainer/hf/run_tokens.h"
#include "ppo_worker.h"

namespace hy::trainer {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

}  // namespace

bool IsRestart() {
  return EnvInt("HY_RESTART_COUNT", 0) > 0 ||
         EnvInt("TORCHELASTIC_RESTART_COUNT", 0) > 0;
}

Status PpoWorker::JoinNodes() {
  const std::string& root = config_.checkpoint.store_root;
  HY_ASSIGN_OR_RETURN(recovery::NodeReport mine, recovery::ReportNode(root));
  const std::string text = recovery::EncodeNodeReport(mine);
  HY_ASSIGN_OR_RETURN(auto all, comm_->AllGatherBytes(std::vector<uint8_t>(
                                    text.begin(), text.end())));
  std::vector<recovery::NodeReport> reports;
  hosts_.clear();
  for (const auto& bytes : all) {
    HY_ASSIGN_OR_RETURN(
        recovery::NodeReport r,
        recovery::DecodeNodeReport(std::string(bytes.begin(), bytes.end())));
    hosts_.push_back(r.hostname);
    reports.push_back(std::move(r));
  }
  HY_ASSIGN_OR_RETURN(nodes_, recovery::AssignNodesByIdentity(reports));
  const int rank = comm_->rank();
  const int node = nodes_[rank];
  const int slot = recovery::SlotOf(rank, nodes_);
  if (slot == 0) HY_RETURN_IF_ERROR(recovery::RecordHost(root, node, mine));
  std::error_code ec;
  std::filesystem::create_directories(recovery::NodeDir(root, node), ec);
  std::ofstream(recovery::WorkerPidPath(root, node, slot)) << getpid() << "\n";
  std::string list;
  for (int n : nodes_) list += (list.empty() ? "" : ",") + std::to_string(n);
  Log("nodes by rank: " + list + " (" +
      std::to_string(recovery::CountNodes(nodes_)) + " nodes)");
  if (std::count(hosts_.begin(), hosts_.end(), hosts_[0]) ==
          static_cast<long>(hosts_.size()) &&
      config_.checkpoint.replicas > 0) {
    Log("every rank runs on host " + hosts_[0] +
        ": replicas guard against a lost process or store directory there, "
        "not against losing the host");
  }
  return Status::OK();
}

Status PpoWorker::ClaimRun() {
  run_id_ = recovery::RunIdFromEnv();
  std::string error;
  if (run_id_.empty()) {
    Log("no run id (HY_RUN_ID, or torchrun --rdzv-id): the stores under " +
        config_.checkpoint.store_root +
        " are not protected from another job using the same root");
  } else {
    Status s = recovery::ValidateRunId(run_id_);
    // One rank per node (slot 0) opens the node's stores to claim them.
    if (s.ok() && recovery::SlotOf(comm_->rank(), nodes_) == 0) {
      s = recovery::ClaimNodeStores(config_.checkpoint.store_root,
                                    nodes_[comm_->rank()], run_id_,
                                    options_.allow_other_run);
    }
    if (!s.ok()) error = std::string(s.message());
  }
  // Every rank stops if any rank's node holds another run's stores.
  HY_ASSIGN_OR_RETURN(auto all, comm_->AllGatherBytes(std::vector<uint8_t>(
                                    error.begin(), error.end())));
  for (const auto& e : all) {
    if (!e.empty()) {
      return Status::FailedPrecondition(std::string(e.begin(), e.end()));
    }
  }
  if (!run_id_.empty()) Log("run " + run_id_);
  return Status::OK();
}

Result<bool> PpoWorker::AnyRankRestarted() {
  const std::vector<uint8_t> mine = {static_cast<uint8_t>(IsRestart())};
  HY_ASSIGN_OR_RETURN(auto all, comm_->AllGatherBytes(mine));
  for (const auto& a : all) {
    if (!a.empty() && a[0] != 0) return true;
  }
  return false;
}

void PpoWorker::StartHeartbeat() {
  recovery::HeartbeatOptions o;
  o.timeout_ms = config_.checkpoint.heartbeat_timeout_ms;
  o.period_ms =
      std::min<int64_t>(1000, std::max<int64_t>(50, o.timeout_ms / 5));
  const int rank = comm_->rank();
  if (const metrics::HyMetrics* m = options_.metrics) {
    // hy_peer_heartbeat_age_seconds{peer}: the gauges are made here, once.
    auto ages = std::make_shared<std::vector<metrics::Gauge*>>();
    for (int r = 0; r < comm_->world_size(); ++r) {
      Result<metrics::Gauge*> g =
          r == rank ? Result<metrics::Gauge*>(nullptr) : m->PeerHeartbeatAge(r);
      ages->push_back(g.ok() ? *g : nullptr);
    }
    o.on_peer_age = [ages](int peer, double seconds) {
      if (peer >= 0 && peer < static_cast<int>(ages->size()) &&
          (*ages)[peer] != nullptr) {
        (*ages)[peer]->Set(seconds);
      }
    };
  }
  heartbeat_ = std::make_unique<recovery::Heartbeat>(
      comm_->aux()->kv(), rank, comm_->world_size(), o,
      [rank](const std::string& why) {
        std::fprintf(stderr,
                     "hy: rank %d: peer failure detected (%s); exiting with "
                     "status %d for a restart\n",
                     rank, why.c_str(), recovery::kExitPeerFailed);
        std::fflush(stderr);
        std::_Exit(recovery::kExitPeerFailed);
      });
}

Status PpoWorker::ResumeFrom(recovery::Recovery* rec) {
  HY_ASSIGN_OR_RETURN(std::string state_text, rec->FetchBlob("trainer.state"));
  HY_ASSIGN_OR_RETURN(std::string config_text,
                      rec->FetchBlob("trainer.config"));
  HY_RETURN_IF_ERROR(ApplyStoredState(state_text, config_text));
  struct Part {
    FsdpModel* model;
    std::string prefix;
    bool optimizer;
  };
  std::vector<Part> parts = {{actor_.get(), kActorPrefix, true}};
  if (critic_ != nullptr) parts.push_back({critic_.get(), kCriticPrefix, true});
  parts.push_back({ref_.get(), kRefPrefix, false});
  const int rank = comm_->rank();
  std::vector<recovery::TensorNeed> needs;
  // Pieces on a GPU are fetched into host tensors, then copied over.
  std::vector<std::pair<at::Tensor, at::Tensor>> to_device;  // {host, dev}
  for (const Part& part : parts) {
    FsdpModel* m = part.model;
    for (int t = 0; t < m->num_tensors(); ++t) {
      const reshard::RankShard& s = m->shard_map().Get(rank, t);
      if (!s.has_shard || s.num_elements == 0) continue;
      const std::string& name = m->spec().tensors[t].meta.name;
      std::vector<std::pair<std::string, at::Tensor*>> bufs = {
          {"/", &m->params()}};
      if (part.optimizer) {
        bufs.push_back({"/exp_avg/", &m->exp_avg()});
        bufs.push_back({"/exp_avg_sq/", &m->exp_avg_sq()});
      }
      for (const auto& [infix, buffer] : bufs) {
        at::Tensor local = m->LocalSlice(*buffer, t);
        if (!local.is_cpu()) {
          to_device.push_back({at::empty({local.numel()}), local});
          local = to_device.back().first;
        }
        needs.push_back({part.prefix + infix + name, s.runs[0],
                         MutableBytes(static_cast<uint8_t*>(local.data_ptr()),
                                      static_cast<size_t>(local.numel() * 4))});
      }
    }
  }
  HY_RETURN_IF_ERROR(rec->Fetch(needs));
  for (auto& [host, device] : to_device) device.copy_(host);
  const recovery::RecoveryStats& st = rec->stats();
  char line[256];
  std::snprintf(line, sizeof(line),
                "recovered step %llu (saved by %d ranks) on %d ranks: scan "
                "%.3f s, verify %.3f s, read %.3f s, exchange %.3f s; rank 0 "
                "read %.1f MB locally, received %.1f MB in %d rounds (at "
                "most %.1f MB sent per round)",
                static_cast<unsigned long long>(rec->choice().commit.step),
                rec->choice().commit.world_size, comm_->world_size(),
                st.scan_seconds, st.verify_seconds, st.read_seconds,
                st.exchange_seconds, st.local_bytes / 1e6,
                st.received_bytes / 1e6, st.fetch_rounds,
                st.largest_round_bytes / 1e6);
  Log(line);
  if (const metrics::HyMetrics* m = options_.metrics) {
    using metrics::RecoveryPhase;
    m->recovery_duration(RecoveryPhase::kPlan)
        ->Observe(st.scan_seconds + st.verify_seconds);
    m->recovery_duration(RecoveryPhase::kRead)->Observe(st.read_seconds);
    m->recovery_duration(RecoveryPhase::kReshard)->Observe(st.exchange_seconds);
    const char* detect = std::getenv("HY_DETECT_SECONDS");
    if (detect != nullptr) {
      m->recovery_duration(RecoveryPhase::kDetect)->Observe(std::atof(detect));
    }
    if (IsRestart()) {
      // hyctl train names the cause of the restart; a launcher that does
      // not (torchrun) restarts after a process exit.
      const char* cause = std::getenv("HY_RESTART_CAUSE");
      Result<metrics::RestartCause> c =
          metrics::ParseRestartCause(cause != nullptr ? cause : "process_exit");
      m->recoveries(c.ok() ? *c : metrics::RestartCause::kProcessExit)
          ->Increment();
    }
  }
  recovered_step_ = static_cast<int64_t>(rec->choice().commit.step);
  return Status::OK();
}

Status PpoWorker::ApplyStoredState(const std::string& state_text,
                                   const std::string& config_text) {
  HY_ASSIGN_OR_RETURN(TrainConfig stored, ParseConfigYaml(config_text));
  if (!SameArchitecture(stored.model, config_.model)) {
    return Status::InvalidArgument(
        "resume: the store's model config differs from this run's");
  }
  nlohmann::json state = nlohmann::json::parse(state_text, nullptr, false);
  if (state.is_discarded() || !state.is_object()) {
    return Status::DataLoss("resume: trainer.state is not JSON");
  }
  try {
    start_iteration_ = state.at("iteration").get<int64_t>();
    // Checkpoints before data positions: every iteration took batch_size.
    data_position_ =
        state.contains("data_position")
            ? state.at("data_position").get<uint64_t>()
            : static_cast<uint64_t>(start_iteration_) *
                  static_cast<uint64_t>(config_.rollout.batch_size);
    actor_->adam_step() = state.at("actor_step").get<int64_t>();
    rollout_->Restore(start_iteration_, state);
    if (critic_ != nullptr) {
      if (!state.contains("critic_step")) {
        return Status::InvalidArgument(
            "resume: the store's run trained no critic (algorithm."
            "adv_estimator: grpo); this run's gae needs one: resume with grpo "
            "or start a new run");
      }
      critic_->adam_step() = state.at("critic_step").get<int64_t>();
    }
    const double coef = state.at("kl_coef").get<double>();
    const AlgorithmConfig& ac = config_.algorithm;
    if (ac.kl_ctrl_type == "adaptive") {
      HY_ASSIGN_OR_RETURN(
          KlController k,
          KlController::Adaptive(coef, ac.kl_target, ac.kl_horizon));
      kl_ = std::make_unique<KlController>(k);
    } else {
      kl_ = std::make_unique<KlController>(KlController::Fixed(coef));
    }
  } catch (const std::exception& e) {
    return Status::DataLoss(std::string("resume: trainer.state: ") + e.what());
  }
  return Status::OK();
}

Status PpoWorker::SaveCheckpoint(int64_t next_iteration,
                                 IterationReport* report) {
  const auto start = Clock::now();
  std::vector<statestore::ShardData> shards =
      actor_->ShardsForSave(kActorPrefix, true);
  if (critic_ != nullptr) {
    for (auto& s : critic_->ShardsForSave(kCriticPrefix, true)) {
      shards.push_back(std::move(s));
    }
  }
  std::vector<statestore::ShardData> ref_shards =
      ref_->ShardsForSave(kRefPrefix, false);
  std::function<void()> after_read = ReleaseReferenceAsRead(&ref_shards);
  for (auto& s : ref_shards) shards.push_back(std::move(s));
  nlohmann::json state = {
      {"iteration", next_iteration},       {"actor_step", actor_->adam_step()},
      {"kl_coef", kl_->value()},           {"seed", config_.trainer.seed},
      {"world_size", comm_->world_size()}, {"data_position", data_position_},
  };
  if (critic_ != nullptr) state["critic_step"] = critic_->adam_step();
  rollout_->SaveState(&state);
  const std::string state_text = state.dump();
  const std::string config_text = ToYaml(config_);
  // Where every rank's part lives: its node, and the nodes holding its
  // replicas (the ring rule of hy/recovery/node_layout.h).
  nlohmann::json placement = {{"nodes", nodes_},
                              {"hosts", hosts_},
                              {"replicas", config_.checkpoint.replicas}};
  for (int r = 0; r < comm_->world_size(); ++r) {
    std::vector<int> holders;
    for (int h :
         recovery::ReplicaHolderRanks(r, nodes_, config_.checkpoint.replicas)) {
      holders.push_back(nodes_[h]);
    }
    placement["replica_nodes"].push_back(holders);
  }
  const std::string placement_text = placement.dump();
  std::vector<statestore::BlobData> blobs(4);
  blobs[0].name = "trainer.state";
  blobs[0].data = ConstBytes(state_text);
  blobs[1].name = "trainer.config";
  blobs[1].data = ConstBytes(config_text);
  blobs[2].name = "recovery.placement";
  blobs[2].data = ConstBytes(placement_text);
  blobs[3].name = std::string(kTokensBlob);  // What export-hf and eval use.
  blobs[3].data = ConstBytes(tokens_text_);
  if (!hf_config_text_.empty()) {  // What export-hf writes back.
    blobs.emplace_back();
    blobs.back().name = std::string(kHfConfigBlob);
    blobs.back().data = ConstBytes(hf_config_text_);
  }
  HY_RETURN_IF_ERROR(checkpointer_->Save(
      static_cast<uint64_t>(next_iteration), std::move(shards),
      std::move(blobs), "fsdp=" + std::to_string(comm_->world_size()),
      rules_yaml_, std::move(after_read)));
  // A save that copied the moments has read them (one that reads in place
  // hands them back chunk by chunk).
  if (!config_.checkpoint.read_in_place) ReleaseOptimizer();
  report->checkpoint_ms += Seconds(start) * 1000.0;
  report->checkpoint_state = "saving " + std::to_string(next_iteration);
  return Status::OK();
}

void PpoWorker::WaitForCheckpointRead(IterationReport* report) {
  const auto start = Clock::now();
  checkpointer_->WaitRead();
  const double waited = Seconds(start);
  report->checkpoint_ms += waited * 1000.0;
  if (checkpoint_blocking_s_ >= 0) {
    checkpoint_blocking_s_ += waited;
    ObserveCheckpointBlocking();
  }
}

void PpoWorker::ObserveCheckpointBlocking() {
  if (options_.metrics != nullptr) {
    options_.metrics->checkpoint_blocking->Observe(checkpoint_blocking_s_);
  }
  checkpoint_blocking_s_ = -1;
}

}  // namespace hy::trainer
