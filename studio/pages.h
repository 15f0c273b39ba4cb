// The studio's HTML pages, rendered from what the store answered. Pure: no I/O, so tests render
// them from hand-made tables (hostile text included). Every value from history is escaped, every
// link is a /studio/ path with its values percent-encoded.
#pragma once

#include <string>
#include <string_view>

#include "history/report.h"
#include "studio/query.h"

namespace pgwarden::studio {

inline constexpr std::string_view kPrefix = "/studio/";

// The page around `body`: the header with the navigation and the live panel, the filter form
// (when `filters`), the script.
std::string layout(std::string_view title, std::string_view active, const Filter& f, bool filters,
                   const std::string& body);

std::string conversationsPage(const Filter& f, const history::ReportTable& rows);
std::string timelinePage(const Filter& f, const history::ReportTable& rows);
// A report's page: its chart and its rows with links to the conversations behind them. `extra`
// is what the chart needs beyond the rows (denials over time, zero results by table).
std::string reportPage(history::ReportKind kind, const Filter& f, const history::ReportTable& rows,
                       const history::ReportTable& extra);
std::string errorPage(std::string_view title, std::string_view message, const Filter& f);

}  // namespace pgwarden::studio
