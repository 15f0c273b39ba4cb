// Where a statement's column references can show their values to the client: the facts the
// masked-columns check (guards/guard_masked.cpp) judges. A plain column in a SELECT's target
// list keeps its origin (table OID and attribute number) in the RowDescription, so pgwarden can
// replace its values; anything else that carries a value into the result (casts, concatenation,
// functions, aggregates other than count, whole-row references, set operations, RETURNING,
// VALUES, FROM functions) comes back with no origin and could not be masked. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::analysis {

struct ColumnExposure {
  bool ok = false;    // false: the text did not parse (or nests too deeply to check)
  std::string error;  // why, when !ok
  // Column names (as the parser folded them) that appear where their value would reach the
  // client without its origin: the expression kind in `how` ("an expression", "a set operation",
  // "RETURNING", ...), one entry per mention.
  struct Mention {
    std::string name;
    std::string how;
  };
  std::vector<Mention> revealed;
  // Single-name references that may be a whole row (`SELECT t FROM t`, `row_to_json(s)`), in
  // any position that reaches the client: judged against the relation names and aliases.
  std::vector<std::string> whole_rows;
  bool star_revealed = false;               // `t.*` inside an expression (`to_json(t.*)`)
  std::vector<std::string> relation_names;  // every relation name and alias (FROM, CTE)
  // Names that stand for another column: a target's alias (`ssn AS x`), a subquery's or CTE's
  // column list. `from` empty: the alias list of a body that selects `*` or several columns.
  struct Alias {
    std::string name;
    std::vector<std::string> from;
    bool any = false;  // stands for any column of its body (a column list, or `*`)
  };
  std::vector<Alias> aliases;
};

// Parses `sql` and walks every statement's parse tree.
ColumnExposure columnExposure(std::string_view sql);

// The names that carry a masked column's value in this statement: `masked` (lower case) and,
// transitively, every alias that stands for one of them.
std::vector<std::string> taintedNames(const ColumnExposure& e, std::vector<std::string> masked);

}  // namespace pgwarden::analysis
