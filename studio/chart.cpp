// SVG charts. Sizes are in viewBox units; the SVG scales to its container's width.
#include "studio/chart.h"

#include <algorithm>
#include <cstdio>

#include "history/report_format.h"

namespace pgwarden::studio {

namespace {

constexpr const char* kPalette[] = {"#3b6ea5", "#d9822b", "#4f9a57", "#b8433e",
                                    "#7a5ea8", "#8c6d46", "#c7579e", "#6b7280"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string count(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string cut(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  size_t end = n;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;  // whole UTF-8
  return std::string(s.substr(0, end)) + "…";
}

void open(std::string& out, std::string_view title, int width, int height) {
  out += "<figure class=\"chart\"><figcaption>";
  history::appendHtmlEscaped(out, title);
  out += "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) +
         "\" preserveAspectRatio=\"xMinYMin meet\"><title>";
  history::appendHtmlEscaped(out, title);
  out += "</title>";
}

}  // namespace

std::string barChart(std::string_view title, const std::vector<Bar>& bars) {
  constexpr int kWidth = 640;
  constexpr int kLabel = 230;
  constexpr int kRow = 22;
  const int height = std::max<int>(kRow, static_cast<int>(bars.size()) * kRow) + 4;
  std::string out;
  open(out, title, kWidth, height);
  double top = 0;
  for (const auto& b : bars) top = std::max(top, b.value);
  if (bars.empty()) out += "<text x=\"4\" y=\"16\" class=\"empty\">nothing in this range</text>";
  int y = 2;
  for (const auto& b : bars) {
    const double w = top > 0 ? (kWidth - kLabel - 50) * b.value / top : 0;
    if (!b.href.empty()) {
      out += "<a href=\"";
      history::appendHtmlEscaped(out, b.href);
      out += "\">";
    }
    out += "<text x=\"" + std::to_string(kLabel - 6) + "\" y=\"" + std::to_string(y + 15) +
           "\" text-anchor=\"end\" class=\"label\">";
    history::appendHtmlEscaped(out, cut(b.label, 34));
    out += "</text><rect x=\"" + std::to_string(kLabel) + "\" y=\"" + std::to_string(y + 3) +
           "\" width=\"" + num(std::max(w, 1.0)) + "\" height=\"" + std::to_string(kRow - 6) +
           "\" fill=\"" + kPalette[0] + "\"/><text x=\"" + num(kLabel + w + 4) + "\" y=\"" +
           std::to_string(y + 15) + "\" class=\"value\">" + count(b.value) + "</text>";
    if (!b.href.empty()) out += "</a>";
    y += kRow;
  }
  out += "</svg></figure>\n";
  return out;
}

std::string stackedColumns(std::string_view title, const std::vector<std::string>& buckets,
                           const std::vector<std::string>& series,
                           const std::vector<std::vector<double>>& values) {
  constexpr int kWidth = 640;
  constexpr int kPlot = 180;
  constexpr int kLeft = 36;
  const int legend_rows = static_cast<int>((series.size() + 2) / 3);
  const int height = kPlot + 40 + legend_rows * 18;
  std::string out;
  open(out, title, kWidth, height);
  double top = 0;
  for (const auto& col : values) {
    double sum = 0;
    for (double v : col) sum += v;
    top = std::max(top, sum);
  }
  out += "<line x1=\"" + std::to_string(kLeft) + "\" y1=\"" + std::to_string(kPlot) + "\" x2=\"" +
         std::to_string(kWidth) + "\" y2=\"" + std::to_string(kPlot) + "\" class=\"axis\"/>";
  out += "<text x=\"" + std::to_string(kLeft - 4) +
         "\" y=\"12\" text-anchor=\"end\" class=\"value\">" + count(top) + "</text>";
  if (buckets.empty())
    out += "<text x=\"40\" y=\"90\" class=\"empty\">nothing in this range</text>";
  const double slot = buckets.empty() ? 0 : static_cast<double>(kWidth - kLeft) / buckets.size();
  for (size_t b = 0; b < buckets.size(); ++b) {
    double y = kPlot;
    const double x = kLeft + slot * b + slot * 0.1;
    for (size_t s = 0; s < series.size() && b < values.size() && s < values[b].size(); ++s) {
      if (values[b][s] <= 0) continue;
      const double h = top > 0 ? (kPlot - 10) * values[b][s] / top : 0;
      y -= h;
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(slot * 0.8) +
             "\" height=\"" + num(h) + "\" fill=\"" + kPalette[s % std::size(kPalette)] +
             "\"><title>";
      history::appendHtmlEscaped(out, buckets[b] + " " + series[s] + ": " + count(values[b][s]));
      out += "</title></rect>";
    }
  }
  // First and last bucket under the axis.
  if (!buckets.empty()) {
    out += "<text x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kPlot + 16) +
           "\" class=\"label\">";
    history::appendHtmlEscaped(out, buckets.front());
    out += "</text><text x=\"" + std::to_string(kWidth) + "\" y=\"" + std::to_string(kPlot + 16) +
           "\" text-anchor=\"end\" class=\"label\">";
    history::appendHtmlEscaped(out, buckets.back());
    out += "</text>";
  }
  for (size_t s = 0; s < series.size(); ++s) {
    const int x = kLeft + static_cast<int>(s % 3) * 200;
    const int y = kPlot + 30 + static_cast<int>(s / 3) * 18;
    out += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) +
           "\" width=\"12\" height=\"12\" fill=\"" + kPalette[s % std::size(kPalette)] +
           "\"/><text x=\"" + std::to_string(x + 16) + "\" y=\"" + std::to_string(y + 11) +
           "\" class=\"label\">";
    history::appendHtmlEscaped(out, cut(series[s].empty() ? "(none)" : series[s], 28));
    out += "</text>";
  }
  out += "</svg></figure>\n";
  return out;
}

}  // namespace pgwarden::studio
