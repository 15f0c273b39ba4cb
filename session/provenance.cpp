// The wire door's provenance NOTICE (see provenance.h).
#include "session/provenance.h"

#include "guards/guard.h"
#include "session/statement_policy.h"

namespace pgwarden::daemon {

std::string provenanceDetail(const StatementRun& run) {
  guards::Facts f;
  std::vector<std::string> verdicts;
  std::vector<std::string> warnings;
  std::string sql;
  bool rewritten = false;
  if (run.plan) {
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
  f.add("rows_returned", run.rows_sent);
  f.add("truncated", run.truncated);
  return f.json("PROVENANCE");
}

bool provenanceOn(const std::string& value) {
  std::string v;
  for (char c : value) v.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  return v == "on" || v == "true" || v == "1" || v == "yes";
}

}  // namespace pgwarden::daemon
