// The statement-only screens (docs/answers.md): a NULL comparison, NOT IN over a list holding
// NULL, integer division of counts, sum/avg of DISTINCT values, count(*) over a LEFT JOIN's
// unmatched rows. Each is a property of the statement itself (analysis/screen_facts.cpp found it),
// so it speaks whatever the result; the hint is the statement corrected.
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
bool sumIsInteger(const ScreenInput& in, const guards::ScreenIssue& issue) {
  const ResolvedColumn c = resolveColumn(in, issue.sum_table, issue.sum_column);
  return c.column && (c.column->type == "integer" || c.column->type == "smallint");
}

}  // namespace

void statementIssues(const ScreenInput& in, Findings& out) {
  using Kind = guards::ScreenIssue::Kind;
  for (const guards::ScreenIssue& issue : in.statement->screen.issues) {
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
    }
    r.subject = what;
    r.hint = correctedStatement(in, issue.location, issue.length, issue.replacement);
    out.push_back(std::move(r));
  }
}

}  // namespace pgwarden::screens::detail
