// The catalog snapshot (analysis/table_stats.h): the query that reads it and the rows it is built
// from.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <string>

#include <simdjson.h>

#include "analysis/table_stats.h"

namespace pgwarden::analysis {

const char* TableStatsSnapshot::catalogQuery() {
  // Row estimates: the planner's own rule. reltuples/relpages scaled to the current size when
  // both are known; for a table never vacuumed or analysed (reltuples < 0, relpages 0) the size
  // on disk at an assumed 60 rows per page, so a freshly loaded big table still counts as big.
  // Index columns: the first key column of every valid index, btree first, and non-unique before
  // unique ones: "filter on ship_date" helps an agent more than "look up one id".
  return "SELECT n.nspname, c.relname,"
         " greatest(CASE"
         "   WHEN c.reltuples > 0 AND c.relpages > 0 THEN c.reltuples / c.relpages *"
         "     greatest(sz.pages, c.relpages)"
         "   WHEN c.reltuples > 0 THEN c.reltuples"
         "   ELSE sz.pages * 60 END, 0)::bigint::text,"
         " coalesce(ix.cols, ''), coalesce(ix.types, ''),"
         // The table's OID and its columns' numbers, which the masked columns are resolved to
         // (a RowDescription names a column by these).
         " c.oid::text, coalesce((SELECT pg_catalog.json_object_agg(a.attname, a.attnum)"
         "   FROM pg_catalog.pg_attribute a"
         "   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)::text, '{}'),"
         " c.relkind::text,"
         // Inheritance children: a read of the parent reads their rows too, which its unique
         // indexes do not cover.
         " c.relhassubclass::text"
         " FROM pg_catalog.pg_class c"
         " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
         " CROSS JOIN LATERAL (SELECT CASE WHEN c.relkind IN ('r', 'm')"
         "   THEN pg_catalog.pg_relation_size(c.oid) / current_setting('block_size')::bigint"
         "   ELSE 0 END AS pages) sz"
         " LEFT JOIN LATERAL ("
         "   SELECT string_agg(a.attname::text, ',' ORDER BY am.amname <> 'btree',"
         "       i.indisunique, a.attnum) AS cols,"
         "     string_agg(pg_catalog.format_type(a.atttypid, NULL), ',' ORDER BY am.amname <> "
         "'btree',"
         "       i.indisunique, a.attnum) AS types"
         "   FROM pg_catalog.pg_index i"
         "   JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid"
         "   JOIN pg_catalog.pg_am am ON am.oid = ic.relam"
         "   JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
         "   WHERE i.indrelid = c.oid AND i.indkey[0] <> 0 AND i.indisvalid) ix ON true"
         " WHERE c.relkind IN ('r', 'p', 'm', 'f', 'v')"
         " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
         " AND n.nspname !~ '^pg_(toast|temp_)'";
}

namespace {

// The 6th and 7th columns of catalogQuery(): the OID and {"column": attnum, ...}.
void readAttributes(const std::string& oid, const std::string& json, TableStats& stats) {
  uint32_t n = 0;
  const auto [ptr, ec] = std::from_chars(oid.data(), oid.data() + oid.size(), n);
  if (ec != std::errc() || ptr != oid.data() + oid.size()) return;
  simdjson::dom::parser parser;
  simdjson::dom::object o;
  if (parser.parse(json).get_object().get(o) != simdjson::SUCCESS) return;
  stats.oid = n;
  for (auto field : o) {
    int64_t attnum = 0;
    if (field.value.get_int64().get(attnum) != simdjson::SUCCESS || attnum <= 0 ||
        attnum > 1600) {
      continue;
    }
    if (stats.attributes.size() < static_cast<size_t>(attnum)) stats.attributes.resize(attnum);
    stats.attributes[attnum - 1] = std::string(field.key);
  }
}

std::vector<std::string> splitCommas(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

uint64_t TableStatsSnapshot::nextGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<const TableStatsSnapshot> TableStatsSnapshot::fromRows(
    const std::vector<std::vector<std::string>>& rows,
    const std::vector<std::vector<std::string>>& column_rows) {
  auto snap = std::make_shared<TableStatsSnapshot>();
  for (const auto& row : rows) {
    if (row.size() < 4 || row[0].empty() || row[1].empty()) continue;
    int64_t n = 0;
    const auto& t = row[2];
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (ec != std::errc() || ptr != t.data() + t.size() || n < 0) continue;
    TableStats stats;
    stats.estimated_rows = n;
    if (row.size() >= 8 && row[7].size() == 1) stats.kind = row[7][0];
    if (row.size() >= 9) stats.has_children = row[8] != "false";
    const std::vector<std::string> cols = splitCommas(row[3]);
    const std::vector<std::string> types = row.size() >= 5 ? splitCommas(row[4]) : std::vector<std::string>{};
    for (size_t i = 0; i < cols.size(); ++i) {
      bool seen = false;
      for (const auto& c : stats.indexed_columns) seen = seen || c == cols[i];
      if (seen || cols[i].empty()) continue;
      stats.indexed_columns.push_back(cols[i]);
      stats.indexed_column_types.push_back(i < types.size() ? types[i] : "");
    }
    if (row.size() >= 7) readAttributes(row[5], row[6], stats);
    snap->tables_[row[0] + "." + row[1]] = std::move(stats);
  }
  for (const auto& row : column_rows) {
    auto col = parseColumnRow(row);
    if (!col) continue;
    auto it = snap->tables_.find(col->schema + "." + col->table);
    if (it != snap->tables_.end()) it->second.columns[col->column] = std::move(col->stats);
  }
  return snap;
}

std::vector<TableStatsSnapshot::IndexBounds> TableStatsSnapshot::boundsProbes(size_t start,
                                                                             size_t max) const {
  std::vector<IndexBounds> all;
  for (const auto& [key, table] : tables_) {
    for (const auto& [name, col] : table.columns) {
      if (!col.needsIndexBounds()) continue;
      const size_t dot = key.find('.');  // schema names with a dot are split wrongly: not probed
      if (dot == std::string::npos || key.find('.', dot + 1) != std::string::npos) continue;
      all.push_back({key.substr(0, dot), key.substr(dot + 1), name, "", ""});
    }
  }
  if (all.size() <= max) return all;
  std::vector<IndexBounds> out;
  out.reserve(max);
  for (size_t i = 0; i < max; ++i) out.push_back(std::move(all[(start + i) % all.size()]));
  return out;
}

std::shared_ptr<const TableStatsSnapshot> TableStatsSnapshot::withIndexBounds(
    const std::vector<IndexBounds>& probed, const TableStatsSnapshot* previous) const {
  auto snap = std::make_shared<TableStatsSnapshot>(*this);
  snap->generation_ = nextGeneration();
  if (previous) {
    for (auto& [key, table] : snap->tables_) {
      auto old = previous->tables_.find(key);
      if (old == previous->tables_.end()) continue;
      for (auto& [name, col] : table.columns) {
        auto was = old->second.columns.find(name);
        if (!col.needsIndexBounds() || was == old->second.columns.end()) continue;
        col.index_low = was->second.index_low;
        col.index_high = was->second.index_high;
      }
    }
  }
  for (const auto& p : probed) {
    auto t = snap->tables_.find(p.schema + "." + p.table);
    if (t == snap->tables_.end()) continue;
    auto c = t->second.columns.find(p.column);
    if (c == t->second.columns.end()) continue;
    c->second.index_low = p.low;
    c->second.index_high = p.high;
  }
  return snap;
}

int compareQualified(std::string_view key, const QualifiedName& name) {
  // key against schema + "." + table, byte by byte (std::string's order: unsigned chars).
  const auto part = [](std::string_view k, std::string_view p) {
    const size_t n = std::min(k.size(), p.size());
    const int c = n == 0 ? 0 : std::char_traits<char>::compare(k.data(), p.data(), n);
    return c != 0 ? c : (k.size() < p.size() ? -1 : 0);  // -1: key ends inside this part
  };
  if (const int c = part(key, name.schema); c != 0 || key.size() < name.schema.size()) return c;
  key.remove_prefix(name.schema.size());
  if (key.empty()) return -1;
  if (key.front() != '.') return static_cast<unsigned char>(key.front()) < static_cast<unsigned char>('.') ? -1 : 1;
  key.remove_prefix(1);
  if (const int c = part(key, name.table); c != 0) return c;
  return key.size() == name.table.size() ? 0 : (key.size() < name.table.size() ? -1 : 1);
}

const TableStats* TableStatsSnapshot::find(std::string_view schema, std::string_view table) const {
  auto it = tables_.find(QualifiedName{schema, table});
  return it == tables_.end() ? nullptr : &it->second;
}

}  // namespace pgwarden::analysis
