// libFuzzer target: a statement text as an agent sends it. The text (up to the first NUL) is
// analysed and evaluated by every policy group of the example config and by a cost-gated group;
// the rest of the input is the EXPLAIN (FORMAT JSON) answer the cost gate reads. The SQL comment
// and `SET pgwarden.*` parsers see the same text.
#include <yaml-cpp/yaml.h>

#include "analysis/analysis.h"
#include "analysis/plan.h"
#include "guards/agent_context.h"
#include "guards/policy.h"
#include "tests/fuzz/fuzz_util.h"

namespace a = pgwarden::analysis;
namespace g = pgwarden::guards;
using pgwarden::fuzz::Input;

namespace {

// The example config's groups, and one with the cost gate (the example has none), both ways of
// failing: deny when the plan cannot be read, allow.
const std::vector<std::shared_ptr<const g::PolicyGroup>>& groups() {
  static const auto all = [] {
    std::vector<std::shared_ptr<const g::PolicyGroup>> out;
    for (const auto& [name, group] : g::parsePolicyGroups(YAML::LoadFile(PGW_EXAMPLE_CONFIG)["groups"])) {
      out.push_back(group);
    }
    const auto gated = g::parsePolicyGroups(YAML::Load(R"(
gated:
  search_path: [public, analytics]
  guards:
    - kind: read_only
    - kind: cost_gate
      seq_scan_rows: 100000
      max_cost: 500000
    - kind: row_limit
      max_limit: 1000
      max_rows: 100
open:
  guards:
    - kind: cost_gate
      tables: ["public.*"]
      max_cost: 10
      fail_behavior: allow
)"));
    for (const auto& [name, group] : gated) out.push_back(group);
    return out;
  }();
  return all;
}

std::shared_ptr<const a::TableStatsSnapshot> stats() {
  static const auto s = a::TableStatsSnapshot::fromRows({
      {"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint"},
      {"analytics", "fct_shipments", "200000", "id", "bigint"},
      {"public", "dim_region", "12", "region", "text"},
  });
  return s;
}

void checkDecision(const g::Decision& d) {
  if (d.denied) {
    PGW_FUZZ_CHECK(d.deny.action == g::Action::kDeny);
    PGW_FUZZ_CHECK(!d.deny.code.empty() && d.deny.sqlstate.size() == 5 && !d.deny.message.empty());
    PGW_FUZZ_CHECK(!d.explain_sql && !d.rewritten_sql);
  }
  if (d.explain_sql) PGW_FUZZ_CHECK(d.explain_sql->rfind("EXPLAIN", 0) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const std::string sql(in.until('\0'));
  const std::string_view plan_json = in.rest();

  (void)g::parseSqlComment(sql);
  (void)g::parseAgentCommand(sql);
  (void)a::parsePlanJson(plan_json);

  const auto analysis = a::analyzeUncached(sql);
  if (!analysis->ok) {
    const g::Verdict v = g::syntaxErrorVerdict(*analysis, sql);
    PGW_FUZZ_CHECK(v.action == g::Action::kDeny && !v.message.empty());
    return 0;
  }
  for (const auto& st : analysis->statements) {
    PGW_FUZZ_CHECK(st.location >= 0 && st.length >= 0);
    PGW_FUZZ_CHECK(size_t(st.location) + size_t(st.length) <= sql.size());
  }
  (void)g::isSessionHousekeeping(*analysis);

  for (const bool extended : {false, true}) {
    for (const auto& group : groups()) {
      g::RequestContext ctx;
      ctx.user = "agent";
      ctx.group = group->name();
      ctx.extended = extended;
      const g::Decision d = group->evaluate(*analysis, sql, ctx, extended ? nullptr : stats().get());
      checkDecision(d);
      if (d.explain_sql) {
        checkDecision(group->evaluatePlan(d, plan_json, stats().get()));
        checkDecision(group->planUnavailable(d));
      }
    }
  }
  return 0;
}
