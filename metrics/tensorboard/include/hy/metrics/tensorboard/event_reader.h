// Reading TensorBoard events files back (what EventWriter writes, or any
// writer of scalars and text): one file record by record, with both CRCs
// of every record checked, and a whole directory as TensorBoard shows it
// (its files in name order, a SessionLog START dropping the points read so
// far at steps >= its step, text included, as the loader behind
// TensorBoard's web UI does: plugin_event_accumulator.py, purge_orphaned_data
// and _CheckForRestartAndMaybePurge).
//
// Only the parts hy uses are decoded: scalars (simple_value, or a rank-0
// float / double tensor), text (a string tensor whose metadata names the
// "text" plugin), SessionLog START and the file version; other events are
// counted and skipped.
//
// Thread-safety: plain functions over values.

#ifndef HY_METRICS_TENSORBOARD_EVENT_READER_H_
#define HY_METRICS_TENSORBOARD_EVENT_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"

namespace hy::metrics::tensorboard {

// One event, reduced to what hy reads.
struct ReadEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;    // Set in a file's first event.
  bool session_start = false;  // SessionLog START.
  std::map<std::string, float> scalars;
  std::map<std::string, std::string> texts;
};

struct EventFile {
  std::string path;
  std::vector<ReadEvent> events;
  int64_t records = 0;  // Every record read, the skipped kinds included.
  // Bytes after the last whole record that do not make one: a record cut
  // short by a writer that was killed mid-write (0 for a clean file).
  int64_t truncated_tail_bytes = 0;
};

// Reads `path`. A record whose length or data CRC does not match, or whose
// bytes are no Event, is DataLoss naming the file and the record's offset;
// a last record cut short is not an error (EventFile::truncated_tail_bytes).
// Returns IOError / NotFound when the file cannot be read.
Result<EventFile> ReadEventFile(const std::string& path);
// The same for a file's bytes already in memory; `path` names it in errors.
Result<EventFile> ParseEventFile(std::string_view bytes,
                                 const std::string& path);

struct ScalarPoint {
  int64_t step = 0;
  double wall_time = 0;
  float value = 0;
};

struct TextPoint {
  int64_t step = 0;
  std::string text;
};

// A directory of events files as TensorBoard shows it.
struct RunEvents {
  std::vector<std::string> files;  // Read, in name order.
  // Per tag, the points in the order read, after the purges.
  std::map<std::string, std::vector<ScalarPoint>> scalars;
  std::map<std::string, std::vector<TextPoint>> texts;
  int64_t session_starts = 0;
  int64_t purged_points = 0;  // Scalars and texts dropped by SessionStarts.
  int64_t truncated_tail_bytes = 0;  // Summed over the files.
};

// True for a file name TensorBoard reads as an events file (it contains
// "tfevents").
bool IsEventFileName(const std::string& name);

// Reads every events file directly in `dir`, in name order. Returns
// NotFound when `dir` does not exist, and ReadEventFile's errors.
Result<RunEvents> ReadRunEvents(const std::string& dir);

}  // namespace hy::metrics::tensorboard

#endif  // HY_METRICS_TENSORBOARD_EVENT_READER_H_
