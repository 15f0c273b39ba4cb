// Shared pieces of the session tests: a caller of the statement gate that records what it was
// asked to run, groups built from inline YAML, and the sample table's catalog statistics.
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "budgets/budget.h"
#include "guards/policy.h"
#include "budgets/guard_kinds.h"
#include "guards/webhook_guard.h"
#include "session/statement_gate.h"

namespace pgwarden::daemon::test {

inline guards::PolicyMap groupsFromYaml(const std::string& yaml) {
  return budgets::parseAgentPolicyGroups(YAML::Load(yaml));
}

// fct_shipments with about a million rows and an index on ship_date.
inline std::shared_ptr<const analysis::TableStatsSnapshot> sampleStats() {
  return analysis::TableStatsSnapshot::fromRows({
      {"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint"},
  });
}

// The front end, as the gate sees it: who is asking, its group, and a server connection that
// "runs" EXPLAINs and parse checks by remembering them (the test answers for the server).
class FakeCaller : public session::GateCaller {
 public:
  explicit FakeCaller(const guards::PolicyGroup* group) : group_(group) {}
  guards::RequestContext requestContext(bool extended, const guards::AgentOverrides& ov) const override {
    guards::RequestContext ctx;
    ctx.user = "agent";
    ctx.group = group_ ? group_->name() : "";
    ctx.conversation_id = ov.conversation_id ? std::string_view(*ov.conversation_id) : "c-1";
    ctx.extended = extended;
    ctx.session_id = 7;
    ctx.budgets = budgets;
    return ctx;
  }
  const guards::PolicyGroup* policyGroup() const override { return group_; }
  bool runExplain(const std::string& sql, bool extended,
                  const session::ExplainArgs& args) override {
    if (!has_server) return false;
    explains.push_back({sql, extended, args});
    return true;
  }

  bool runParseCheck(const std::string& sql, bool extended,
                     const std::vector<uint32_t>& param_types) override {
    if (!has_server) return false;
    parse_checks.push_back({sql, extended, session::ExplainArgs{param_types, {}, {}, false}});
    return true;
  }

  struct Explain {
    std::string sql;
    bool extended;
    session::ExplainArgs args;
  };
  std::vector<Explain> explains;
  std::vector<Explain> parse_checks;  // the texts put to the server's parser
  bool has_server = true;
  const budgets::BudgetLedger* budgets = nullptr;

 private:
  const guards::PolicyGroup* group_;
};

}  // namespace pgwarden::daemon::test
