// The session's one call into the guards: a SQL text (from a Query or a Parse) is analysed
// (cached per loop) and run through the user's policy group exactly once, and the result is
// kept as a StatementPlan that the session acts on and history records read. The plan is
// immutable and shared: a prepared statement's plan serves every Bind/Execute of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "guards/policy.h"

namespace pgwarden::session {

struct PlannedStatement {
  std::string kind;            // "select", ...; "" when unknown
  std::string intent;          // inferred intent ("lookup", ...)
  std::vector<std::string> tables;
  std::string sql;             // this statement's text, cut to the history limit
  bool sql_truncated = false;
  // The group's result_assertions that apply to this statement's result (nearly always none).
  std::vector<guards::AssertionCheck> checks;
};

struct StatementPlan {
  std::shared_ptr<const analysis::Analysis> analysis;  // null when no analysis ran
  guards::Decision decision;
  std::vector<PlannedStatement> statements;  // at least one entry (the whole text if unknown)
  std::string fingerprint;                   // hex, "" when unknown
  std::string guard_actions_json;            // [{"guard":..,"action":..,"code":..,"reason":..}]
  bool budget = false;                       // denied because a budget ran out
  // In a group with masked columns: what history records instead of statements[i].sql, for a
  // statement whose constants may be masked values (its constants replaced by $n, or a note
  // when it does not parse); "" or past the end: statements[i].sql (docs/masking.md).
  std::vector<std::string> history_sql;
};

// The policy engine keeps the plans of deterministic groups (guards::PolicyGroup::deterministic)
// for texts up to kPlanCacheMaxText bytes that it has judged once before, at most
// kPlanCacheEntries per loop, least recently used first out: a driver that sends the same Parse text for every execution (pgbench -M extended,
// JDBC before its prepare threshold), or an agent that retries a text, is judged once. The key
// holds the group's id and the catalog snapshot's generation, so a reload or a refresh starts
// afresh, and whether the server infers the parameters' types (RequestContext::inferred_params).
// Worst case, about kPlanCacheEntries x 3 x kPlanCacheMaxText bytes per loop (the key, the
// statements' texts and a rewrite).
// A text it has not judged before whose analysis came from a shape template (pgbench's simple
// mode: a new literal each time) runs the whole chain only until the chain's literal-blind guards
// have had nothing to say about one text of that shape; from then on only the guards that read
// literals run (guards::PolicyGroup::BlindGuards), with the same decision. At most
// kPlanCacheEntries such shapes are remembered per loop, 24 bytes each.
inline constexpr size_t kPlanCacheEntries = 1024;
inline constexpr size_t kPlanCacheMaxText = 4096;

class PolicyEngine {
 public:
  PolicyEngine(size_t cache_entries, size_t max_sql_bytes);
  ~PolicyEngine();
  // `group` may be null (no policy: everything passes). `stats` may be null. The same shared plan
  // may come back for the same text (see kPlanCacheEntries): a caller never changes it.
  std::shared_ptr<const StatementPlan> plan(const guards::PolicyGroup* group, std::string_view sql,
                                            const guards::RequestContext& ctx,
                                            const analysis::TableStatsSnapshot* stats);
  // A plan for a statement pgwarden answers itself (SET/RESET/SHOW pgwarden.*): one statement of
  // `kind`, intent admin, no guard run. Its history record is made like any other statement's.
  std::shared_ptr<const StatementPlan> localPlan(std::string_view sql, std::string_view kind) const;
  // What a text is (its statements, kinds, tables), with no guard run and no decision: the plan
  // of a statement the client sent that never ran (skipped after an earlier failure).
  std::shared_ptr<const StatementPlan> unjudgedPlan(std::string_view sql);
  uint64_t cacheHits() const;    // the analyzer's exact-text cache
  uint64_t cacheMisses() const;
  uint64_t planCacheHits() const;  // plans served without running the chain
  uint64_t planCacheMisses() const;  // the whole chain ran
  // Texts not seen before whose shape's literal-blind guards had nothing to say about an earlier
  // text of the shape: only the chain's other guards ran (PolicyGroup::BlindGuards).
  uint64_t planShapeHits() const;
  size_t planCacheSize() const;
  // The same plan with the decision a paused chain reached later (webhook answer, budget).
  static std::shared_ptr<const StatementPlan> withDecision(const StatementPlan& plan, guards::Decision decision);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// History's guard_actions list: [{"guard":..,"action":..,"code":..,"reason":..}, ...].
std::string actionsJson(const std::vector<guards::Verdict>& actions);
// The same, written over `out` (its storage kept).
void assignActionsJson(std::string& out, const std::vector<guards::Verdict>& actions);

}  // namespace pgwarden::session
