// EXPLAIN (FORMAT JSON) reader. The output is [{"Plan": {"Node Type": ..., "Total Cost": ...,
// "Relation Name": ..., "Plans": [...]}}]; see the PostgreSQL documentation of EXPLAIN.
#include "analysis/plan.h"

#include "analysis/pg_json.h"

namespace pgwarden::guards {

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

void walk(simdjson::dom::object node, PlanSummary& out, int depth) {
  if (depth > 200) return;  // plans are shallow; a deeper one is not a plan worth trusting
  const std::string relation = text(node, "Relation Name");
  if (!relation.empty()) {
    PlanScan s;
    s.node_type = text(node, "Node Type");
    s.relation = relation;
    s.schema = text(node, "Schema");
    s.alias = text(node, "Alias");
    s.total_cost = number(node, "Total Cost");
    s.plan_rows = number(node, "Plan Rows");
    out.scans.push_back(std::move(s));
  }
  simdjson::dom::array children;
  if (node.at_key("Plans").get_array().get(children) == simdjson::SUCCESS) {
    for (simdjson::dom::element child : children) {
      simdjson::dom::object o;
      if (!child.get_object().get(o)) walk(o, out, depth + 1);
    }
  }
}

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
  walk(plan, out, 0);
  return out;
}

}  // namespace pgwarden::guards
