// ReadEventFile: one events file, record by record (record_io.h), each
// decoded into a ReadEvent.

#include "hy/metrics/tensorboard/event_reader.h"

#include <fstream>
#include <sstream>

#include "event.pb.h"
#include "record_io.h"

namespace hy::metrics::tensorboard {
namespace {

// A summary value's scalar, from simple_value or a one-element float /
// double tensor.
bool ScalarOf(const hy::tb::Summary::Value& v, float* out) {
  if (v.has_simple_value()) {
    *out = v.simple_value();
    return true;
  }
  if (!v.has_tensor()) return false;
  const hy::tb::TensorProto& t = v.tensor();
  if (t.dtype() == hy::tb::DT_FLOAT && t.float_val_size() == 1) {
    *out = t.float_val(0);
    return true;
  }
  if (t.dtype() == hy::tb::DT_DOUBLE && t.double_val_size() == 1) {
    *out = static_cast<float>(t.double_val(0));
    return true;
  }
  return false;
}

ReadEvent Reduce(const hy::tb::Event& e) {
  ReadEvent out;
  out.wall_time = e.wall_time();
  out.step = e.step();
  if (e.has_file_version()) out.file_version = e.file_version();
  out.session_start = e.has_session_log() &&
                      e.session_log().status() == hy::tb::SessionLog::START;
  if (!e.has_summary()) return out;
  for (const hy::tb::Summary::Value& v : e.summary().value()) {
    float f = 0;
    if (v.has_tensor() && v.tensor().dtype() == hy::tb::DT_STRING &&
        v.metadata().plugin_data().plugin_name() == "text" &&
        v.tensor().string_val_size() > 0) {
      out.texts[v.tag()] = v.tensor().string_val(0);
    } else if (ScalarOf(v, &f)) {
      out.scalars[v.tag()] = f;
    }
  }
  return out;
}

}  // namespace

Result<EventFile> ReadEventFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open events file " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::IOError("reading " + path);
  return ParseEventFile(buf.str(), path);
}

Result<EventFile> ParseEventFile(std::string_view bytes,
                                 const std::string& path) {
  EventFile file;
  file.path = path;
  size_t offset = 0;
  while (true) {
    std::string_view data;
    size_t next = 0;
    const RecordParse r = ParseRecord(bytes, offset, &data, &next);
    const std::string where = path + ": record " +
                              std::to_string(file.records) + " at byte " +
                              std::to_string(offset);
    switch (r) {
      case RecordParse::kEnd:
        return file;
      case RecordParse::kTruncated:
        file.truncated_tail_bytes = static_cast<int64_t>(bytes.size() - offset);
        return file;
      case RecordParse::kBadLengthCrc:
        return Status::DataLoss(where + ": the length's CRC does not match");
      case RecordParse::kBadDataCrc:
        return Status::DataLoss(where + ": the data's CRC does not match");
      case RecordParse::kOk:
        break;
    }
    hy::tb::Event e;
    if (!e.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      return Status::DataLoss(where + ": not an Event protobuf");
    }
    file.events.push_back(Reduce(e));
    ++file.records;
    offset = next;
  }
}

}  // namespace hy::metrics::tensorboard
