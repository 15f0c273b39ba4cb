// TIMESTAMP_DATE_BOUND: a timestamp column's range that ends at a bare date (`<= '2024-01-31'`,
// `BETWEEN ... AND '2024-01-31'`) ends at that day's midnight, so the rest of the last day is left
// out. Needs the column's type from the catalog; the hint ends the range before the next day.
#include <chrono>
#include <cstdio>

#include "guards/codes.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {

// "2024-01-31" -> "2024-02-01"; empty when `s` is not a plain date.
std::string nextDay(std::string_view s) {
  int y = 0;
  unsigned m = 0, d = 0;
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return {};
  for (size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u}) {
    if (s[i] < '0' || s[i] > '9') return {};
  }
  y = std::stoi(std::string(s.substr(0, 4)));
  m = static_cast<unsigned>(std::stoi(std::string(s.substr(5, 2))));
  d = static_cast<unsigned>(std::stoi(std::string(s.substr(8, 2))));
  const std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{m}, std::chrono::day{d}};
  if (!ymd.ok()) return {};
  const std::chrono::year_month_day next{std::chrono::sys_days{ymd} + std::chrono::days{1}};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(next.year()),
                static_cast<unsigned>(next.month()), static_cast<unsigned>(next.day()));
  return buf;
}

// The column as the statement wrote it at `location` (a plain or qualified, maybe quoted, name).
std::string_view writtenColumn(std::string_view sql, int location) {
  size_t i = static_cast<size_t>(location);
  while (i < sql.size()) {
    const char c = sql[i];
    if (c == '"') {
      const size_t close = sql.find('"', i + 1);
      if (close == std::string_view::npos) return {};
      i = close + 1;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
               static_cast<unsigned char>(c) >= 0x80) {
      ++i;
    } else {
      break;
    }
  }
  return sql.substr(static_cast<size_t>(location), i - static_cast<size_t>(location));
}

}  // namespace

void timestampBound(const ScreenInput& in, Findings& out) {
  const auto& cmps = in.statement->screen.comparisons;
  for (size_t i = 0; i < cmps.size(); ++i) {
    const analysis::ScreenComparison& c = cmps[i];
    if (c.op != analysis::ScreenComparison::Op::kUpper || c.location < 0 || c.values.size() != 1 ||
        c.values[0].param != 0 || c.values[0].null) {
      continue;
    }
    const std::string next = nextDay(c.values[0].text);
    if (next.empty()) continue;
    const ResolvedColumn col = resolveColumn(in, c.table, c.column);
    if (!col.column || col.column->type.rfind("timestamp", 0) != 0) continue;
    const std::string_view written = writtenColumn(in.sql, c.location);
    std::string fix;
    if (!written.empty()) {
      const std::string w(written);
      if (c.between && i > 0 && cmps[i - 1].op == analysis::ScreenComparison::Op::kLower &&
          cmps[i - 1].values.size() == 1 && cmps[i - 1].values[0].param == 0) {
        fix = w + " >= " + quoteLiteral(cmps[i - 1].values[0].text) + " AND " + w + " < " +
              quoteLiteral(next);
      } else if (!c.between) {
        fix = w + " < " + quoteLiteral(next);
      }
    }
    guards::GuardResult r;
    r.code = std::string(guards::codes::kTimestampDateBound);
    r.subject = c.column;
    r.message = c.column + " is a timestamp, and a range that ends at '" + c.values[0].text + "' ends at " +
                c.values[0].text + " 00:00:00: the rest of that day is left out. End the range with < '" +
                next + "'.";
    r.facts.add("table", col.tableName())
        .add("column", c.column)
        .add("type", col.column->type)
        .add("range_ends", c.values[0].text)
        .add("next_step", "end the range with < '" + next + "'");
    if (!fix.empty()) r.hint = correctedStatement(in, c.location, c.length, fix);
    out.push_back(std::move(r));
  }
}

}  // namespace pgwarden::screens::detail
