// The `tools:` section: operator-defined tools, each a fixed SQL shape with named parameters, a
// JSON Schema for its arguments, range caps, a row cap the caller cannot widen and a plan check.
// Compiled once at config load (every error names the tool and the key); at call time it turns
// validated arguments into bind values, and checks the range caps and the plan.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "guards/guard.h"
#include "mcp/json_schema.h"

namespace pgwarden::mcp {

// Two date (or date-time) arguments that must be ordered and at most `max_days` apart.
struct RangeCap {
  std::string from;
  std::string to;
  int64_t max_days = 0;
};

enum class ToolResultShape : uint8_t { kRows, kScalar, kSingleRow };
const char* resultShapeName(ToolResultShape s);

struct OperatorTool {
  std::string name;
  std::string title;
  std::string description;
  std::vector<std::string> groups;  // empty: every group
  JsonSchema parameters;
  std::vector<RangeCap> range_caps;
  std::string sql;                  // as written
  // `sql` with each $name replaced by $n and the row cap appended: what the server prepares.
  std::string bound_sql;
  std::vector<std::string> param_names;  // $1 is param_names[0]
  int64_t max_rows = 100;
  // plan_check.deny_seq_scan_on: "schema.table" (lower case unless written quoted).
  std::vector<std::string> deny_seq_scan_on;
  ToolResultShape result = ToolResultShape::kRows;
  int line = 0;

  bool visibleTo(std::string_view group) const;
};

class OperatorToolSet {
 public:
  OperatorToolSet() = default;
  explicit OperatorToolSet(std::vector<std::shared_ptr<const OperatorTool>> tools) : tools_(std::move(tools)) {}
  const OperatorTool* find(std::string_view name) const;
  const std::vector<std::shared_ptr<const OperatorTool>>& all() const { return tools_; }
  bool empty() const { return tools_.empty(); }

 private:
  std::vector<std::shared_ptr<const OperatorTool>> tools_;
};

// Parses `tools:` (absent: none). `groups` are the defined policy groups; `reserved` the built-in
// tool names a tool may not take. Throws config::ConfigError naming the tool and the key.
std::shared_ptr<const OperatorToolSet> parseOperatorTools(const YAML::Node& node,
                                                          const std::vector<std::string>& groups,
                                                          const std::vector<std::string>& reserved);

// `sql` with every $name outside literals, quoted identifiers, comments and dollar quotes
// replaced by $1, $2, ... in order of first use; the names in that order. Fails on a positional
// $n (tools use names) or an unterminated literal.
Result<std::string> bindNamedParameters(std::string_view sql, std::vector<std::string>& names);

// A JSON argument as the text-format bind value PostgreSQL parses (nullopt: SQL NULL). Strings
// go as they are (never into the SQL text); arrays become array literals, objects JSON text.
std::optional<std::string> bindValue(const Json& value);

// The range caps against validated arguments: nullopt when they hold, otherwise the refusal
// (code RANGE_TOO_WIDE, RANGE_REVERSED or RANGE_REQUIRED) with facts and next_step.
std::optional<Json> checkRangeCaps(const OperatorTool& tool, const Json& args);

// The plan check: a scan the tool forbids (a Seq Scan on a listed table), as a SEQ_SCAN result
// naming the table's indexes from `stats` (may be null).
std::optional<guards::GuardResult> checkToolPlan(const OperatorTool& tool,
                                                 const analysis::PlanSummary& plan,
                                                 const analysis::TableStatsSnapshot* stats);

}  // namespace pgwarden::mcp
