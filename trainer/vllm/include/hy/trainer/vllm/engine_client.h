// EngineClient: one vLLM engine (its OpenAI-compatible server started with
// hy_vllm's worker extension and `hy_shm` weight-transfer backend, in
// development mode) driven over HTTP with libcurl: health, the weight
// update (init, start, update, finish with a version, prefix-cache reset)
// and generation from token ids through /v1/completions, one request per
// sample, all in flight at once (vLLM batches them). The protocol (the
// routes, their bodies and order, versions): docs/weight-sync.md.
//
// Every request carries the run's key (Authorization: Bearer). A refused
// connection or a 5xx is Unavailable (the engine is gone or sick: the
// caller waits for its restart and redoes the work), a request that timed
// out is DeadlineExceeded (the engine hangs: the caller has it killed and
// restarted); a 4xx or a response that does not parse is Internal, with
// the engine's message.
//
// Thread-safety: an EngineClient may be used from one thread at a time;
// distinct clients (engines) from distinct threads.

#ifndef HY_TRAINER_VLLM_ENGINE_CLIENT_H_
#define HY_TRAINER_VLLM_ENGINE_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy::trainer {

// One sample to generate.
struct SampleRequest {
  std::vector<int> prompt;  // Token ids.
  uint64_t seed = 0;        // vLLM's per-request sampling seed.
};

struct SamplingParams {
  int max_tokens = 1;
  double temperature = 1.0;  // <= 0: greedy.
  int top_k = 0;             // 0: off.
  double top_p = 1.0;
  std::vector<int> stop_token_ids;  // Kept in the output, as the last token.
};

struct SampleResult {
  std::vector<int> tokens;      // At most max_tokens, a stop token last.
  std::vector<float> logprobs;  // vLLM's log-prob of each token.
};

class EngineClient {
 public:
  // REQUIRES: url is http://host:port (no trailing slash needed).
  EngineClient(std::string url, std::string api_key, double timeout_s);

  const std::string& url() const { return url_; }

  // GET /health: OK when the server answers 200.
  Status Health(double timeout_s) const;

  // POST /init_weight_transfer_engine {"init_info": {"path": path}}.
  Status InitWeightTransfer(const std::string& path) const;

  // start_weight_update, update_weights (the manifest, the file's size),
  // finish_weight_update (version), reset_prefix_cache.
  Status UpdateWeights(const std::string& manifest_json, uint64_t file_size,
                       const std::string& version) const;

  // GET /weight_info: the version the last finished update set ("" when
  // none has: an engine that (re)started with dummy weights).
  Result<std::string> WeightVersion() const;

  // One completion per request, in order. `model`: the served name to
  // ask for; "" leaves "model" out of the request, which vLLM answers with
  // its served model whatever its --served-model-name (what hy does).
  Result<std::vector<SampleResult>> Generate(
      const std::string& model, const std::vector<SampleRequest>& requests,
      const SamplingParams& params) const;

  // POST `path` with a JSON body; the response's body.
  Result<std::string> Post(const std::string& path,
                           const std::string& json_body) const;

 private:
  std::string url_;
  std::string api_key_;
  double timeout_s_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_VLLM_ENGINE_CLIENT_H_
