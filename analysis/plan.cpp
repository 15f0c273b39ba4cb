// EXPLAIN (FORMAT JSON) reader. The output is [{"Plan": {"Node Type": ..., "Total Cost": ...,
// "Relation Name": ..., "Join Type": ..., "Plans": [...]}}]; see the PostgreSQL documentation of
// EXPLAIN. Scans and joins are collected in one depth-first walk.
#include "analysis/plan.h"

#include "analysis/pg_json.h"

namespace pgwarden::analysis {

namespace {

double number(simdjson::dom::object o, std::string_view key) {
  simdjson::dom::element e;
  double v = 0;
  if (o.at_key(key).get(e) || e.get_double().get(v)) return 0;
  return v;
}

std::string text(simdjson::dom::object o, std::string_view key) {
  std::string_view v;
  if (o.at_key(key).get_string().get(v)) return {};
  return std::string(v);
}

bool flag(simdjson::dom::object o, std::string_view key) {
  bool v = false;
  if (o.at_key(key).get_bool().get(v)) return false;
  return v;
}

// Below a Gather, each node estimates one process's share of the rows; PostgreSQL divides by the
// workers plus the leader's contribution (get_parallel_divisor in costsize.c).
double parallelDivisor(simdjson::dom::object gather) {
  const double workers = number(gather, "Workers Planned");
  double divisor = workers;
  const double leader = 1.0 - 0.3 * workers;
  if (leader > 0) divisor += leader;
  return divisor > 0 ? divisor : 1;
}

// CTE and function scans name no relation; joins name them by what they read and their alias.
std::string otherInput(simdjson::dom::object node) {
  std::string name = text(node, "CTE Name");
  if (name.empty()) {
    name = text(node, "Function Name");
    if (!name.empty()) name += "()";
  }
  const std::string alias = text(node, "Alias");
  if (!name.empty() && !alias.empty() && alias != name) name += " " + alias;
  return name;
}

class Walker {
 public:
  explicit Walker(PlanSummary& out) : out_(out) {}

  // Returns whether the subtree is a parallel (per-process) one: it holds a parallel-aware node
  // that no Gather below collects. Its row estimates are then scaled up by `divisor`.
  bool walk(simdjson::dom::object node, int depth, double divisor) {
    if (depth > 200) return false;  // plans are shallow; a deeper one is not a plan worth trusting
    const std::string type = text(node, "Node Type");
    const bool gather = type == "Gather" || type == "Gather Merge";
    bool partial = flag(node, "Parallel Aware");
    const std::string relation = text(node, "Relation Name");
    if (!relation.empty()) {
      PlanScan s;
      s.node_type = type;
      s.relation = relation;
      s.schema = text(node, "Schema");
      s.alias = text(node, "Alias");
      s.total_cost = number(node, "Total Cost");
      s.plan_rows = number(node, "Plan Rows");
      out_.scans.push_back(std::move(s));
    } else if (std::string other = otherInput(node); !other.empty()) {
      for (size_t j : open_joins_) out_.joins[j].other_inputs.push_back(other);
    }
    const std::string join_type = text(node, "Join Type");
    const bool join = !join_type.empty();
    const size_t join_index = out_.joins.size();
    if (join) {
      PlanJoin j;
      j.node_type = type;
      j.join_type = join_type;
      j.first_scan = out_.scans.size();
      out_.joins.push_back(std::move(j));
      open_joins_.push_back(join_index);
    }
    const double child_divisor = gather ? parallelDivisor(node) : divisor;
    double input_rows = 0;
    simdjson::dom::array children;
    if (node.at_key("Plans").get_array().get(children) == simdjson::SUCCESS) {
      for (simdjson::dom::element child : children) {
        simdjson::dom::object o;
        if (child.get_object().get(o)) continue;
        const bool child_partial = walk(o, depth + 1, child_divisor);
        partial = partial || child_partial;
        const std::string relationship = text(o, "Parent Relationship");
        if (join && (relationship == "Outer" || relationship == "Inner")) {
          const double rows = number(o, "Plan Rows") * (child_partial ? child_divisor : 1);
          if (rows > input_rows) input_rows = rows;
        }
      }
    }
    if (join) {
      open_joins_.pop_back();
      PlanJoin& j = out_.joins[join_index];
      j.plan_rows = number(node, "Plan Rows") * (partial ? divisor : 1);
      j.input_rows = input_rows;
      j.end_scan = out_.scans.size();
    }
    return partial && !gather;
  }

 private:
  PlanSummary& out_;
  std::vector<size_t> open_joins_;  // joins whose subtree is being walked
};

}  // namespace

Result<PlanSummary> parsePlanJson(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root)) return Result<PlanSummary>::fail("plan is not valid JSON");
  simdjson::dom::array list;
  simdjson::dom::element first;
  if (root.get_array().get(list) || list.at(0).get(first)) {
    return Result<PlanSummary>::fail("plan is not a JSON list");
  }
  simdjson::dom::object plan;
  if (first.at_key("Plan").get_object().get(plan)) return Result<PlanSummary>::fail("plan has no \"Plan\"");
  PlanSummary out;
  out.total_cost = number(plan, "Total Cost");
  out.plan_rows = number(plan, "Plan Rows");
  Walker(out).walk(plan, 0, 1);
  return out;
}

}  // namespace pgwarden::analysis
