// cost_gate: a read that touches a big table (listed, or estimated at seq_scan_rows or more) is
// planned before it runs: the chain asks the daemon for EXPLAIN (FORMAT JSON), never ANALYZE,
// and this guard then refuses a sequential scan of a big table or a total cost above max_cost,
// naming the table, the plan node and a column to filter on. Small tables may scan.
#include <cstdio>

#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

class CostGateGuard final : public Guard {
 public:
  CostGateGuard(double max_cost, std::vector<std::string> tables, int64_t seq_scan_rows, bool fail_open)
      : max_cost_(max_cost), tables_(std::move(tables)), seq_scan_rows_(seq_scan_rows), fail_open_(fail_open) {}

  std::string_view kind() const override { return "cost_gate"; }
  std::vector<std::string_view> codes() const override {
    return {codes::kSeqScan, codes::kCostTooHigh, codes::kPlanUnavailable, codes::kMultiStatement};
  }

  GuardResult checkText(const GuardInput& in) const override {
    // A plan is asked for one statement; several statements that each need one are refused here
    // rather than checked only in part.
    size_t needing = 0;
    for (const auto& st : in.analysis.statements) needing += needsPlan(in, st) ? 1 : 0;
    if (in.analysis.statements.size() <= 1 || needing == 0) return {};
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kMultiStatement);
    r.message = "Queries on large tables are checked one statement at a time; send the statements "
                "of this query one at a time.";
    r.facts.add("statements", static_cast<int64_t>(in.analysis.statements.size()))
        .add("next_step", "send each statement in its own query");
    return r;
  }

  GuardResult checkStatement(const GuardInput& in, const StatementInfo& st) const override {
    GuardResult r;
    r.wants_plan = needsPlan(in, st);
    return r;
  }

  GuardResult checkPlan(const PlanInput& in) const override {
    for (const auto& scan : in.plan.scans) {
      if (scan.node_type != "Seq Scan") continue;
      std::string resolved;
      const TableStats* stats = nullptr;
      if (!big(in, scan, &resolved, &stats)) continue;
      return seqScan(scan, resolved, stats);
    }
    if (max_cost_ > 0 && in.plan.total_cost > max_cost_) return tooCostly(in);
    return {};
  }

  GuardResult planUnavailable() const override {
    if (fail_open_) return {};
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kPlanUnavailable);
    r.message = "The cost check for this query could not run just now; retry in a moment, or stop "
                "and report what you have found so far.";
    r.facts.add("next_step", "retry later");
    return r;
  }

 private:
  bool listed(const std::vector<std::string>& names) const {
    for (const auto& n : names) {
      for (const auto& p : tables_) {
        if (util::globMatch(p, n, true)) return true;
      }
    }
    return false;
  }

  bool needsPlan(const GuardInput& in, const StatementInfo& st) const {
    if (st.kind != StatementKind::kSelect || st.select_into) return false;
    for (const auto& rel : st.relations) {
      if (rel.written) continue;
      if (listed(util::candidates(rel, in.group))) return true;
      const TableStats* s = util::findStats(in.stats, rel, in.group, nullptr);
      if (s && seq_scan_rows_ > 0 && s->estimated_rows >= seq_scan_rows_) return true;
    }
    return false;
  }

  // Whether a plan node's relation is one of the big tables. Plans name the relation without its
  // schema unless VERBOSE, so an unqualified name is looked up along the search_path.
  bool big(const PlanInput& in, const PlanScan& scan, std::string* resolved, const TableStats** stats) const {
    RelationRef rel;
    rel.schema = scan.schema;
    rel.name = scan.relation;
    *stats = util::findStats(in.stats, rel, in.group, resolved);
    if (listed(util::candidates(rel, in.group))) return true;
    return *stats && seq_scan_rows_ > 0 && (*stats)->estimated_rows >= seq_scan_rows_;
  }

  static std::string columnAdvice(const TableStats* stats, std::string* predicate) {
    if (!stats || stats->indexed_columns.empty()) return "";
    const std::string type = stats->indexed_column_types.empty() ? "" : stats->indexed_column_types.front();
    *predicate = util::examplePredicate(stats->indexed_columns.front(), type);
    return stats->indexed_columns.front();
  }

  GuardResult seqScan(const PlanScan& scan, const std::string& resolved, const TableStats* stats) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kSeqScan);
    r.subject = resolved;
    std::string predicate;
    const std::string column = columnAdvice(stats, &predicate);
    const std::string size = stats ? " (" + util::approxCount(stats->estimated_rows) + " rows)" : "";
    std::string next = column.empty()
                           ? "filter on an indexed column so an index can be used"
                           : "filter on an indexed column such as " + column + " (for example " +
                                 predicate + ") so an index can be used";
    r.message = "The plan for this query reads all of " + resolved + size +
                " with a sequential scan (Seq Scan); " + next + ".";
    r.facts.add("table", resolved).add("plan_node", scan.node_type);
    if (stats) r.facts.add("estimated_rows", stats->estimated_rows);
    if (stats) r.facts.add("indexed_columns", stats->indexed_columns);
    if (!predicate.empty()) r.facts.add("example_predicate", predicate);
    r.facts.add("next_step", next);
    if (!predicate.empty()) r.hint = "SELECT * FROM " + resolved + " WHERE " + predicate + " LIMIT 100";
    return r;
  }

  GuardResult tooCostly(const PlanInput& in) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kCostTooHigh);
    // Name the costliest scan: it is where a filter helps most.
    const PlanScan* worst = nullptr;
    for (const auto& s : in.plan.scans) {
      if (!worst || s.total_cost > worst->total_cost) worst = &s;
    }
    std::string resolved, predicate, column;
    const TableStats* stats = nullptr;
    if (worst) {
      RelationRef rel;
      rel.schema = worst->schema;
      rel.name = worst->relation;
      stats = util::findStats(in.stats, rel, in.group, &resolved);
      column = columnAdvice(stats, &predicate);
    }
    char cost[64], max[64];
    std::snprintf(cost, sizeof cost, "%.0f", in.plan.total_cost);
    std::snprintf(max, sizeof max, "%.0f", max_cost_);
    std::string next = column.empty() ? "narrow the query with a WHERE condition or aggregate fewer rows"
                                      : "narrow the query with a condition on an indexed column such as " +
                                            column + " (for example " + predicate + ")";
    r.message = std::string("The estimated cost of this query (") + cost +
                ") is above this connection's limit of " + max + "; " + next + ".";
    r.subject = resolved;
    r.facts.add("total_cost", in.plan.total_cost).add("max_cost", max_cost_);
    if (worst) r.facts.add("table", resolved).add("plan_node", worst->node_type);
    if (!predicate.empty()) r.facts.add("example_predicate", predicate);
    r.facts.add("next_step", next);
    if (!predicate.empty()) r.hint = "SELECT count(*) FROM " + resolved + " WHERE " + predicate;
    return r;
  }

  double max_cost_;
  std::vector<std::string> tables_;
  int64_t seq_scan_rows_;
  bool fail_open_;
};

}  // namespace

std::unique_ptr<Guard> makeCostGateGuard(const YAML::Node& node, const std::string& path,
                                         const GroupSettings& group) {
  (void)group;
  checkGuardKeys(node, path, {"max_cost", "tables", "seq_scan_rows", "fail_behavior"});
  const double max_cost = config::getDouble(node, path, "max_cost", 0);
  if (max_cost < 0) config::fail(node["max_cost"], path + ".max_cost", "must be 0 (off) or more");
  std::vector<std::string> tables = config::getStringList(node, path, "tables");
  for (const auto& p : tables) {
    if (p.find('.') == std::string::npos) {
      config::fail(node["tables"], path + ".tables",
                   "pattern '" + p + "' must be schema-qualified (\"schema.table\" or \"schema.*\")");
    }
  }
  const int64_t seq_scan_rows = config::getInt(node, path, "seq_scan_rows", 0, 0);
  if (tables.empty() && seq_scan_rows == 0) {
    config::fail(node, path, "a cost_gate guard needs tables, seq_scan_rows or both");
  }
  const std::string fail = config::getString(node, path, "fail_behavior", "deny");
  if (fail != "deny" && fail != "allow") {
    config::fail(node["fail_behavior"], path + ".fail_behavior", "expected deny or allow, got '" + fail + "'");
  }
  return std::make_unique<CostGateGuard>(max_cost, std::move(tables), seq_scan_rows, fail == "allow");
}

}  // namespace pgwarden::guards
