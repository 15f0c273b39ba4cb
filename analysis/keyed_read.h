// A read keyed by its WHERE: the outermost SELECT reads one table, returns one row for each of
// that table's rows its WHERE keeps, and a conjunct of the WHERE equates a column with a literal.
// When the catalog says one of those columns is unique, the statement returns at most one row,
// and a row cap in its text limits nothing (guards/guard_row_limit.cpp).
#pragma once

#include <string>
#include <vector>

namespace pgwarden::analysis {

struct KeyedRead {
  std::string schema;  // the table, as written ("" unqualified), lower-cased unless quoted
  std::string table;
  // Columns a conjunct of the WHERE compares with `=` to a literal that is not NULL or to a
  // parameter, neither side cast (`id = 42`, `'x' = code`, `id = $1`). Empty: the statement is
  // not a keyed read.
  std::vector<std::string> columns;
  // For each column, the parameter it is compared with (n for $n), or 0 for a literal. A client
  // may declare a parameter's type, and a column compared with another type may be cast to it
  // (a bigint column with a float8 $1 matches every value that rounds to it): such a comparison
  // counts only when the server infers the type (guards::RequestContext::inferred_params).
  std::vector<int> params;
  bool operator==(const KeyedRead&) const = default;
};

}  // namespace pgwarden::analysis
