// One chart of `hyctl plot` drawn with cairo: a frame, nice tick values on
// both axes with their labels, light grid lines, a title, a legend, and
// line (or stacked-area) series. Used by run_plot.cc.
//
// Ownership: DrawPanel draws on the caller's cairo context and keeps
// nothing. Thread-safety: plain functions.

#ifndef HY_CLI_METRICS_PLOT_PANEL_H_
#define HY_CLI_METRICS_PLOT_PANEL_H_

#include <cairo.h>

#include <string>
#include <vector>

namespace hy::cli {

struct PlotPoint {
  double x = 0;
  double y = 0;  // NaN: a gap in the line.
};

struct PlotSeries {
  std::string label;
  std::vector<PlotPoint> points;  // Ordered by x.
  double rgb[3] = {0, 0, 0};
  bool markers = false;  // Dots at the points (few points: validations).
  bool dashed = false;
};

struct PlotRect {
  double x = 0, y = 0, width = 0, height = 0;
};

// Tick values for [lo, hi]: about `target` steps of 1, 2 or 5 times a power
// of ten, covering the range; *step gets the spacing.
// REQUIRES: lo and hi finite, target >= 1.
std::vector<double> NiceTicks(double lo, double hi, int target, double* step);

// Draws `series` in `area` (the whole panel, labels included) over x from
// `x_lo` to `x_hi` (widened to whole ticks; x values are steps, so ticks are
// whole numbers). `stacked`: each series is drawn as a filled band on top of
// the ones before it (a missing or NaN value counts as 0).
// REQUIRES: x_lo <= x_hi.
void DrawPanel(cairo_t* cr, const PlotRect& area, const std::string& title,
               const std::string& x_label, double x_lo, double x_hi,
               const std::vector<PlotSeries>& series, bool stacked);

}  // namespace hy::cli

#endif  // HY_CLI_METRICS_PLOT_PANEL_H_
