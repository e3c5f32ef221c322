#include "hy/metrics/tensorboard/event_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "event.pb.h"
#include "record_io.h"

namespace hy::metrics::tensorboard {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "events.out.tfevents.";

double WallTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    return "localhost";
  }
  return host;
}

// The unix time in "events.out.tfevents.<time>...", or -1.
int64_t TimeInName(const std::string& name) {
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  const char* start = name.c_str() + kPrefix.size();
  char* end = nullptr;
  const long long t = std::strtoll(start, &end, 10);
  return end == start ? -1 : static_cast<int64_t>(t);
}

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

Result<std::string> NextEventFileName(const std::string& dir) {
  int64_t t = static_cast<int64_t>(WallTime());
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const int64_t other = TimeInName(it->path().filename().string());
    if (other >= t) t = other + 1;
  }
  if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
  return std::string(kPrefix) + std::to_string(t) + "." + HostName() + "." +
         std::to_string(getpid()) + ".hy";
}

Result<std::unique_ptr<EventWriter>> EventWriter::Open(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("creating " + dir + ": " + ec.message());
  HY_ASSIGN_OR_RETURN(const std::string name, NextEventFileName(dir));
  const std::string path = (fs::path(dir) / name).string();
  // "x": never append to a file another process writes.
  std::FILE* file = std::fopen(path.c_str(), "wbx");
  if (file == nullptr) return Errno("creating", path);
  std::unique_ptr<EventWriter> w(new EventWriter(path, file));
  hy::tb::Event e;
  e.set_wall_time(WallTime());
  e.set_file_version("brain.Event:2");
  e.mutable_source_metadata()->set_writer("hy");
  HY_RETURN_IF_ERROR(w->Append(e.SerializeAsString()));
  HY_RETURN_IF_ERROR(w->Flush());
  return w;
}

EventWriter::~EventWriter() { Close().IgnoreError(); }

Status EventWriter::Append(const std::string& event_bytes) {
  if (file_ == nullptr) {
    return Status::FailedPrecondition("events file " + path_ + " is closed");
  }
  const std::string record = FrameRecord(event_bytes);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return Errno("writing", path_);
  }
  return Status::OK();
}

Status EventWriter::SessionStart(int64_t step) {
  hy::tb::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  e.mutable_session_log()->set_status(hy::tb::SessionLog::START);
  return Append(e.SerializeAsString());
}

Status EventWriter::Scalars(int64_t step,
                            const std::vector<TaggedValue>& values) {
  hy::tb::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  for (const TaggedValue& v : values) {
    hy::tb::Summary::Value* out = e.mutable_summary()->add_value();
    out->set_tag(v.tag);
    out->set_simple_value(static_cast<float>(v.value));
  }
  return Append(e.SerializeAsString());
}

Status EventWriter::Text(int64_t step, std::string_view tag,
                         std::string_view markdown) {
  hy::tb::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  hy::tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  hy::tb::SummaryMetadata* meta = v->mutable_metadata();
  meta->mutable_plugin_data()->set_plugin_name("text");
  meta->set_data_class(hy::tb::DATA_CLASS_TENSOR);
  hy::tb::TensorProto* t = v->mutable_tensor();
  t->set_dtype(hy::tb::DT_STRING);
  t->mutable_tensor_shape();  // Rank 0: no dims.
  t->add_string_val(std::string(markdown));
  return Append(e.SerializeAsString());
}

Status EventWriter::Flush() {
  if (file_ == nullptr) return Status::OK();
  if (std::fflush(file_) != 0) return Errno("flushing", path_);
  return Status::OK();
}

Status EventWriter::Close() {
  if (file_ == nullptr) return Status::OK();
  Status s = Flush();
  if (std::fclose(file_) != 0 && s.ok()) s = Errno("closing", path_);
  file_ = nullptr;
  return s;
}

}  // namespace hy::metrics::tensorboard
