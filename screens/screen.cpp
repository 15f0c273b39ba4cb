// The screens' dispatcher and shared helpers: which statements are worth screening, the group's
// action per code (off, warn, deny), and rendering a finding with the group's reason overrides.
#include "screens/screen.h"

#include <chrono>
#include <cstdio>

#include "guards/codes.h"
#include "guards/guard_util.h"
#include "screens/screen_util.h"

namespace pgwarden::screens {

namespace detail {

std::string ResolvedColumn::tableName() const {
  std::string out;
  out.reserve(schema.size() + 1 + name.size());
  return out.append(schema).append(".").append(name);
}

ResolvedColumn resolveColumn(const ScreenInput& in, int table, const std::string& column) {
  ResolvedColumn out;
  const auto& tables = in.statement->screen.tables;
  if (!in.stats || column.empty()) return out;
  static const guards::GroupSettings kNoGroup{};
  const guards::GroupSettings& settings = in.group ? in.group->settings() : kNoGroup;
  for (size_t i = 0; i < tables.size(); ++i) {
    if (table >= 0 && static_cast<size_t>(table) != i) continue;
    std::string_view schema;
    const analysis::TableStats* ts =
        guards::util::findStats(in.stats, tables[i].schema, tables[i].name, settings, &schema);
    if (!ts) continue;
    auto it = ts->columns.find(column);
    if (it == ts->columns.end()) continue;
    if (out.column) return {};  // two tables have the column: which one is meant is not known
    out = ResolvedColumn{ts, &it->second, schema, tables[i].name};
  }
  return out;
}

ResolvedColumn resolveTable(const ScreenInput& in, const std::string& schema,
                            const std::string& name, const std::string& column) {
  static const guards::GroupSettings kNoGroup{};
  if (!in.stats) return {};
  std::string_view found;
  const analysis::TableStats* ts = guards::util::findStats(
      in.stats, schema, name, in.group ? in.group->settings() : kNoGroup, &found);
  if (!ts) return {};
  auto it = ts->columns.find(column);
  if (it == ts->columns.end()) return {};
  return ResolvedColumn{ts, &it->second, found, name};
}

std::string foldedDay(const analysis::ScreenValue& v, int slack_days) {
  using namespace std::chrono;
  const sys_days today = floor<days>(system_clock::now());
  year_month_day d{today};
  if (v.rel_months != 0) {
    const year_month ym = year_month{d.year(), d.month()} + months{v.rel_months};
    const year_month_day moved{ym / d.day()};
    d = moved.ok() ? moved : year_month_day{ym / last};
  }
  const year_month_day out{sys_days{d} + days{v.rel_days + slack_days}};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(out.year()),
                static_cast<unsigned>(out.month()), static_cast<unsigned>(out.day()));
  return buf;
}

const std::string* valueText(const ScreenInput& in, const analysis::ScreenValue& v) {
  if (v.null || v.relative) return nullptr;
  if (v.param == 0) return &v.text;
  if (!in.params || static_cast<size_t>(v.param) > in.params->size()) return nullptr;
  const auto& p = (*in.params)[static_cast<size_t>(v.param) - 1];
  return p ? &*p : nullptr;
}

std::string quoteLiteral(std::string_view v) {
  std::string out = "'";
  for (char c : v) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

std::string listValues(const std::vector<std::string>& values, bool quote, size_t max) {
  std::string out;
  for (size_t i = 0; i < values.size() && i < max; ++i) {
    if (i) out += ", ";
    if (quote) out += '\'';
    out += values[i];
    if (quote) out += '\'';
  }
  if (values.size() > max) out += ", ... (" + std::to_string(values.size()) + " in all)";
  return out;
}

}  // namespace detail

namespace {

// A read of a table that names no soft-delete column, once some table in the catalog has one.
bool softDeleteCandidate(const analysis::ScreenFacts& f) {
  return !f.tables.empty() && !f.mentions_soft_delete && analysis::softDeleteColumnsSeen();
}

}  // namespace

bool worthScreening(const analysis::StatementInfo& st) {
  if (st.kind != analysis::StatementKind::kSelect || !st.returns_rows) return false;
  if (!st.screen.empty()) return true;
  if (softDeleteCandidate(st.screen)) return true;
  // UNFILTERED: a read that reaches the client with no predicate at all.
  for (const auto& r : st.relations) {
    if (r.unbounded_read && r.reaches_client) return true;
  }
  return false;
}

bool maySpeak(const analysis::StatementInfo& st, const ResultSummary& r) {
  if (r.truncated) return true;  // PARTIAL_RESULT
  if (r.checks && detail::assertionsBroken(r)) return true;  // ASSERTION_FAILED
  if (!worthScreening(st)) return false;
  const analysis::ScreenFacts& f = st.screen;
  if (nothingMatched(r, st) && !f.comparisons.empty()) return true;  // UNKNOWN_VALUE, OUT_OF_RANGE
  if (f.limit_without_order && r.rows == st.limit_value) return true;   // ARBITRARY_ROWS
  if (f.count_or_sum && f.joined) return true;                          // FANOUT_JOIN
  if (!f.join_keys.empty()) return true;                                // FOREIGN_KEY_MISMATCH
  if (softDeleteCandidate(f)) return true;                              // SOFT_DELETED_ROWS
  if (!f.issues.empty()) return true;  // the statement-only screens speak whatever the result
  for (const auto& c : f.comparisons) {
    if (c.location >= 0) return true;  // TIMESTAMP_DATE_BOUND, if the column is a timestamp
  }
  return r.rows >= detail::kBigTableRows * 9 / 10;                      // UNFILTERED
}

std::vector<guards::Verdict> screenResult(const ScreenInput& in) {
  std::vector<guards::Verdict> out;
  if (!in.statement || !maySpeak(*in.statement, in.result)) return out;
  detail::Findings found;
  detail::unknownValue(in, found);
  detail::outOfRange(in, found);
  detail::unfiltered(in, found);
  detail::arbitraryRows(in, found);
  detail::partialResult(in, found);
  detail::fanoutJoin(in, found);
  detail::statementIssues(in, found);
  detail::timestampBound(in, found);
  detail::foreignKeyMismatch(in, found);
  detail::softDeletes(in, found);
  detail::conditionsExclude(in, found);
  detail::assertionFailed(in, found);
  if (found.empty()) return out;
  static const guards::PolicyGroup kDefaultGroup("", {}, {});
  const guards::PolicyGroup& group = in.group ? *in.group : kDefaultGroup;
  for (auto& f : found) {
    f.action = group.settings().screenAction(f.code);
    if (f.action == guards::Action::kAllow) continue;
    out.push_back(group.renderScreen(std::move(f)));
  }
  return out;
}

}  // namespace pgwarden::screens
