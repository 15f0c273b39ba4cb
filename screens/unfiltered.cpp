// UNFILTERED: a row-returning read of a big table with no predicate doing work returned the whole
// table (its row estimate, within the statistics' error) or ran into the row cap: the answer is
// the table, not a filtered subset.
#include <cmath>

#include "guards/codes.h"
#include "guards/guard_util.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {
constexpr double kEstimateError = 0.1;
}

void unfiltered(const ScreenInput& in, Findings& out) {
  const analysis::StatementInfo& st = *in.statement;
  if (!in.stats || st.has_aggregate || st.relations.size() != 1) return;
  const analysis::RelationRef& rel = st.relations.front();
  if (!rel.unbounded_read || !rel.reaches_client) return;
  static const guards::GroupSettings kNoGroup{};
  std::string name;
  const analysis::TableStats* ts =
      guards::util::findStats(in.stats, rel, in.group ? in.group->settings() : kNoGroup, &name);
  if (!ts || ts->estimated_rows < kBigTableRows) return;
  const double est = static_cast<double>(ts->estimated_rows);
  const bool whole = std::fabs(static_cast<double>(in.result.rows) - est) <= est * kEstimateError;
  if (!whole && !in.result.truncated) return;

  guards::GuardResult r;
  r.code = std::string(guards::codes::kUnfiltered);
  r.subject = name;
  r.message = "This is all of " + name + " (about " + guards::util::approxCount(ts->estimated_rows) +
              " rows), not a filtered subset: no WHERE condition limits it. Add the condition your "
              "question implies, or aggregate on the server.";
  r.hint = ts->indexed_columns.empty() ? "WHERE <condition>"
                                       : "WHERE " + guards::util::examplePredicate(*ts);
  r.facts.add("table", name).add("estimated_rows", ts->estimated_rows).add("rows", in.result.rows);
  out.push_back(std::move(r));
}

}  // namespace pgwarden::screens::detail
