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
  // Columns a conjunct of the WHERE compares with `=` to a literal that is not NULL, neither side
  // cast (`id = 42`, `'x' = code`). Empty: the statement is not a keyed read.
  std::vector<std::string> columns;
  bool operator==(const KeyedRead&) const = default;
};

}  // namespace pgwarden::analysis
