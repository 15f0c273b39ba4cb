// Reduces one statement of libpg_query's JSON parse tree to a StatementInfo: kind, relations
// (CTE names told apart), functions, predicates, LIMIT, and the flags guards decide on.
// Internal to guards/; analysis.cpp calls it once per statement on a cache miss.
#pragma once

#include <string_view>

#include "analysis/analysis.h"
#include "analysis/pg_json.h"

namespace pgwarden::analysis::detail {

// `stmt` is the RawStmt's "stmt" node; `sql` the whole text (locations index into it). `out`
// arrives with location/length set.
void walkStatement(pgjson::element stmt, std::string_view sql, StatementInfo& out);

// Fills the result screens' facts of a SELECT (screen_facts.cpp); other statements leave `out`
// empty.
// `sql` is the whole text and `location` the statement's offset in it (for the issues' spans).
void walkScreenFacts(pgjson::element stmt, std::string_view sql, int location, ScreenFacts& out);

// Fills `out` when the SELECT is a keyed read (keyed_read.cpp); leaves it empty otherwise.
void findKeyedRead(pgjson::element stmt, KeyedRead& out);

// The byte length of the literal token (number, ALL, NULL, quoted string) starting at `pos`.
int literalLength(std::string_view sql, int pos);

}  // namespace pgwarden::analysis::detail
