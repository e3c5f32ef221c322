// ReadRunEvents: a directory of events files as TensorBoard's
// EventAccumulator shows it (files in name order; a SessionLog START at
// step s drops every point read so far at a step >= s; file version
// "brain.Event:2" and later, which every hy file declares).

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "hy/metrics/tensorboard/event_reader.h"

namespace hy::metrics::tensorboard {
namespace {

namespace fs = std::filesystem;

template <typename Point>
int64_t DropFrom(int64_t step, std::map<std::string, std::vector<Point>>* m) {
  int64_t dropped = 0;
  for (auto& [tag, points] : *m) {
    const auto keep_end =
        std::remove_if(points.begin(), points.end(),
                       [step](const Point& p) { return p.step >= step; });
    dropped += points.end() - keep_end;
    points.erase(keep_end, points.end());
  }
  return dropped;
}

}  // namespace

bool IsEventFileName(const std::string& name) {
  return name.find("tfevents") != std::string::npos;
}

Result<RunEvents> ReadRunEvents(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound("no events directory " + dir);
  }
  RunEvents run;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec) &&
        IsEventFileName(it->path().filename().string())) {
      run.files.push_back(it->path().string());
    }
  }
  if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
  std::sort(run.files.begin(), run.files.end());
  for (const std::string& path : run.files) {
    HY_ASSIGN_OR_RETURN(EventFile file, ReadEventFile(path));
    run.truncated_tail_bytes += file.truncated_tail_bytes;
    for (const ReadEvent& e : file.events) {
      if (e.session_start) {
        ++run.session_starts;
        run.purged_points += DropFrom(e.step, &run.scalars);
        run.purged_points += DropFrom(e.step, &run.texts);
      }
      for (const auto& [tag, value] : e.scalars) {
        run.scalars[tag].push_back({e.step, e.wall_time, value});
      }
      for (const auto& [tag, text] : e.texts) {
        run.texts[tag].push_back({e.step, text});
      }
    }
  }
  return run;
}

}  // namespace hy::metrics::tensorboard
