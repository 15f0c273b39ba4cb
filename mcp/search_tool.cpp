// The `search` tool's catalog statement and answer (search_tool.h).
#include "mcp/search_tool.h"

#include <charconv>

namespace pgwarden::mcp {

namespace {

constexpr size_t kSummaryComment = 200;
constexpr size_t kFullComment = 2000;

// At most `max` bytes of `s`, cut at a character boundary, "..." when cut.
std::string cutComment(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

const char* searchRelationKind(std::string_view k) {
  if (k == "v") return "view";
  if (k == "m") return "materialized view";
  if (k == "p") return "partitioned table";
  if (k == "f") return "foreign table";
  return "table";
}

}  // namespace

std::string quoteLiteral(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
  return out;
}

std::optional<SearchDetail> parseSearchDetail(std::string_view s) {
  if (s.empty() || s == "names") return SearchDetail::kNames;
  if (s == "summary") return SearchDetail::kSummary;
  if (s == "full") return SearchDetail::kFull;
  return std::nullopt;
}

std::string searchSql(std::string_view text, std::string_view schema) {
  const std::string p = "lower(" + quoteLiteral(text) + ")";
  std::string rels =
      "SELECT n.nspname AS s, c.relname AS t, c.relkind::text AS k, c.oid AS o,"
      " obj_description(c.oid, 'pg_class') AS cm FROM pg_class c"
      " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r','p','v','m','f')"
      " AND n.nspname NOT IN ('pg_catalog','information_schema') AND n.nspname NOT LIKE 'pg\\_%'";
  if (!schema.empty()) rels += " AND n.nspname = " + quoteLiteral(schema);
  auto score = [&p](const std::string& name, const std::string& comment, int exact, int prefix,
                    int inside, int in_comment) {
    return "CASE WHEN lower(" + name + ") = " + p + " THEN " + std::to_string(exact) +
           " WHEN starts_with(lower(" + name + "), " + p + ") THEN " + std::to_string(prefix) +
           " WHEN strpos(lower(" + name + "), " + p + ") > 0 THEN " + std::to_string(inside) +
           " WHEN strpos(lower(coalesce(" + comment + ", '')), " + p + ") > 0 THEN " +
           std::to_string(in_comment) + " ELSE 0 END";
  };
  return "WITH r AS (" + rels +
         ") SELECT * FROM (SELECT 'table' AS what, s, t, NULL::text AS col, NULL::text AS typ, cm, "
         "k, " +
         score("t", "cm", 100, 80, 60, 30) +
         " AS score FROM r UNION ALL SELECT 'column', r.s, r.t, a.attname::text,"
         " format_type(a.atttypid, a.atttypmod), col_description(r.o, a.attnum), r.k, " +
         score("a.attname::text", "col_description(r.o, a.attnum)", 90, 70, 50, 20) +
         " FROM r JOIN pg_attribute a ON a.attrelid = r.o AND a.attnum > 0 AND NOT a.attisdropped)"
         " m WHERE score > 0 ORDER BY score DESC, s, t, col NULLS FIRST LIMIT " +
         std::to_string(kSearchMaxRows + 1);
}

Json searchAnswer(const std::vector<std::vector<std::optional<std::string>>>& rows,
                  SearchDetail detail, int64_t limit,
                  const std::function<bool(const std::string&)>& allowed) {
  Json matches = Json::array();
  bool truncated = rows.size() > static_cast<size_t>(kSearchMaxRows);
  for (const auto& row : rows) {
    if (row.size() < 8 || !row[0] || !row[1] || !row[2]) continue;
    const std::string table = *row[1] + "." + *row[2];
    if (!allowed(table)) continue;
    if (static_cast<int64_t>(matches.size()) >= limit) {
      truncated = true;
      break;
    }
    const bool column = *row[0] == "column" && row[3];
    Json m{{"kind", column ? "column" : searchRelationKind(row[6].value_or(""))},
           {"name", column ? table + "." + *row[3] : table}};
    if (detail != SearchDetail::kNames) {
      if (column) {
        m["table"] = table;
        m["type"] = row[4].value_or("");
      }
      int score = 0;
      const std::string& text = row[7] ? *row[7] : std::string();
      (void)std::from_chars(text.data(), text.data() + text.size(), score);
      m["score"] = score;
      if (row[5])
        m["comment"] =
            cutComment(*row[5], detail == SearchDetail::kFull ? kFullComment : kSummaryComment);
    }
    matches.push_back(std::move(m));
  }
  Json out{{"matches", std::move(matches)}, {"truncated", truncated}};
  if (truncated) out["next_step"] = "search with a longer text, a schema, or a higher limit";
  return out;
}

}  // namespace pgwarden::mcp
