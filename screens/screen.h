// Result screens: after a statement succeeded, is its result probably not the answer? Given the
// statement's analysis, a summary of what the server returned and the catalog snapshot, each
// screen may find one thing (UNKNOWN_VALUE, OUT_OF_RANGE, UNFILTERED, ARBITRARY_ROWS,
// PARTIAL_RESULT, FANOUT_JOIN, ...) and say what to do next. Pure and loop-safe; never touches
// rows (ASSERTION_FAILED reads what the front end's row count noted of them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "guards/policy.h"
#include "screens/probe.h"

namespace pgwarden::screens {

// What the front end saw of the result.
struct ResultSummary {
  int64_t rows = 0;          // rows the client received
  bool single_zero = false;  // exactly one row of one column whose value is zero
  bool truncated = false;    // the row cap cut it
  int64_t row_cap = -1;      // the cap in force, -1 none
  bool single_null =
      false;  // exactly one row of one column that is NULL (sum, avg, max over nothing)
  // The group's result_assertions for this statement and what the rows broke (null: none).
  const std::vector<guards::AssertionCheck>* checks = nullptr;
  const guards::AssertionFailures* failures = nullptr;
};

struct ScreenInput {
  const analysis::StatementInfo* statement = nullptr;
  std::string_view sql;                             // the statement's own text (for hints)
  ResultSummary result;
  const analysis::TableStatsSnapshot* stats =
      nullptr;  // null: not loaded, screens needing it stay silent
  const guards::PolicyGroup* group = nullptr;       // null: default settings and texts
  // Bound parameter values ($1 is [0]) in text format; nullopt for NULL or a binary value.
  const std::vector<std::optional<std::string>>* params = nullptr;
  // The answer of the statement's probe (screens/probe.h), null when none was asked.
  const ProbeAnswer* probe = nullptr;
};

// Nothing matched: an empty result, or the lone zero or NULL of an aggregate over no rows
// (count(*) = 0; sum, avg or max NULL). A lone zero that is a row's own value
// (SELECT balance FROM accounts WHERE id = 7) is a match.
inline bool nothingMatched(const ResultSummary& r, const analysis::StatementInfo& st) {
  return r.rows == 0 || ((r.single_zero || r.single_null) && st.plain_aggregate);
}

// True when some screen could speak about this statement's result: the front end looks at a
// result only then (and always when the row cap cut it).
bool worthScreening(const analysis::StatementInfo& st);

// True when some screen could speak about this result: the front end looks up the catalog
// snapshot and runs the screens only then, so a result no screen can flag costs a few compares.
bool maySpeak(const analysis::StatementInfo& st, const ResultSummary& result);

// The warnings (and denials, where the group sets a code to deny) for one finished result, in
// screen order; empty for nearly every result.
std::vector<guards::Verdict> screenResult(const ScreenInput& in);

}  // namespace pgwarden::screens
