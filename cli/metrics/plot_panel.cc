#include "metrics/plot_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace hy::cli {
namespace {

constexpr double kFont = 13;       // Tick labels and legend.
constexpr double kTitleFont = 16;  // Panel titles.
constexpr double kDash[] = {6, 4};

// The plot area in pixels and the data range it shows.
struct Frame {
  double left = 0, top = 0, right = 0, bottom = 0;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  double px(double x) const {
    return left + (x - x_lo) / (x_hi - x_lo) * (right - left);
  }
  double py(double y) const {
    return bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top);
  }
};

void Font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(
      cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
      bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

std::string FormatTick(double v, double step) {
  char buf[32];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-4)) {
    std::snprintf(buf, sizeof(buf), "%.2g", v);
  } else {
    const int decimals =
        std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v == 0 ? 0.0 : v);
  }
  return buf;
}

double TextWidth(cairo_t* cr, const std::string& s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

// Stacked bands: for each series, the upper edge of its band at every x
// (the sum of it and the series before it).
std::vector<std::vector<PlotPoint>> StackTops(
    const std::vector<PlotSeries>& series) {
  std::map<double, double> total;
  std::vector<std::vector<PlotPoint>> tops;
  for (const PlotSeries& s : series) {
    for (const PlotPoint& p : s.points) {
      total[p.x] += std::isfinite(p.y) ? p.y : 0;
    }
    std::vector<PlotPoint> top;
    for (const auto& [x, y] : total) top.push_back({x, y});
    tops.push_back(std::move(top));
  }
  return tops;
}

// Ticks over whole steps: NiceTicks, or every step where that would split
// one.
std::vector<double> StepTicks(double lo, double hi, double* step) {
  std::vector<double> ticks = NiceTicks(lo, hi, 8, step);
  if (*step >= 1) return ticks;
  *step = 1;
  ticks.clear();
  for (double v = std::floor(lo); v <= std::ceil(hi); ++v) ticks.push_back(v);
  if (ticks.size() == 1) ticks.push_back(ticks[0] + 1);
  return ticks;
}

// Where each legend item starts (its left end and text baseline): right of
// the title when all fit there, else in rows below it. *bottom gets the
// last row's baseline.
std::vector<PlotPoint> LayoutLegend(cairo_t* cr,
                                    const std::vector<PlotSeries>& series,
                                    double left, double right, double title_w,
                                    double baseline, double* bottom) {
  std::vector<double> widths;
  double total = 0;
  for (const PlotSeries& s : series) {
    widths.push_back(32 + TextWidth(cr, s.label) + 16);
    total += widths.back();
  }
  std::vector<PlotPoint> at;
  *bottom = baseline;
  if (left + title_w + 24 + total <= right) {
    double x = right - total;
    for (double w : widths) {
      at.push_back({x, baseline});
      x += w;
    }
    return at;
  }
  double x = left, y = baseline + kFont + 8;
  for (double w : widths) {
    if (x > left && x + w > right) x = left, y += kFont + 8;
    at.push_back({x, y});
    x += w;
  }
  *bottom = y;
  return at;
}

void DrawLegend(cairo_t* cr, const std::vector<PlotSeries>& series,
                const std::vector<PlotPoint>& at, bool stacked) {
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const double x = at[i].x, y = at[i].y - kFont * 0.35;
    cairo_set_source_rgb(cr, s.rgb[0], s.rgb[1], s.rgb[2]);
    if (stacked) {
      cairo_rectangle(cr, x, y - 5, 24, 10);
      cairo_fill(cr);
    } else {
      cairo_set_dash(cr, kDash, s.dashed ? 2 : 0, 0);
      cairo_set_line_width(cr, 3);
      cairo_move_to(cr, x, y);
      cairo_line_to(cr, x + 24, y);
      cairo_stroke(cr);
      cairo_set_dash(cr, kDash, 0, 0);
      if (s.markers) {
        cairo_arc(cr, x + 12, y, 4, 0, 2 * M_PI);
        cairo_fill(cr);
      }
    }
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_move_to(cr, x + 30, at[i].y);
    cairo_show_text(cr, s.label.c_str());
  }
}

// Grid lines, tick labels and the x axis' label.
void DrawAxes(cairo_t* cr, const Frame& f, const std::vector<double>& x_ticks,
              double x_step, const std::vector<double>& y_ticks, double y_step,
              const std::string& x_label) {
  cairo_set_line_width(cr, 1);
  for (double v : y_ticks) {
    const double y = std::round(f.py(v)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, f.left, y);
    cairo_line_to(cr, f.right, y);
    cairo_stroke(cr);
    const std::string s = FormatTick(v, y_step);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_move_to(cr, f.left - 6 - TextWidth(cr, s), y + kFont * 0.35);
    cairo_show_text(cr, s.c_str());
  }
  for (double v : x_ticks) {
    const double x = std::round(f.px(v)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, x, f.top);
    cairo_line_to(cr, x, f.bottom);
    cairo_stroke(cr);
    const std::string s = FormatTick(v, x_step);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_move_to(cr, x - TextWidth(cr, s) / 2, f.bottom + kFont + 4);
    cairo_show_text(cr, s.c_str());
  }
  cairo_move_to(cr, (f.left + f.right - TextWidth(cr, x_label)) / 2,
                f.bottom + 2 * kFont + 8);
  cairo_show_text(cr, x_label.c_str());
}

void DrawBands(cairo_t* cr, const Frame& f,
               const std::vector<PlotSeries>& series,
               const std::vector<std::vector<PlotPoint>>& tops) {
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const std::vector<PlotPoint>& upper = tops[i];
    if (upper.empty()) continue;
    std::map<double, double> below;
    if (i > 0) {
      for (const PlotPoint& p : tops[i - 1]) below[p.x] = p.y;
    }
    cairo_move_to(cr, f.px(upper[0].x), f.py(upper[0].y));
    for (const PlotPoint& p : upper) cairo_line_to(cr, f.px(p.x), f.py(p.y));
    for (auto it = upper.rbegin(); it != upper.rend(); ++it) {
      const auto b = below.find(it->x);
      cairo_line_to(cr, f.px(it->x), f.py(b == below.end() ? 0 : b->second));
    }
    cairo_close_path(cr);
    cairo_set_source_rgba(cr, s.rgb[0], s.rgb[1], s.rgb[2], 0.75);
    cairo_fill(cr);
  }
}

void DrawLines(cairo_t* cr, const Frame& f,
               const std::vector<PlotSeries>& series) {
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  for (const PlotSeries& s : series) {
    cairo_set_source_rgb(cr, s.rgb[0], s.rgb[1], s.rgb[2]);
    cairo_set_line_width(cr, 2);
    cairo_set_dash(cr, kDash, s.dashed ? 2 : 0, 0);
    bool pen_down = false;
    for (const PlotPoint& p : s.points) {
      if (!std::isfinite(p.y)) {  // A gap.
        pen_down = false;
        continue;
      }
      if (pen_down) {
        cairo_line_to(cr, f.px(p.x), f.py(p.y));
      } else {
        cairo_move_to(cr, f.px(p.x), f.py(p.y));
      }
      pen_down = true;
    }
    cairo_stroke(cr);
    cairo_set_dash(cr, kDash, 0, 0);
    if (!s.markers && s.points.size() != 1) continue;
    for (const PlotPoint& p : s.points) {
      if (!std::isfinite(p.y)) continue;
      cairo_arc(cr, f.px(p.x), f.py(p.y), 4, 0, 2 * M_PI);
      cairo_fill(cr);
    }
  }
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target, double* step) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  *step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  std::vector<double> ticks;
  const double first = std::floor(lo / *step + 1e-9) * *step;
  for (double v = first; v < hi + *step * 0.999; v += *step) {
    ticks.push_back(std::fabs(v) < *step * 1e-9 ? 0 : v);
  }
  return ticks;
}

void DrawPanel(cairo_t* cr, const PlotRect& area, const std::string& title,
               const std::string& x_label, double x_lo, double x_hi,
               const std::vector<PlotSeries>& series, bool stacked) {
  cairo_save(cr);
  const std::vector<std::vector<PlotPoint>> tops =
      stacked ? StackTops(series) : std::vector<std::vector<PlotPoint>>{};
  // The y range of the data (of the stacked tops), from 0 when stacked.
  double y_lo = std::numeric_limits<double>::infinity(), y_hi = -y_lo;
  auto extend = [&](const std::vector<PlotPoint>& points) {
    for (const PlotPoint& p : points) {
      if (!std::isfinite(p.y)) continue;
      y_lo = std::min(y_lo, p.y);
      y_hi = std::max(y_hi, p.y);
    }
  };
  for (const PlotSeries& s : series) extend(s.points);
  for (const auto& t : tops) extend(t);
  const bool empty = !std::isfinite(y_lo);
  if (empty) y_lo = 0, y_hi = 1;
  if (stacked) y_lo = std::min(0.0, y_lo);
  double x_step = 1, y_step = 1;
  const std::vector<double> x_ticks = StepTicks(x_lo, x_hi, &x_step);
  const std::vector<double> y_ticks = NiceTicks(y_lo, y_hi, 5, &y_step);

  Frame f;
  f.x_lo = std::min(x_lo, x_ticks.front());
  f.x_hi = std::max(x_hi, x_ticks.back());
  f.y_lo = y_ticks.front();
  f.y_hi = y_ticks.back();
  // Room for the tick labels left and below, the title and legend above.
  Font(cr, kFont, false);
  double label_w = 0;
  for (double v : y_ticks) {
    label_w = std::max(label_w, TextWidth(cr, FormatTick(v, y_step)));
  }
  f.left = area.x + label_w + 14;
  f.right = area.x + area.width - 12;
  f.bottom = area.y + area.height - 2.6 * kFont - 8;
  const double title_baseline = area.y + kTitleFont + 2;
  Font(cr, kTitleFont, true);
  const double title_w = TextWidth(cr, title);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  cairo_move_to(cr, f.left, title_baseline);
  cairo_show_text(cr, title.c_str());
  Font(cr, kFont, false);
  double legend_bottom = title_baseline;
  const std::vector<PlotPoint> legend_at = LayoutLegend(
      cr, series, f.left, f.right, title_w, title_baseline, &legend_bottom);
  f.top = legend_bottom + 12;

  DrawAxes(cr, f, x_ticks, x_step, y_ticks, y_step, x_label);
  cairo_save(cr);
  cairo_rectangle(cr, f.left, f.top, f.right - f.left, f.bottom - f.top);
  cairo_clip(cr);
  if (stacked) {
    DrawBands(cr, f, series, tops);
  } else {
    DrawLines(cr, f, series);
  }
  cairo_restore(cr);
  cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, std::round(f.left) + 0.5, std::round(f.top) + 0.5,
                  std::round(f.right - f.left), std::round(f.bottom - f.top));
  cairo_stroke(cr);
  DrawLegend(cr, series, legend_at, stacked);
  if (empty) {
    const std::string none = "no data";
    cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
    cairo_move_to(cr, (f.left + f.right - TextWidth(cr, none)) / 2,
                  (f.top + f.bottom) / 2);
    cairo_show_text(cr, none.c_str());
  }
  cairo_restore(cr);
}

}  // namespace hy::cli
