// The shapes a report is printed in: an aligned text table (long text cut for a terminal), CSV
// (RFC 4180), JSON and a self-contained HTML page; every value of the store is escaped for the
// shape it goes into (history text is written by whoever sent the statement).
#pragma once

#include <string>
#include <string_view>

#include "history/report_reader.h"

namespace pgwarden::history {

enum class ReportFormat { kTable, kCsv, kJson, kHtml };
const char* reportFormatName(ReportFormat format);  // "table", "csv", "json", "html"
bool parseReportFormat(const std::string& name, ReportFormat* out);

// An aligned text table with a row count, as printed by default; long text is cut for display.
std::string formatReportText(const ReportTable& table);
// {"report": NAME, "rows": [{column: value, ...}, ...]}; numbers as numbers, text unabridged.
std::string formatReportJson(std::string_view name, const ReportTable& table);
// A header line and one line per row; fields with a comma, quote or line break are quoted.
std::string formatReportCsv(const ReportTable& table);
// A whole HTML document titled `title`, the table unabridged and escaped.
std::string formatReportHtml(std::string_view title, const ReportTable& table);
std::string formatReport(ReportFormat format, std::string_view name, const ReportTable& table);

// `s` safe as HTML text and as a quoted attribute value (& < > " ' escaped).
std::string htmlEscape(std::string_view s);
void appendHtmlEscaped(std::string& out, std::string_view s);

}  // namespace pgwarden::history
