// EngineClient over libcurl (see engine_client.h).

#include "hy/trainer/vllm/engine_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

namespace hy::trainer {
namespace {

using json = nlohmann::json;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct Handle {
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  std::string body;      // Request body (kept alive for curl).
  std::string response;  // Response body.
  char error[CURL_ERROR_SIZE] = {};
  ~Handle() {
    if (headers != nullptr) curl_slist_free_all(headers);
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

std::unique_ptr<Handle> MakeHandle(const std::string& url,
                                   const std::string& key, double timeout_s,
                                   const std::string* post_body) {
  GlobalInit();
  auto h = std::make_unique<Handle>();
  h->curl = curl_easy_init();
  curl_easy_setopt(h->curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &h->response);
  curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, h->error);
  curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(timeout_s * 1000));
  if (!key.empty()) {
    h->headers = curl_slist_append(
        h->headers, ("Authorization: Bearer " + key).c_str());
  }
  if (post_body != nullptr) {
    h->body = *post_body;
    h->headers = curl_slist_append(h->headers, "Content-Type: application/json");
    curl_easy_setopt(h->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, h->body.c_str());
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE,
                     static_cast<long>(h->body.size()));
  }
  curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->headers);
  return h;
}

// The status of a finished transfer: DeadlineExceeded when it timed out,
// Unavailable for another transport failure or a 5xx, Internal for
// another non-2xx.
Status Outcome(const Handle& h, CURLcode code, const std::string& what) {
  if (code != CURLE_OK) {
    const std::string msg =
        what + ": " +
        (h.error[0] != 0 ? std::string(h.error) : curl_easy_strerror(code));
    // No answer in time: a hung engine, not a gone one.
    return code == CURLE_OPERATION_TIMEDOUT ? Status::DeadlineExceeded(msg)
                                            : Status::Unavailable(msg);
  }
  long http = 0;
  curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &http);
  if (http >= 200 && http < 300) return Status::OK();
  const std::string msg = what + ": HTTP " + std::to_string(http) + ": " +
                          h.response.substr(0, 500);
  return http >= 500 ? Status::Unavailable(msg) : Status::Internal(msg);
}

Result<SampleResult> ParseCompletion(const std::string& body,
                                     size_t max_tokens) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("choices") ||
      !doc["choices"].is_array() || doc["choices"].empty()) {
    return Status::Internal("vLLM completion without choices: " +
                            body.substr(0, 300));
  }
  const json& c = doc["choices"][0];
  SampleResult r;
  if (!c.contains("token_ids") || !c["token_ids"].is_array()) {
    return Status::Internal("vLLM completion without token_ids");
  }
  for (const json& t : c["token_ids"]) {
    if (!t.is_number_integer()) return Status::Internal("bad token id");
    r.tokens.push_back(t.get<int>());
  }
  if (c.contains("logprobs") && c["logprobs"].is_object() &&
      c["logprobs"].contains("token_logprobs")) {
    for (const json& l : c["logprobs"]["token_logprobs"]) {
      r.logprobs.push_back(l.is_number() ? l.get<float>() : 0.0f);
    }
  }
  if (r.tokens.size() > max_tokens || r.logprobs.size() != r.tokens.size()) {
    return Status::Internal("vLLM completion: " +
                            std::to_string(r.tokens.size()) + " tokens, " +
                            std::to_string(r.logprobs.size()) +
                            " log-probs, at most " +
                            std::to_string(max_tokens) + " expected");
  }
  return r;
}

}  // namespace

EngineClient::EngineClient(std::string url, std::string api_key,
                           double timeout_s)
    : url_(std::move(url)), api_key_(std::move(api_key)),
      timeout_s_(timeout_s) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
}

Status EngineClient::Health(double timeout_s) const {
  auto h = MakeHandle(url_ + "/health", api_key_, timeout_s, nullptr);
  return Outcome(*h, curl_easy_perform(h->curl), url_ + "/health");
}

Result<std::string> EngineClient::Post(const std::string& path,
                                       const std::string& json_body) const {
  auto h = MakeHandle(url_ + path, api_key_, timeout_s_, &json_body);
  HY_RETURN_IF_ERROR(Outcome(*h, curl_easy_perform(h->curl), url_ + path));
  return std::move(h->response);
}

Status EngineClient::InitWeightTransfer(const std::string& path) const {
  json body = {{"init_info", {{"path", path}}}};
  return Post("/init_weight_transfer_engine", body.dump()).status();
}

Status EngineClient::UpdateWeights(const std::string& manifest_json,
                                   uint64_t file_size,
                                   const std::string& version) const {
  HY_RETURN_IF_ERROR(Post("/start_weight_update", "{}").status());
  json update = {{"update_info",
                  {{"manifest_json", manifest_json}, {"size", file_size}}}};
  Status s = Post("/update_weights", update.dump()).status();
  // A failed update still closes the session (the engine refuses a new
  // start while one is open); the update's error is the one reported.
  json finish = {{"weight_version", s.ok() ? version : std::string()}};
  Status f = Post("/finish_weight_update", finish.dump()).status();
  HY_RETURN_IF_ERROR(s);
  HY_RETURN_IF_ERROR(f);
  return Post("/reset_prefix_cache", "{}").status();
}

Result<std::string> EngineClient::WeightVersion() const {
  auto h = MakeHandle(url_ + "/weight_info", api_key_, timeout_s_, nullptr);
  HY_RETURN_IF_ERROR(
      Outcome(*h, curl_easy_perform(h->curl), url_ + "/weight_info"));
  json doc = json::parse(h->response, nullptr, false);
  if (!doc.is_object() || !doc.contains("weight_version")) {
    return Status::Internal("vLLM /weight_info: " + h->response);
  }
  const json& v = doc["weight_version"];
  return v.is_string() ? v.get<std::string>() : std::string();
}

Result<std::vector<SampleResult>> EngineClient::Generate(
    const std::string& model, const std::vector<SampleRequest>& requests,
    const SamplingParams& params) const {
  GlobalInit();
  CURLM* multi = curl_multi_init();
  std::unique_ptr<CURLM, CURLMcode (*)(CURLM*)> guard(multi,
                                                      &curl_multi_cleanup);
  std::vector<std::unique_ptr<Handle>> handles;
  for (const SampleRequest& r : requests) {
    json body = {{"prompt", r.prompt},
                 {"max_tokens", params.max_tokens},
                 {"temperature", params.temperature > 0 ? params.temperature
                                                        : 0.0},
                 {"top_p", params.top_p},
                 {"top_k", params.top_k > 0 ? params.top_k : -1},
                 {"seed", r.seed % (uint64_t{1} << 62)},
                 {"logprobs", 0},
                 {"return_token_ids", true},
                 {"stop_token_ids", params.stop_token_ids},
                 {"skip_special_tokens", false}};
    // No "model": vLLM takes the served one, whatever its
    // --served-model-name.
    if (!model.empty()) body["model"] = model;
    const std::string text = body.dump();
    handles.push_back(
        MakeHandle(url_ + "/v1/completions", api_key_, timeout_s_, &text));
    curl_multi_add_handle(multi, handles.back()->curl);
  }
  int running = 0;
  do {
    CURLMcode mc = curl_multi_perform(multi, &running);
    if (mc == CURLM_OK && running > 0) {
      mc = curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
    if (mc != CURLM_OK) {
      return Status::Internal(std::string("curl: ") + curl_multi_strerror(mc));
    }
  } while (running > 0);
  std::vector<CURLcode> codes(handles.size(), CURLE_OK);
  for (CURLMsg* m; (m = curl_multi_info_read(multi, &running)) != nullptr;) {
    if (m->msg != CURLMSG_DONE) continue;
    for (size_t i = 0; i < handles.size(); ++i) {
      if (handles[i]->curl == m->easy_handle) codes[i] = m->data.result;
    }
  }
  std::vector<SampleResult> out;
  Status first;
  for (size_t i = 0; i < handles.size(); ++i) {
    curl_multi_remove_handle(multi, handles[i]->curl);
    Status s = Outcome(*handles[i], codes[i], url_ + "/v1/completions");
    if (s.ok()) {
      Result<SampleResult> r = ParseCompletion(
          handles[i]->response, static_cast<size_t>(params.max_tokens));
      if (r.ok()) {
        out.push_back(std::move(r).value());
        continue;
      }
      s = r.status();
    }
    if (first.ok()) first = s;
  }
  if (!first.ok()) return first;
  return out;
}

}  // namespace hy::trainer
