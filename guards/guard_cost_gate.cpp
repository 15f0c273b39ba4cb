// cost_gate: a read that touches a big table (listed, or estimated at seq_scan_rows or more; with
// `plan: joins`, only such a read that joins something) is planned before it runs: the chain asks
// the daemon for EXPLAIN (FORMAT JSON), never ANALYZE, and this guard then refuses a sequential
// scan of a big table (unless seq_scan: allow), a join estimated at far more rows than anything it
// reads (a product, or a join on a low-cardinality key), or a total cost above max_cost, naming
// the table or join and how to narrow it.
#include <algorithm>
#include <cstdio>

#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

struct CostGateOptions {
  double max_cost = 0;                 // 0: no cost limit
  std::vector<std::string> tables;     // always big
  int64_t seq_scan_rows = 0;           // big from this estimated size (0: only the listed tables)
  bool deny_seq_scan = true;           // seq_scan: deny | allow
  bool plan_joins_only = false;        // plan: all | joins
  double max_join_growth = 0;          // 0: no join check
  double min_join_rows = 1'000'000;    // joins estimated below this never count as runaway
  bool fail_open = false;
};

class CostGateGuard final : public Guard {
 public:
  explicit CostGateGuard(CostGateOptions o) : o_(std::move(o)) {}

  std::string_view kind() const override { return "cost_gate"; }
  bool deterministic() const override { return true; }
  bool literalBlind() const override { return true; }
  std::vector<std::string_view> codes() const override {
    return {codes::kSeqScan, codes::kCostTooHigh, codes::kJoinExplosion, codes::kPlanUnavailable,
            codes::kMultiStatement};
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

  GuardResult checkStatement(const GuardInput& in,
                             const analysis::StatementInfo& st) const override {
    GuardResult r;
    r.wants_plan = needsPlan(in, st);
    return r;
  }

  GuardResult checkPlan(const PlanInput& in) const override {
    for (const auto& scan : in.plan.scans) {
      if (!o_.deny_seq_scan || scan.node_type != "Seq Scan") continue;
      std::string resolved;
      const analysis::TableStats* stats = nullptr;
      if (!big(in, scan, &resolved, &stats)) continue;
      return seqScan(scan, resolved, stats);
    }
    if (o_.max_join_growth > 0) {
      GuardResult r = runawayJoin(in);
      if (r.action != Action::kAllow) return r;
    }
    if (o_.max_cost > 0 && in.plan.total_cost > o_.max_cost) return tooCostly(in);
    return {};
  }

  GuardResult planUnavailable() const override {
    if (o_.fail_open) return {};
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
      for (const auto& p : o_.tables) {
        if (util::globMatch(p, n, true)) return true;
      }
    }
    return false;
  }

  bool needsPlan(const GuardInput& in, const analysis::StatementInfo& st) const {
    if (st.kind != analysis::StatementKind::kSelect || st.select_into) return false;
    if (o_.plan_joins_only && st.from_items < 2) return false;
    for (const auto& rel : st.relations) {
      if (rel.written) continue;
      if (listed(util::candidates(rel, in.group))) return true;
      const analysis::TableStats* s = util::findStats(in.stats, rel, in.group, nullptr);
      if (s && o_.seq_scan_rows > 0 && s->estimated_rows >= o_.seq_scan_rows) return true;
    }
    return false;
  }

  // Whether a plan node's relation is one of the big tables. Plans name the relation without its
  // schema unless VERBOSE, so an unqualified name is looked up along the search_path.
  bool big(const PlanInput& in, const analysis::PlanScan& scan, std::string* resolved,
           const analysis::TableStats** stats) const {
    analysis::RelationRef rel;
    rel.schema = scan.schema;
    rel.name = scan.relation;
    *stats = util::findStats(in.stats, rel, in.group, resolved);
    if (listed(util::candidates(rel, in.group))) return true;
    return *stats && o_.seq_scan_rows > 0 && (*stats)->estimated_rows >= o_.seq_scan_rows;
  }

  // The catalog's size of a scanned table (the plan's own estimate for what the catalog lacks),
  // and its name as a reader would write it.
  static double tableRows(const PlanInput& in, const analysis::PlanScan& scan, std::string* name) {
    analysis::RelationRef rel;
    rel.schema = scan.schema;
    rel.name = scan.relation;
    std::string resolved;
    const analysis::TableStats* stats = util::findStats(in.stats, rel, in.group, &resolved);
    if (name) {
      *name = !resolved.empty() ? resolved : scan.schema.empty() ? scan.relation : scan.schema + "." + scan.relation;
      if (!scan.alias.empty() && scan.alias != scan.relation) *name += " " + scan.alias;
    }
    return stats ? static_cast<double>(stats->estimated_rows) : scan.plan_rows;
  }

  // A join is runaway when it is estimated at min_join_rows or more and at more than
  // max_join_growth times the larger of its inputs and of the tables beneath it: what a product,
  // or a join on a key with few distinct values, looks like. A join on a key returns about as
  // many rows as its larger side. The biggest such join is reported.
  GuardResult runawayJoin(const PlanInput& in) const {
    const analysis::PlanJoin* worst = nullptr;
    double worst_input = 0;
    for (const auto& j : in.plan.joins) {
      double input = j.input_rows;
      for (size_t i = j.first_scan; i < j.end_scan && i < in.plan.scans.size(); ++i) {
        input = std::max(input, tableRows(in, in.plan.scans[i], nullptr));
      }
      if (j.plan_rows < o_.min_join_rows || j.plan_rows <= o_.max_join_growth * std::max(input, 1.0)) continue;
      if (!worst || j.plan_rows > worst->plan_rows) {
        worst = &j;
        worst_input = input;
      }
    }
    return worst ? joinExplosion(in, *worst, worst_input) : GuardResult{};
  }

  static int64_t rowCount(double rows) {
    return static_cast<int64_t>(std::clamp(rows, 0.0, 9.0e18));
  }

  GuardResult joinExplosion(const PlanInput& in, const analysis::PlanJoin& join,
                            double input) const {
    std::vector<std::string> tables;
    std::string subject;  // the first table, for per-table reasons
    for (size_t i = join.first_scan; i < join.end_scan && i < in.plan.scans.size(); ++i) {
      std::string name;
      tableRows(in, in.plan.scans[i], &name);
      if (subject.empty()) subject = name.substr(0, name.find(' '));
      if (std::find(tables.begin(), tables.end(), name) == tables.end()) tables.push_back(std::move(name));
    }
    for (const auto& other : join.other_inputs) {
      if (std::find(tables.begin(), tables.end(), other) == tables.end()) tables.push_back(other);
    }
    std::string what;
    for (size_t i = 0; i < tables.size(); ++i) {
      what += (i == 0 ? "" : i + 1 == tables.size() ? " and " : ", ") + tables[i];
    }
    if (what.empty()) what = "its inputs";
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kJoinExplosion);
    r.subject = subject;
    const std::string next = "join on a key that matches each row to few rows of the other side, or filter "
                             "both sides with WHERE; a LIMIT does not make the join smaller";
    r.message = "The plan joins " + what + " into " + util::approxCount(rowCount(join.plan_rows)) + " rows (" +
                join.node_type + "), far more than its larger input (" + util::approxCount(rowCount(input)) +
                " rows): " + next + ".";
    r.facts.add("tables", tables)
        .add("plan_node", join.node_type)
        .add("join_type", join.join_type)
        .add("estimated_rows", rowCount(join.plan_rows))
        .add("input_rows", rowCount(input))
        .add("max_join_growth", o_.max_join_growth)
        .add("next_step", next);
    return r;
  }

  static std::string columnAdvice(const analysis::TableStats* stats, std::string* predicate) {
    if (!stats || stats->indexed_columns.empty()) return "";
    *predicate = util::examplePredicate(*stats);
    return stats->indexed_columns.front();
  }

  GuardResult seqScan(const analysis::PlanScan& scan, const std::string& resolved,
                      const analysis::TableStats* stats) const {
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
    const analysis::PlanScan* worst = nullptr;
    for (const auto& s : in.plan.scans) {
      if (!worst || s.total_cost > worst->total_cost) worst = &s;
    }
    std::string resolved, predicate, column;
    const analysis::TableStats* stats = nullptr;
    if (worst) {
      analysis::RelationRef rel;
      rel.schema = worst->schema;
      rel.name = worst->relation;
      stats = util::findStats(in.stats, rel, in.group, &resolved);
      column = columnAdvice(stats, &predicate);
    }
    char cost[64], max[64];
    std::snprintf(cost, sizeof cost, "%.0f", in.plan.total_cost);
    std::snprintf(max, sizeof max, "%.0f", o_.max_cost);
    std::string next = column.empty() ? "narrow the query with a WHERE condition or aggregate fewer rows"
                                      : "narrow the query with a condition on an indexed column such as " +
                                            column + " (for example " + predicate + ")";
    r.message = std::string("The estimated cost of this query (") + cost +
                ") is above this connection's limit of " + max + "; " + next + ".";
    r.subject = resolved;
    r.facts.add("total_cost", in.plan.total_cost).add("max_cost", o_.max_cost);
    if (worst) r.facts.add("table", resolved).add("plan_node", worst->node_type);
    if (!predicate.empty()) r.facts.add("example_predicate", predicate);
    r.facts.add("next_step", next);
    if (!predicate.empty()) r.hint = "SELECT count(*) FROM " + resolved + " WHERE " + predicate;
    return r;
  }

 public:
  std::string describe() const override {
    Facts f;
    if (o_.max_cost > 0) f.add("max_cost", o_.max_cost);
    if (!o_.tables.empty()) f.add("tables", o_.tables);
    if (o_.seq_scan_rows > 0) f.add("seq_scan_rows", o_.seq_scan_rows);
    f.add("deny_seq_scan", o_.deny_seq_scan);
    return f.json(kind());
  }

 private:
  CostGateOptions o_;
};

}  // namespace

std::unique_ptr<Guard> makeCostGateGuard(const YAML::Node& node, const std::string& path,
                                         const GroupSettings& group) {
  (void)group;
  checkGuardKeys(node, path,
                 {"max_cost", "tables", "seq_scan_rows", "seq_scan", "plan", "max_join_growth",
                  "min_join_rows", "fail_behavior"});
  CostGateOptions o;
  o.max_cost = config::getDouble(node, path, "max_cost", 0);
  if (o.max_cost < 0) config::fail(node["max_cost"], path + ".max_cost", "must be 0 (off) or more");
  o.tables = config::getStringList(node, path, "tables");
  for (const auto& p : o.tables) {
    if (p.find('.') == std::string::npos) {
      config::fail(node["tables"], path + ".tables",
                   "pattern '" + p + "' must be schema-qualified (\"schema.table\" or \"schema.*\")");
    }
  }
  o.seq_scan_rows = config::getInt(node, path, "seq_scan_rows", 0, 0);
  if (o.tables.empty() && o.seq_scan_rows == 0) {
    config::fail(node, path, "a cost_gate guard needs tables, seq_scan_rows or both");
  }
  const std::string seq_scan = config::getString(node, path, "seq_scan", "deny");
  if (seq_scan != "deny" && seq_scan != "allow") {
    config::fail(node["seq_scan"], path + ".seq_scan", "expected deny or allow, got '" + seq_scan + "'");
  }
  o.deny_seq_scan = seq_scan == "deny";
  const std::string plan = config::getString(node, path, "plan", "all");
  if (plan != "all" && plan != "joins") {
    config::fail(node["plan"], path + ".plan", "expected all or joins, got '" + plan + "'");
  }
  o.plan_joins_only = plan == "joins";
  o.max_join_growth = config::getDouble(node, path, "max_join_growth", 0);
  if (o.max_join_growth < 0) {
    config::fail(node["max_join_growth"], path + ".max_join_growth", "must be 0 (off) or more");
  }
  o.min_join_rows = static_cast<double>(
      config::getInt(node, path, "min_join_rows", static_cast<int64_t>(o.min_join_rows), 0));
  if (!o.deny_seq_scan && o.max_cost == 0 && o.max_join_growth == 0) {
    config::fail(node["seq_scan"], path + ".seq_scan",
                 "with seq_scan: allow, set max_cost or max_join_growth, or the gate checks nothing");
  }
  const std::string fail = config::getString(node, path, "fail_behavior", "deny");
  if (fail != "deny" && fail != "allow") {
    config::fail(node["fail_behavior"], path + ".fail_behavior", "expected deny or allow, got '" + fail + "'");
  }
  o.fail_open = fail == "allow";
  return std::make_unique<CostGateGuard>(std::move(o));
}

}  // namespace pgwarden::guards
