// A group's declarations about results (docs/answers.md): `result_assertions` (a column named
// *_pct stays in 0..100, a rate in 0..1, an amount is never negative, a scalar tool returns
// exactly one row) and `soft_delete_columns` (besides the ones found by name). Parsed from the
// group's config; resolved per statement into the checks the statement's result rows go through.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"

namespace YAML {
class Node;
}

namespace pgwarden::guards {

struct GroupSettings;

// soft_delete_columns: schema.table.column, a time (NULL: live) or a boolean (false: live).
struct DeclaredColumn {
  std::string schema, table, column;
};

struct ResultAssertion {
  std::string columns;              // glob on the result's column names ("*_pct")
  std::vector<std::string> tables;  // globs on schema.table the statement reads; empty: any
  std::vector<std::string> tools;   // the MCP tools it holds for; empty: any statement
  std::optional<double> min, max;   // every value of a matching column lies in [min, max]
  int64_t rows = -1;                // the result has exactly this many rows (-1: not checked)
};

// One assertion as it applies to one statement: a column (by position in its result) checked
// against bounds, or the result's row count.
struct AssertionCheck {
  int column = -1;  // -1: the row count check
  std::string name;
  std::optional<double> min, max;
  int64_t rows = -1;
  bool operator==(const AssertionCheck&) const = default;
};

// What a result broke, kept on the statement's run while its rows pass (bounded).
struct AssertionFailures {
  int64_t count = 0;                  // values outside their bounds
  std::vector<std::string> examples;  // "row 3: discount_pct = 150 (expected 0..100)", first few
  static constexpr size_t kMaxExamples = 5;
};

// The checks `st`'s result goes through in `settings`' group, for a statement run for MCP tool
// `tool` ("" none). Empty for nearly every statement (a `*` in the target list included: its
// columns are not known before the result).
void assertionChecks(const GroupSettings& settings, const analysis::StatementInfo& st,
                     std::string_view tool, std::vector<AssertionCheck>& out);
// Whether any of the group's assertions is for a named tool (its plans then depend on the tool).
bool hasToolAssertions(const GroupSettings& settings);

// One DataRow's values (text format; a NULL or a value that is not a number passes) against the
// checks with a column; a failure is counted and, the first few, described in `failures`.
void checkRow(const std::vector<AssertionCheck>& checks,
              const std::vector<std::optional<std::string_view>>& values, int64_t row,
              AssertionFailures& failures);

// "0..100", ">= 0", "<= 1".
std::string boundsText(const AssertionCheck& c);
// A bound as SQL writes it: 100, 0.5.
std::string numberText(double d);

// The config keys (result_assertions, soft_delete_columns) of group `path`; throws ConfigError
// naming the key.
std::vector<ResultAssertion> parseResultAssertions(const YAML::Node& node, const std::string& path);
std::vector<DeclaredColumn> parseSoftDeleteColumns(const YAML::Node& node, const std::string& path);

}  // namespace pgwarden::guards
