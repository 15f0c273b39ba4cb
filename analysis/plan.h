// Reads the JSON that EXPLAIN (FORMAT JSON) returns into a PlanSummary: the total cost, every
// node that scans a relation and every join with the scans beneath it: the cost gate's and the
// plan check's input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace pgwarden::analysis {

// One scan node of an EXPLAIN (FORMAT JSON) plan, and the plan's total cost.
struct PlanScan {
  std::string node_type;   // "Seq Scan", "Index Scan", ...
  std::string schema;      // present only when the plan was VERBOSE
  std::string relation;
  std::string alias;
  double total_cost = 0;
  double plan_rows = 0;
};
// One join node of the plan and what it joins: its scans are PlanSummary::scans[first_scan,
// end_scan). Rows are over all processes: a parallel plan's per-worker estimate is scaled back up.
struct PlanJoin {
  std::string node_type;   // "Nested Loop", "Hash Join", "Merge Join"
  std::string join_type;   // "Inner", "Left", "Semi", ...
  double plan_rows = 0;    // the rows it is estimated to return
  double input_rows = 0;   // the larger of its two inputs' estimates (a loop's inner: per loop)
  size_t first_scan = 0;
  size_t end_scan = 0;
  std::vector<std::string> other_inputs;  // CTE and function scans beneath it: "name alias"
};
struct PlanSummary {
  double total_cost = 0;
  double plan_rows = 0;
  std::vector<PlanScan> scans;
  std::vector<PlanJoin> joins;  // outermost first
};

[[nodiscard]] Result<PlanSummary> parsePlanJson(std::string_view json);

}  // namespace pgwarden::analysis
