// ASSERTION_FAILED: the result broke what the group's result_assertions declare of it: a value
// of a matching column outside its bounds (a *_pct above 100, a rate above 1, a negative amount),
// or a row count other than the one declared (a scalar tool that returned no row or several).
// The front end's row count noted the values as the rows passed (guards::checkRow); this screen
// names the rows and gives the query that lists every offending one.
#include "guards/codes.h"
#include "guards/guard_util.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {

const guards::AssertionCheck* rowCountBroken(const ResultSummary& r) {
  if (!r.checks) return nullptr;
  for (const auto& c : *r.checks) {
    // A cut result's count is the cap's, not the statement's.
    if (c.rows >= 0 && !r.truncated && r.rows != c.rows) return &c;
  }
  return nullptr;
}

// NOT (col BETWEEN min AND max) OR ..., for the checks with a column.
std::string violationFilter(const std::vector<guards::AssertionCheck>& checks) {
  std::string out;
  for (const auto& c : checks) {
    if (c.column < 0) continue;
    const std::string col = "q." + guards::util::quoteIdent(c.name);
    std::string bad;
    if (c.min) bad = col + " < " + guards::numberText(*c.min);
    if (c.max) bad += (bad.empty() ? "" : " OR ") + col + " > " + guards::numberText(*c.max);
    out += (out.empty() ? "" : " OR ") + bad;
  }
  return out;
}

}  // namespace

bool assertionsBroken(const ResultSummary& r) {
  return (r.failures && r.failures->count > 0) || rowCountBroken(r) != nullptr;
}

void assertionFailed(const ScreenInput& in, Findings& out) {
  const ResultSummary& r = in.result;
  if (!r.checks) return;
  const std::string table =
      in.statement->screen.tables.empty()
          ? std::string()
          : guards::util::displayName(in.statement->screen.tables.front().schema,
                                      in.statement->screen.tables.front().name);
  if (r.failures && r.failures->count > 0) {
    guards::GuardResult f;
    f.code = std::string(guards::codes::kAssertionFailed);
    f.subject = table;
    std::string rows;
    for (const auto& e : r.failures->examples) rows += (rows.empty() ? "" : "; ") + e;
    f.message =
        std::to_string(r.failures->count) +
        (r.failures->count == 1 ? " value breaks" : " values break") +
        " what this result is declared to hold (" + rows +
        (r.failures->count > static_cast<int64_t>(r.failures->examples.size()) ? "; ..." : "") +
        "): the answer is probably computed wrong (a share scaled twice, a sign, a unit). Check "
        "the expression before using these rows.";
    const std::string filter = violationFilter(*r.checks);
    if (!in.sql.empty() && in.statement->max_param == 0 && !filter.empty()) {
      f.hint = "SELECT * FROM (" + std::string(in.sql) + ") AS q WHERE " + filter;
    }
    f.facts.add("failures", r.failures->count).add("rows", r.failures->examples);
    if (!table.empty()) f.facts.add("table", table);
    out.push_back(std::move(f));
  }
  if (const guards::AssertionCheck* c = rowCountBroken(r)) {
    guards::GuardResult f;
    f.code = std::string(guards::codes::kAssertionFailed);
    f.subject = table;
    f.message = "This result has " + std::to_string(r.rows) + (r.rows == 1 ? " row" : " rows") +
                "; it is declared to return exactly " + std::to_string(c->rows) +
                ". A scalar answer read from it is not the answer: " +
                (r.rows == 0 ? "nothing matched the conditions."
                             : "aggregate, or add the condition that picks one row.");
    f.facts.add("rows", r.rows).add("expected_rows", c->rows);
    if (!table.empty()) f.facts.add("table", table);
    out.push_back(std::move(f));
  }
}

}  // namespace pgwarden::screens::detail
