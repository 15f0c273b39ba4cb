// What the result screens need to know about a statement, read from the same parse tree as the
// rest of its analysis: the column-versus-constant comparisons of the outermost WHERE (with the
// FROM item each column belongs to), LIMIT without ORDER BY, and count/sum over a join with its
// join keys. A statement with none of these cannot be flagged, and its results are not looked at.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pgwarden::guards {

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
  bool operator==(const ScreenValue&) const = default;
};

struct ScreenComparison {
  // kEq: col = v, col IN (...), col LIKE v without wildcards; kLower: col > / >= v (a range that
  // starts at v); kUpper: col < / <= v (one that ends at v).
  enum class Op { kEq, kLower, kUpper };
  Op op = Op::kEq;
  bool icase = false;     // ILIKE: matches regardless of case
  bool inclusive = true;  // >=, <= (and BETWEEN) rather than >, <
  int table = -1;         // index into ScreenFacts::tables; -1: unqualified with several tables
  std::string column;
  std::vector<ScreenValue> values;  // one for ranges and =, the list for IN
  bool operator==(const ScreenComparison&) const = default;
};

struct ScreenJoinKey {
  int table = -1;
  std::string column;
  bool operator==(const ScreenJoinKey&) const = default;
};

struct ScreenFacts {
  std::vector<ScreenTable> tables;          // the outermost FROM's plain tables, in order
  std::vector<ScreenComparison> comparisons;  // conjuncts of the outermost WHERE
  bool limit_without_order = false;         // LIMIT n at the top with no ORDER BY
  bool count_or_sum = false;                // count(...) or sum(...) in the outermost target list
  bool joined = false;                      // the outermost FROM joins two or more items
  std::vector<ScreenJoinKey> join_keys;     // pairs (2i, 2i+1): columns equated across two tables
  std::vector<int> summed_tables;           // tables whose column a sum(t.col) adds up
  // Nothing here could make a screen speak (UNFILTERED and PARTIAL_RESULT need no facts).
  bool empty() const {
    return comparisons.empty() && !limit_without_order && !(count_or_sum && joined);
  }
  bool operator==(const ScreenFacts&) const = default;
};

}  // namespace pgwarden::guards
