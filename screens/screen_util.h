// What the screens share: the finding each returns, column statistics lookup for a compared
// column (through the group's search_path) and the value a comparison compares with. Internal
// to screens/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "guards/guard.h"
#include "screens/screen.h"

namespace pgwarden::screens::detail {

// The table a column of the statement resolved to, as the catalog knows it. The names view the
// statement's analysis and the group's settings (alive while the screens run); the joined name is
// built only for a finding, as most results are screened without one.
struct ResolvedColumn {
  const analysis::TableStats* table = nullptr;
  const analysis::ColumnStats* column = nullptr;
  std::string_view schema;
  std::string_view name;
  std::string tableName() const;  // "public.fct_shipments"
};

// The statistics of `column` of FROM item `table` (-1: whichever single table has that column).
ResolvedColumn resolveColumn(const ScreenInput& in, int table, const std::string& column);

// The text a comparison value stands for: the constant, or the bound parameter; null when unknown
// (and for a relative time: foldedDay()).
const std::string* valueText(const ScreenInput& in, const analysis::ScreenValue& v);

// A relative time (now() - interval '30 days') folded to the day it names today, "2026-11-06",
// moved `slack_days` further (a day either way keeps the server's time zone from mattering).
std::string foldedDay(const analysis::ScreenValue& v, int slack_days);

// The statistics of `column` of the table `schema`.`name` (as written) wherever the group's
// search_path finds it.
ResolvedColumn resolveTable(const ScreenInput& in, const std::string& schema,
                            const std::string& name, const std::string& column);

// "'a', 'b', 'c'" or "a, b, c" (quoted when `quote`), at most `max` items and "(N in all)".
std::string listValues(const std::vector<std::string>& values, bool quote, size_t max = 20);
// `v` as an SQL string literal ('...', quotes doubled) for the hints' statements.
std::string quoteLiteral(std::string_view v);

// UNFILTERED speaks about tables of at least this many estimated rows.
inline constexpr int64_t kBigTableRows = 10000;

using Findings = std::vector<guards::GuardResult>;

void unknownValue(const ScreenInput& in, Findings& out);
void outOfRange(const ScreenInput& in, Findings& out);
void unfiltered(const ScreenInput& in, Findings& out);
void arbitraryRows(const ScreenInput& in, Findings& out);
void partialResult(const ScreenInput& in, Findings& out);
void fanoutJoin(const ScreenInput& in, Findings& out);
void statementIssues(const ScreenInput& in, Findings& out);
void timestampBound(const ScreenInput& in, Findings& out);
void foreignKeyMismatch(const ScreenInput& in, Findings& out);
void softDeletes(const ScreenInput& in, Findings& out);
void conditionsExclude(const ScreenInput& in, Findings& out);
void assertionFailed(const ScreenInput& in, Findings& out);
// Whether the group's result_assertions were broken (values out of bounds, a row count).
bool assertionsBroken(const ResultSummary& r);

// The statement's screened text with [location, location + length) replaced: the corrected
// statement a hint shows; empty when the text is not at hand (cut for history).
std::string correctedStatement(const ScreenInput& in, int location, int length,
                               std::string_view replacement);

}  // namespace pgwarden::screens::detail
