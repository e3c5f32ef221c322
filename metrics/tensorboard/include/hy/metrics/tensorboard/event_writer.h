// EventWriter: one TensorBoard events file ("events.out.tfevents.<unix
// time>.<host>.<pid>.hy") that a process appends scalars and text to, in
// TensorBoard's own format: TFRecord framing (length, masked CRC32C of the
// length, the record, masked CRC32C of the record) around serialized
// `Event` protobufs (tensorboard/compat/proto/event.proto), the first one
// naming the file version "brain.Event:2".
//
// Each process start opens a new file in the run's directory; its name
// sorts after every events file already there (TensorBoard reads a
// directory's files in name order), so a resumed run's points come after the
// earlier ones. A resumed run writes SessionStart(step) before its first
// point: TensorBoard's reader then drops the earlier files' points at
// steps >= step (event_reader.h applies the same rule).
//
// Errors are values: IOError naming the file. A write reaches the file at
// Flush() (and at destruction); a process killed between two flushes loses
// only what it wrote since the last one, and leaves at most one truncated
// record at the end, which readers treat as the end of the file.
//
// Ownership: the writer owns its file. Thread-safety: none; one writer per
// file, used from one thread at a time.

#ifndef HY_METRICS_TENSORBOARD_EVENT_WRITER_H_
#define HY_METRICS_TENSORBOARD_EVENT_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy::metrics::tensorboard {

// A scalar's tag and value (written as float32, as TensorBoard stores
// scalars).
struct TaggedValue {
  std::string tag;
  double value = 0;
};

class EventWriter {
 public:
  // Creates `dir` (and its parents) when missing and a new events file in
  // it, named after every events file already there, and writes the
  // file-version event. Returns IOError when the directory or the file
  // cannot be created.
  static Result<std::unique_ptr<EventWriter>> Open(const std::string& dir);

  ~EventWriter();  // Flushes and closes; errors are dropped (see Close).
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // The file's path.
  const std::string& path() const { return path_; }

  // A SessionLog START event at `step`: TensorBoard's EventAccumulator
  // (purge_orphaned_data, on by default) drops every point it has read so
  // far (from earlier files) at a step >= `step`.
  Status SessionStart(int64_t step);

  // One event at `step` holding every value (float32 simple_value, shown by
  // TensorBoard's scalars plugin).
  Status Scalars(int64_t step, const std::vector<TaggedValue>& values);

  // A text-plugin value at `step`: a string tensor (rank 0) with metadata
  // plugin "text"; TensorBoard renders it as Markdown.
  Status Text(int64_t step, std::string_view tag, std::string_view markdown);

  // Hands what was written to the operating system (it survives the
  // process being killed; not an fsync).
  Status Flush();

  // Flushes and closes the file; later writes return FailedPrecondition.
  Status Close();

 private:
  EventWriter(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}
  Status Append(const std::string& event_bytes);

  std::string path_;
  std::FILE* file_;  // Null once closed.
};

// The name a new events file in `dir` gets: "events.out.tfevents." followed
// by the unix time in seconds, raised above the time in every events file
// name already in `dir` so that it sorts last, then ".<host>.<pid>.hy".
// Returns IOError when `dir` cannot be listed.
Result<std::string> NextEventFileName(const std::string& dir);

}  // namespace hy::metrics::tensorboard

#endif  // HY_METRICS_TENSORBOARD_EVENT_WRITER_H_
