// The helpers analysis/screen_facts.cpp and analysis/screen_facts_nulls.cpp share while reading a
// statement's screen facts: column and constant recognition, spans in the statement's text.
// Internal to analysis/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/pg_json.h"
#include "analysis/screen_facts.h"

namespace pgwarden::analysis::detail::facts {

// Spans are kept relative to the statement's text as the screens see it (leading white space
// cut, as history's text is).
struct Text {
  std::string_view sql;  // the whole text
  int base = 0;          // where the statement's screened text begins in it
};

std::string_view opName(pgjson::object body);
std::string funcName(pgjson::object fn);
// The column a ColumnRef (or a cast of one) names, with the FROM table it resolves to.
bool columnOf(pgjson::element e, const ScreenFacts& f, bool single_item, int& table,
              std::string& column);
// A constant, a $n, or a relative time (now() - interval '30 days').
bool valueOf(pgjson::element e, ScreenValue& v);
int locationOf(pgjson::element e);
bool wordAt(std::string_view sql, int pos, std::string_view word);
size_t skipSpaces(std::string_view sql, size_t pos);
// One past the end of the plain '...' string written at `pos`; -1 otherwise or when a cast follows.
int stringEnd(std::string_view sql, int pos);
// The top-level AND's operands of a condition that are A_Expr (bounded).
void conjuncts(pgjson::element e, std::vector<pgjson::object>& out);
void addIssue(ScreenFacts& f, const Text& text, ScreenIssue::Kind kind, std::string subject,
              int from, int to, std::string replacement);

// screen_facts_nulls.cpp: `x NOT IN (SELECT col FROM t ...)` (the SubLink under the NOT), and a
// WHERE condition on a LEFT JOIN's nullable side.
void notInSubquery(pgjson::object sublink, const Text& text, ScreenFacts& f);
void leftJoinFiltered(pgjson::object select, const Text& text, ScreenFacts& f);
// Whether the text names a soft-delete column, and where a filter on one would go.
void softDeleteFacts(pgjson::object select, const Text& text, ScreenFacts& f);

}  // namespace pgwarden::analysis::detail::facts
