// The wire door's provenance NOTICE (see provenance.h).
#include "session/provenance.h"

#include "guards/guard.h"
#include "session/statement_policy.h"

namespace pgwarden::session {

std::string provenanceDetail(const StatementRun& run, const analysis::TableStatsSnapshot* stats) {
  guards::Facts f;
  std::vector<std::string> verdicts;
  std::vector<std::string> warnings;
  std::string sql;
  bool rewritten = false;
  double estimated = -1;
  if (run.plan) {
    estimated = run.plan->decision.estimated_rows;
    const auto& d = run.plan->decision;
    rewritten = d.rewritten_sql.has_value();
    if (rewritten) {
      sql = *d.rewritten_sql;
    } else if (run.index < run.plan->statements.size()) {
      sql = run.plan->statements[run.index].sql;
    }
    for (const auto& v : d.actions) verdicts.push_back(v.code);
    for (const auto& v : d.warnings) warnings.push_back(v.code);
  }
  for (const auto& v : run.screens) warnings.push_back(v.code);
  f.add("executed_sql", sql);
  f.add("rewritten", rewritten);
  f.add("verdicts", verdicts);
  f.add("warnings", warnings);
  // The planner's estimate when the cost gate planned the statement, as on the MCP door.
  if (estimated >= 0) {
    f.add("estimated_rows", static_cast<int64_t>(estimated));
  } else {
    f.addNull("estimated_rows");
  }
  f.add("rows_returned", run.rows_sent);
  f.add("truncated", run.truncated);
  if (stats) {
    f.add("stats_age_seconds", stats->ageSeconds());
  } else {
    f.addNull("stats_age_seconds");
  }
  return f.json("PROVENANCE");
}

bool provenanceOn(const std::string& value) {
  std::string v;
  for (char c : value) v.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  return v == "on" || v == "true" || v == "1" || v == "yes";
}

}  // namespace pgwarden::session
