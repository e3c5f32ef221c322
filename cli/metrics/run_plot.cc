#include "metrics/run_plot.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace hy::cli {
namespace {

namespace tb = metrics::tensorboard;

// Matplotlib's "tab10" colours.
constexpr double kColors[][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173},
    {0.839, 0.153, 0.157}, {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294},
    {0.498, 0.498, 0.498},
};

enum Style { kLine, kDashed, kMarkers };

PlotSeries Make(const tb::RunEvents& run, const std::string& tag,
                const std::string& label, int color, Style style = kLine) {
  PlotSeries s;
  s.label = label;
  s.points = TagSeries(run, tag);
  for (int i = 0; i < 3; ++i) s.rgb[i] = kColors[color][i];
  s.markers = style == kMarkers;
  s.dashed = style == kDashed;
  return s;
}

// The iteration time minus its named parts (>= 0): setup of the
// experience, logging, waits.
PlotSeries Rest(const tb::RunEvents& run, const std::vector<PlotSeries>& parts,
                int color) {
  PlotSeries s = Make(run, "time/iteration_ms", "other", color);
  for (PlotPoint& p : s.points) {
    for (const PlotSeries& part : parts) {
      for (const PlotPoint& q : part.points) {
        if (q.x == p.x && std::isfinite(q.y)) p.y -= q.y;
      }
    }
    p.y = std::max(0.0, p.y);
  }
  return s;
}

}  // namespace

std::vector<PlotPoint> TagSeries(const tb::RunEvents& run,
                                 const std::string& tag) {
  std::map<int64_t, double> by_step;
  auto it = run.scalars.find(tag);
  if (it != run.scalars.end()) {
    for (const tb::ScalarPoint& p : it->second) by_step[p.step] = p.value;
  }
  std::vector<PlotPoint> out;
  for (const auto& [step, value] : by_step) {
    out.push_back({static_cast<double>(step), value});
  }
  return out;
}

Status PlotRun(const tb::RunEvents& run, const PlotOptions& o,
               const std::string& png_path) {
  if (o.width < 320 || o.height < 240 || o.width > 10000 || o.height > 10000) {
    return Status::InvalidArgument(
        "the picture must be 320x240 to 10000x10000 pixels, not " +
        std::to_string(o.width) + "x" + std::to_string(o.height));
  }
  if (TagSeries(run, "ppo/reward_mean").empty()) {
    return Status::FailedPrecondition(
        "no iteration in the run's TensorBoard events yet");
  }
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, o.width, o.height),
      &cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(
      cairo_create(surface.get()), &cairo_destroy);
  if (cairo_status(cr.get()) != CAIRO_STATUS_SUCCESS) {
    return Status::ResourceExhausted(
        std::string("cairo: ") +
        cairo_status_to_string(cairo_status(cr.get())));
  }
  cairo_set_source_rgb(cr.get(), 1, 1, 1);
  cairo_paint(cr.get());

  double top = 8;
  if (!o.title.empty()) {
    cairo_select_font_face(cr.get(), "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           CAIRO_FONT_WEIGHT_BOLD);
    cairo_set_font_size(cr.get(), 18);
    cairo_set_source_rgb(cr.get(), 0.1, 0.1, 0.1);
    cairo_move_to(cr.get(), 16, 28);
    cairo_show_text(cr.get(), o.title.c_str());
    top = 40;
  }
  const double pad = 12;
  const double cell_w = (o.width - 3 * pad) / 2;
  const double cell_h = (o.height - top - 2 * pad) / 2;
  auto cell = [&](int col, int row) {
    return PlotRect{pad + col * (cell_w + pad), top + row * (cell_h + pad),
                    cell_w, cell_h};
  };
  // One x range for every chart: from the first validation (0, before the
  // first iteration) or iteration to the last.
  const std::vector<PlotPoint> steps = TagSeries(run, "ppo/reward_mean");
  const std::vector<PlotPoint> vals = TagSeries(run, "val/exact_match");
  double x_lo = steps.front().x, x_hi = steps.back().x;
  if (!vals.empty()) {
    x_lo = std::min(x_lo, vals.front().x);
    x_hi = std::max(x_hi, vals.back().x);
  }
  const std::string x = "iteration";
  DrawPanel(cr.get(), cell(0, 0), "Reward and exact match", x, x_lo, x_hi,
            {Make(run, "ppo/reward_mean", "reward (train)", 0),
             Make(run, "ppo/exact_match", "exact match (train)", 1, kDashed),
             Make(run, "val/exact_match", "exact match (held-out, greedy)", 3,
                  kMarkers)},
            false);
  DrawPanel(cr.get(), cell(1, 0), "KL (policy vs reference, per token)", x,
            x_lo, x_hi, {Make(run, "ppo/kl", "KL", 4)}, false);
  DrawPanel(cr.get(), cell(0, 1), "Losses", x, x_lo, x_hi,
            {Make(run, "ppo/policy_loss", "policy loss", 0),
             Make(run, "ppo/value_loss", "value loss", 1)},
            false);
  std::vector<PlotSeries> parts = {
      Make(run, "time/reshard_ms", "reshard", 4),
      Make(run, "time/rollout_ms", "rollout", 0),
      Make(run, "time/weight_sync_ms", "weight sync (vLLM)", 5),
      Make(run, "time/train_ms", "update", 2),
      Make(run, "checkpoint/blocking_ms", "checkpoint (blocking)", 3)};
  parts.push_back(Rest(run, parts, 6));
  // A run on hy's own rollout has no weight sync series: no legend entry.
  parts.erase(std::remove_if(parts.begin(), parts.end(),
                             [](const PlotSeries& p) { return p.points.empty(); }),
              parts.end());
  DrawPanel(cr.get(), cell(1, 1), "Iteration time (ms)", x, x_lo, x_hi, parts,
            true);

  cairo_surface_flush(surface.get());
  const cairo_status_t s =
      cairo_surface_write_to_png(surface.get(), png_path.c_str());
  if (s != CAIRO_STATUS_SUCCESS) {
    return Status::IOError("writing " + png_path + ": " +
                           cairo_status_to_string(s));
  }
  return Status::OK();
}

}  // namespace hy::cli
