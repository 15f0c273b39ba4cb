// The statement-only screens (docs/answers.md): a NULL comparison, NOT IN over a list holding
// NULL, integer division of counts, sum/avg of DISTINCT values, count(*) over a LEFT JOIN's
// unmatched rows. Each is a property of the statement itself (analysis/screen_facts.cpp found it),
// so it speaks whatever the result; the hint is the statement corrected.
#include <cmath>
#include <optional>

#include "guards/codes.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

std::string correctedStatement(const ScreenInput& in, int location, int length,
                               std::string_view replacement) {
  if (in.sql.empty() || location < 0 || length < 0 ||
      static_cast<size_t>(location) + static_cast<size_t>(length) > in.sql.size()) {
    return {};
  }
  std::string out;
  out.reserve(in.sql.size() + replacement.size());
  out.append(in.sql.substr(0, static_cast<size_t>(location)))
      .append(replacement)
      .append(in.sql.substr(static_cast<size_t>(location + length)));
  return out;
}

namespace {

// Integer division of sum(col) only when the column adds up to a bigint (sum of smallint or
// integer); sum(bigint) and sum(numeric) are numeric.
bool sumIsInteger(const ScreenInput& in, const analysis::ScreenIssue& issue) {
  const ResolvedColumn c = resolveColumn(in, issue.sum_table, issue.sum_column);
  return c.column && (c.column->type == "integer" || c.column->type == "smallint");
}

// NOT IN (SELECT col FROM t): only when col may be NULL and the statistics saw NULLs in it.
std::optional<double> subqueryNulls(const ScreenInput& in, const analysis::ScreenIssue& issue) {
  const ResolvedColumn c = resolveTable(in, issue.ref_schema, issue.ref_table, issue.ref_column);
  if (!c.column || c.column->not_null || !c.column->analyzed || c.column->null_frac <= 0)
    return std::nullopt;
  return c.column->null_frac * static_cast<double>(c.table->estimated_rows);
}

}  // namespace

void statementIssues(const ScreenInput& in, Findings& out) {
  using Kind = analysis::ScreenIssue::Kind;
  for (const analysis::ScreenIssue& issue : in.statement->screen.issues) {
    guards::GuardResult r;
    const std::string& what = issue.subject;
    const std::string named = what.empty() ? std::string("this comparison") : what;
    switch (issue.kind) {
      case Kind::kNullComparison: {
        const bool is_null = issue.replacement == "IS NULL";
        r.code = std::string(guards::codes::kNullComparison);
        r.message = named + (is_null ? " = NULL" : " <> NULL") +
                    " is never true: a comparison with NULL is unknown, so no row matches it "
                    "whatever the data holds. Write " +
                    (what.empty() ? std::string("x ") : what + " ") + issue.replacement + ".";
        r.facts.add("column", what).add("fix", issue.replacement);
        break;
      }
      case Kind::kNotInNull:
        r.code = std::string(guards::codes::kNotInNull);
        r.message = "NOT IN with NULL in its list is never true: the NULL makes every comparison "
                    "unknown, so no row can match. Drop the NULL from the list.";
        r.facts.add("column", what).add("fix", "remove NULL from the NOT IN list");
        break;
      case Kind::kIntegerRatio:
        if (!issue.sum_column.empty() && !sumIsInteger(in, issue)) continue;
        r.code = std::string(guards::codes::kIntegerDivision);
        r.message = what + "(...) / count(...) divides whole numbers: the fraction is cut off, so a "
                    "share below 1 comes back as 0. Multiply by 1.0 before dividing.";
        r.facts.add("function", what).add("fix", "multiply the numerator by 1.0");
        break;
      case Kind::kDistinctMeasure:
        r.code = std::string(guards::codes::kDistinctMeasure);
        r.message = what + "(DISTINCT ...) takes each distinct value once: different rows with the "
                    "same amount count once, so the " + std::string(what == "sum" ? "total" : "average") +
                    " is wrong. Use " + what + "(...) over rows that are not repeated.";
        r.facts.add("function", what).add("fix", "drop DISTINCT");
        break;
      case Kind::kOuterJoinCount:
        r.code = std::string(guards::codes::kOuterJoinCount);
        r.message = "count(*) over a LEFT JOIN counts a row that matched nothing as 1, so groups "
                    "without matches show 1 instead of 0. Count the joined side's key: count(" +
                    what + ").";
        r.facts.add("count", "count(" + what + ")").add("fix", "count the joined table's key");
        break;
      case Kind::kNotInSubquery: {
        const std::optional<double> nulls = subqueryNulls(in, issue);
        if (!nulls) continue;
        const std::string table =
            issue.ref_schema.empty() ? issue.ref_table : issue.ref_schema + "." + issue.ref_table;
        r.code = std::string(guards::codes::kNotInNull);
        r.message = "NOT IN (SELECT " + what + " ...) is never true while " + what +
                    " holds a NULL, and " + table + "." + issue.ref_column +
                    " does: the result is empty (or NULL) whatever the other values. Add " + what +
                    " IS NOT NULL to the subquery, or use NOT EXISTS.";
        r.facts.add("column", what)
            .add("table", table)
            .add("null_rows", static_cast<int64_t>(std::llround(std::max(*nulls, 1.0))))
            .add("fix", "exclude NULLs in the subquery");
        break;
      }
      case Kind::kLeftJoinFiltered:
        r.code = std::string(guards::codes::kLeftJoinFiltered);
        r.message =
            "The WHERE condition on " + what +
            " is never true for rows the LEFT JOIN found no match for in " + issue.ref_table +
            ", so it drops them: the LEFT JOIN acts as an inner join. Move the condition into the "
            "join's ON to keep the unmatched rows (or write JOIN if only matches are meant).";
        r.facts.add("column", what)
            .add("table", issue.ref_table)
            .add("fix", "move the condition into ON");
        break;
    }
    r.subject = what;
    r.hint = correctedStatement(in, issue.location, issue.length, issue.replacement);
    out.push_back(std::move(r));
  }
}

}  // namespace pgwarden::screens::detail
