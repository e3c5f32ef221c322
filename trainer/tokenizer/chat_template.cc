// ChatTemplate: finding a directory's chat template, and rendering through
// the reference renderer (python -m hy_chat.render) in a child process.

#include "hy/trainer/tokenizer/chat_template.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "hy/common/child_process.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

#ifndef HY_SOURCE_PYTHON_DIR
#define HY_SOURCE_PYTHON_DIR ""
#endif
#ifndef HY_DEFAULT_CHAT_PYTHON
#define HY_DEFAULT_CHAT_PYTHON "python3"
#endif

Result<std::string> ReadWhole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path.string() + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return Status::IOError(path.string() + ": read failed");
  return s.str();
}

// A temporary directory, removed with everything in it when destroyed.
class TempDir {
 public:
  static Result<TempDir> Make() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base ? base : "/tmp") +
                          "/hy-chat-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::IOError("chat template: mkdtemp(" + pattern +
                             "): " + std::strerror(errno));
    }
    return TempDir(pattern);
  }
  TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDir(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit TempDir(fs::path p) : path_(std::move(p)) {}
  fs::path path_;
};

std::string ChatPython() {
  const char* env = std::getenv("HY_CHAT_PYTHON");
  return env != nullptr && *env ? env : HY_DEFAULT_CHAT_PYTHON;
}

Status WriteRequests(const std::vector<ChatRequest>& requests,
                     const Json& variables, const fs::path& path) {
  std::ofstream out(path, std::ios::binary);
  out << Json{{"variables", variables}}.dump() << "\n";
  for (const ChatRequest& r : requests) {
    Json messages = Json::array();
    for (const ChatMessage& m : r.messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
    out << Json{{"messages", messages},
                {"add_generation_prompt", r.add_generation_prompt}}
               .dump(-1, ' ', false, Json::error_handler_t::replace)
        << "\n";
  }
  out.close();
  if (!out) return Status::IOError(path.string() + ": write failed");
  return Status::OK();
}

}  // namespace

Result<ChatTemplate> ChatTemplate::Load(const std::string& dir) {
  const fs::path jinja = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja)) {
    HY_ASSIGN_OR_RETURN(std::string text, ReadWhole(jinja));
    return ChatTemplate(dir, std::move(text), jinja.string());
  }
  const fs::path cfg = fs::path(dir) / "tokenizer_config.json";
  if (!fs::exists(cfg)) {
    return Status::NotFound(dir + ": no chat_template.jinja and no "
                            "tokenizer_config.json (no chat template)");
  }
  HY_ASSIGN_OR_RETURN(std::string text, ReadWhole(cfg));
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument(cfg.string() + ": not a JSON object");
  }
  const std::string source = cfg.string() + ": chat_template";
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) {
    return Status::NotFound(dir + ": no chat_template.jinja, and " +
                            cfg.string() + " has no \"chat_template\"");
  }
  if (it->is_string()) {
    return ChatTemplate(dir, it->get<std::string>(), source);
  }
  if (it->is_array()) {
    for (const Json& e : *it) {
      if (e.is_object() && e.value("name", "") == "default" &&
          e.contains("template") && e["template"].is_string()) {
        return ChatTemplate(dir, e["template"].get<std::string>(),
                            source + "[default]");
      }
    }
  }
  return Status::InvalidArgument(
      source + " is neither a string nor a list with a \"default\" entry");
}

Result<RenderedChats> ChatTemplate::Render(
    const std::vector<ChatRequest>& requests,
    const std::string& variables_json) const {
  const Json variables =
      Json::parse(variables_json, nullptr, /*allow_exceptions=*/false);
  if (variables.is_discarded() || !variables.is_object()) {
    return Status::InvalidArgument("chat template variables: not a JSON "
                                   "object: " + variables_json);
  }
  HY_ASSIGN_OR_RETURN(TempDir tmp, TempDir::Make());
  const fs::path in = tmp.path() / "in.jsonl", out = tmp.path() / "out.jsonl",
                 log = tmp.path() / "log";
  HY_RETURN_IF_ERROR(WriteRequests(requests, variables, in));
  const std::string python = ChatPython();
  ChildOptions child;
  child.argv = {python, "-m", "hy_chat.render", dir_, in.string(),
                out.string()};
  child.pythonpath_first = HY_SOURCE_PYTHON_DIR;
  child.stderr_file = log.string();
  auto renderer = ChildProcess::Start(child);
  const int rc = renderer.ok() ? (*renderer)->Wait() : -1;
  if (rc != 0) {
    auto said = ReadWhole(log);
    std::string tail = !renderer.ok() ? std::string(renderer.status().message())
                       : said.ok()    ? *said
                                      : "";
    if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    const std::string what =
        "chat template " + source_ + ": the renderer (" + python +
        " -m hy_chat.render; HY_CHAT_PYTHON chooses the interpreter) " +
        (rc < 0 ? std::string("did not run") : "exited " + std::to_string(rc)) +
        (tail.empty() ? "" : ": " + tail);
    return rc == 4 ? Status::InvalidArgument(what)
                   : Status::FailedPrecondition(what);
  }
  HY_ASSIGN_OR_RETURN(std::string body, ReadWhole(out));
  std::istringstream lines(body);
  std::string line;
  RenderedChats result;
  bool header = true;
  while (std::getline(lines, line)) {
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return Status::Internal("chat template: the renderer wrote a line "
                              "that is not a JSON object");
    }
    if (header) {
      header = false;
      if (j.value("template", "") != text_) {
        return Status::InvalidArgument(
            "chat template " + source_ +
            ": transformers loads another template from " + dir_ +
            " than this file holds");
      }
      if (j.contains("turn_end") && j["turn_end"].is_string()) {
        result.turn_end = j["turn_end"].get<std::string>();
      }
      continue;
    }
    const size_t index = result.texts.size();
    if (index >= requests.size()) break;  // Counted below.
    if (j.contains("error")) {
      const std::string& name = requests[index].name;
      return Status::InvalidArgument(
          (name.empty() ? "conversation " + std::to_string(index) : name) +
          ": chat template " + source_ + ": " + j["error"].get<std::string>());
    }
    result.texts.push_back(j.value("text", ""));
  }
  if (header || result.texts.size() != requests.size()) {
    return Status::Internal("chat template: the renderer answered " +
                            std::to_string(result.texts.size()) + " of " +
                            std::to_string(requests.size()) +
                            " conversations");
  }
  return result;
}

}  // namespace hy::trainer
