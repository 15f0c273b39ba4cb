// What the result screens need to know about a statement, read from the same parse tree as the
// rest of its analysis: the column-versus-constant comparisons of the outermost WHERE (with the
// FROM item each column belongs to), LIMIT without ORDER BY, and count/sum over a join with its
// join keys. A statement with none of these cannot be flagged, and its results are not looked at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::analysis {

struct ScreenTable {
  std::string schema;  // as written ("" unqualified)
  std::string name;
  std::string alias;   // "" when none
  bool operator==(const ScreenTable&) const = default;
};

struct ScreenValue {
  std::string text;    // the constant as decoded; empty with param > 0
  int param = 0;       // $n whose bound value is the value (0: a constant)
  bool null = false;   // the constant NULL (never a value of a column)
  // now() / current_timestamp / current_date, plus or minus a constant interval: folded to a day
  // when the result is screened (the text is then empty).
  bool relative = false;
  int rel_days = 0;
  int rel_months = 0;
  bool operator==(const ScreenValue&) const = default;
};

struct ScreenComparison {
  // kEq: col = v, col IN (...), col LIKE v without wildcards; kLower: col > / >= v (a range that
  // starts at v); kUpper: col < / <= v (one that ends at v); kLike: col LIKE / ILIKE a constant
  // pattern with wildcards; kIsNull, kNotNull: col IS [NOT] NULL (no value).
  enum class Op { kEq, kLower, kUpper, kLike, kIsNull, kNotNull };
  Op op = Op::kEq;
  bool icase = false;     // ILIKE: matches regardless of case
  bool inclusive = true;  // >=, <= (and BETWEEN) rather than >, <
  int table = -1;         // index into ScreenFacts::tables; -1: unqualified with several tables
  std::string column;
  // A range's upper end written `<=` or BETWEEN: the predicate's span in the text (for the
  // corrected statement when a timestamp column is cut at midnight); -1 otherwise.
  int location = -1;
  int length = 0;
  bool between = false;
  std::vector<ScreenValue> values;  // one for ranges and =, the list for IN
  bool operator==(const ScreenComparison&) const = default;
};

struct ScreenJoinKey {
  int table = -1;
  std::string column;
  int location = -1;  // where the column is written, relative to the screened text
  bool operator==(const ScreenJoinKey&) const = default;
};

// A statement-only mistake (docs/answers.md): its answer is probably wrong whatever the data
// holds. The corrected statement is the text with [location, location + length) (byte offsets in
// the whole text, as the statement's own) replaced by `replacement`.
struct ScreenIssue {
  enum class Kind : uint8_t {
    kNullComparison,    // col = NULL, col <> NULL: never true
    kNotInNull,         // col NOT IN (..., NULL): never true
    kIntegerRatio,      // count(...) / count(...): integer division
    kDistinctMeasure,   // sum(DISTINCT x), avg(DISTINCT x): equal values of different rows collapse
    kOuterJoinCount,    // count(*) per row of a LEFT JOIN's preserved side: 1 where nothing matched
    kNotInSubquery,     // x NOT IN (SELECT col ...): a NULL in col empties the result
    kLeftJoinFiltered,  // WHERE on a LEFT JOIN's nullable side: the join acts as an inner join
  };
  Kind kind = Kind::kNullComparison;
  std::string subject;      // the column (or aggregate) as written
  int location = -1;
  int length = 0;
  std::string replacement;
  // kIntegerRatio over sum(t.col): integer division only when the column is smallint or integer.
  int sum_table = -1;
  std::string sum_column;
  // kNotInSubquery: the subquery's table and column, whose NULLs the screen looks up.
  std::string ref_schema, ref_table, ref_column;
  bool operator==(const ScreenIssue&) const = default;
};

struct ScreenFacts {
  std::vector<ScreenTable> tables;          // the outermost FROM's plain tables, in order
  std::vector<ScreenComparison> comparisons;  // conjuncts of the outermost WHERE
  // How many conjuncts the outermost WHERE has, understood or not (bounded): when it equals the
  // comparisons' count, they are the whole condition.
  int where_conditions = 0;
  bool grouped_filter = false;  // HAVING (a condition on groups, not rows)
  // The result's column names in order, as PostgreSQL names them (alias, column, function);
  // empty when the target list holds a `*` (result_assertions match these names).
  std::vector<std::string> outputs;
  bool limit_without_order = false;         // LIMIT n at the top with no ORDER BY
  bool count_or_sum = false;                // count(...) or sum(...) in the outermost target list
  bool joined = false;                      // the outermost FROM joins two or more items
  std::vector<ScreenJoinKey> join_keys;     // pairs (2i, 2i+1): columns equated across two tables
  std::vector<int> summed_tables;           // tables whose column a sum(t.col) adds up
  std::vector<ScreenIssue> issues;          // statement-only mistakes (bounded)
  // The text names something deleted or archived (a soft-delete column, filtered or read): the
  // soft-delete screen stays silent. Else where a filter on one would go: the start of the WHERE's
  // condition (`filter_in_where`), or where a WHERE would be added; -1 when neither is plain.
  bool mentions_soft_delete = false;
  bool filter_in_where = false;
  int filter_at = -1;
  // Nothing here could make a screen speak (UNFILTERED and PARTIAL_RESULT need no facts).
  bool empty() const {
    return comparisons.empty() && !limit_without_order && !(count_or_sum && joined) &&
           join_keys.empty() && issues.empty();
  }
  bool operator==(const ScreenFacts&) const = default;
};

// Whether `word` (lowercase) occurs in `sql` outside its string constants and comments, where a
// name would be written (a constant is data the shape cache may swap for another).
bool namesWord(std::string_view sql, std::string_view word);

}  // namespace pgwarden::analysis
