// The studio's charts, drawn as inline SVG on the server (no script, no library): horizontal bars
// with a link each, and columns stacked by series over time. Labels are history text: escaped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::studio {

struct Bar {
  std::string label;
  double value = 0;
  std::string href;  // "" : not a link
};

// One bar per entry, longest first as given, scaled to the largest value.
std::string barChart(std::string_view title, const std::vector<Bar>& bars);

// Columns over `buckets` (x), each stacked by `series`; values[b][s]. A legend names the series.
std::string stackedColumns(std::string_view title, const std::vector<std::string>& buckets,
                           const std::vector<std::string>& series,
                           const std::vector<std::vector<double>>& values);

}  // namespace pgwarden::studio
