// Helpers the built-in guards share: name resolution against the group's search_path, table
// statistics lookup, glob patterns, and the small text formatting reasons need. Internal to guards/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "common/ascii.h"
#include "guards/guard.h"
#include "guards/policy.h"

namespace pgwarden::guards::util {

using pgwarden::iequals;
using pgwarden::lower;
// Shell-style glob: '*' any run, '?' one character. Case-insensitive when `icase`.
bool globMatch(std::string_view pattern, std::string_view text, bool icase);
// globMatch against "schema.name", without building it.
bool globMatch(std::string_view pattern, std::string_view schema, std::string_view name, bool icase);

std::string jsonEscape(std::string_view s);
// jsonEscape appended to `out` (no quotes added), without a temporary string.
void appendJsonEscaped(std::string& out, std::string_view s);
std::string withCommas(int64_t n);
// "about 1,000,000" style: two significant digits, for a person reading a reason.
std::string approxCount(int64_t n);

// An identifier as it would be written in SQL: bare when lower-case simple, else double-quoted.
std::string quoteIdent(std::string_view name);
// "schema.table" with quoting where needed (schema left out when empty).
std::string displayName(std::string_view schema, std::string_view name);

// The schema-qualified names an unqualified relation could resolve to, in the server's search
// order: pg_catalog first for names starting with "pg_" (pg_catalog is searched implicitly before
// the path), then each search_path schema ("public" when the group configures none). A qualified
// relation has exactly one candidate.
std::vector<std::string> candidates(const analysis::RelationRef& rel, const GroupSettings& group);
// The schemas of candidates() for a relation named `schema` (as written, "" unqualified) and
// `name`, in the same order, without building the names: `fn(schema)` returning true stops it.
template <typename Fn>
void forEachCandidateSchema(std::string_view schema, std::string_view name, const GroupSettings& group, Fn&& fn) {
  if (!schema.empty()) {
    fn(schema);
    return;
  }
  bool catalog_listed = false;
  for (const auto& s : group.search_path) catalog_listed = catalog_listed || iequals(s, "pg_catalog");
  if (!catalog_listed && name.rfind("pg_", 0) == 0 && fn(std::string_view("pg_catalog"))) return;
  if (group.search_path.empty()) {
    fn(std::string_view("public"));
    return;
  }
  for (const auto& s : group.search_path) {
    if (s != "$user" && fn(std::string_view(s))) return;  // "$user": the server role's schema, not known here
  }
}

// The statistics of the table a relation most likely resolves to, with its resolved name.
const analysis::TableStats* findStats(const analysis::TableStatsSnapshot* stats,
                                      const analysis::RelationRef& rel, const GroupSettings& group,
                                      std::string* resolved);
// The same for a table named by `schema` (as written, "" unqualified) and `name`, building no
// string: `found_schema`, when given and the table is found, views the schema it was found in
// (`schema`, a search_path entry of `group`, or a literal).
const analysis::TableStats* findStats(const analysis::TableStatsSnapshot* stats,
                                      std::string_view schema, std::string_view name,
                                      const GroupSettings& group, std::string_view* found_schema);

// An example condition on an indexed column of the given type. With the column's statistics
// and known bounds it lies inside the data (`ship_date >= DATE '2024-12-30' - 7`, `id = 199999`);
// without them it is a generic form (`ship_date >= current_date - 7`).
std::string examplePredicate(std::string_view column, std::string_view type,
                             const analysis::ColumnStats* stats = nullptr);
// The example on a table's first indexed column (its statistics used when the catalog has them);
// empty when the table has no indexed column.
std::string examplePredicate(const analysis::TableStats& table);

// The first `max` bytes of `s` on a UTF-8 boundary, with "..." when cut; whitespace collapsed.
std::string excerpt(std::string_view s, size_t max);

// The text of one statement (location/length applied), without surrounding whitespace.
std::string_view statementText(std::string_view sql, const analysis::StatementInfo& st);

}  // namespace pgwarden::guards::util
