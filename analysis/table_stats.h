// The catalog snapshot require_predicate, cost_gate and the result screens read: estimated rows,
// the leading columns of each table's indexes and column statistics. The daemon runs
// catalogQuery() on its own connection at start-up and on a timer; readers only ever see an
// immutable snapshot.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/column_stats.h"

namespace pgwarden::analysis {

// A table named by its schema and name, compared with the snapshot's "schema.table" keys as if
// joined by the dot, so a lookup needs no joined string.
struct QualifiedName {
  std::string_view schema;
  std::string_view table;
};
int compareQualified(std::string_view key, const QualifiedName& name);
inline bool operator<(const std::string& key, const QualifiedName& name) { return compareQualified(key, name) < 0; }
inline bool operator<(const QualifiedName& name, const std::string& key) { return compareQualified(key, name) > 0; }

// What the catalog says about tables, refreshed by the daemon on its own server connection.
struct TableStats {
  int64_t estimated_rows = 0;
  // pg_class.relkind: 'r' table, 'p' partitioned table, 'v' view, 'm' materialized view, 'f'
  // foreign table.
  char kind = 'r';
  // pg_class.relhassubclass: the table has (or had) inheritance children or partitions. True
  // when the catalog did not say.
  bool has_children = true;
  std::vector<std::string> indexed_columns;  // leading column of each index, best first
  std::vector<std::string> indexed_column_types;  // same order: "date", "bigint", ... ("" unknown)
  // Columns with an enum type, a CHECK IN-list or pg_stats (columnStatsQuery()), by name.
  std::map<std::string, ColumnStats, std::less<>> columns;
  // The table's OID and its columns' names by attribute number (attributes[attnum - 1]; "" for
  // a dropped one): what a RowDescription names a column by. 0 and empty when unknown.
  uint32_t oid = 0;
  std::vector<std::string> attributes;
};
class TableStatsSnapshot {
 public:
  // The query the daemon runs (read-only, catalog only); each row: schema, table, reltuples,
  // comma-separated leading index columns (btree first), comma-separated types of those columns,
  // relkind (views are listed too, with no rows estimated).
  static const char* catalogQuery();
  // Builds a snapshot from that query's text-format rows (4 to 6 columns; bad rows are skipped).
  // `column_rows` are columnStatsQuery()'s rows (malformed ones and unknown tables skipped).
  static std::shared_ptr<const TableStatsSnapshot> fromRows(
      const std::vector<std::vector<std::string>>& rows,
      const std::vector<std::vector<std::string>>& column_rows = {});
  const TableStats* find(std::string_view schema, std::string_view table) const;
  size_t size() const { return tables_.size(); }

  // A column whose bounds only its index can give (ColumnStats::needsIndexBounds()), and what
  // reading them found: `low` and `high` empty when nothing (an empty table, a failed probe).
  struct IndexBounds {
    std::string schema, table, column, low, high;
  };
  // At most `max` of the columns that need index bounds, in name order starting at the
  // `start`-th (modulo their number, wrapping), so that successive refreshes that pass a growing
  // `start` read every one of them in turn.
  std::vector<IndexBounds> boundsProbes(size_t start, size_t max) const;
  // A copy with the bounds of `probed` set (an entry without bounds clears them); a column that
  // needs index bounds but was not probed keeps what `previous` (the last snapshot, may be null)
  // had for it.
  std::shared_ptr<const TableStatsSnapshot> withIndexBounds(const std::vector<IndexBounds>& probed,
                                                            const TableStatsSnapshot* previous) const;
  // A copy without the statistics of the columns `drop` names ("schema.table" key, column): a
  // group's masked columns, whose statistics hold their values.
  template <typename Drop>
  std::shared_ptr<const TableStatsSnapshot> withoutColumns(Drop&& drop) const {
    auto snap = std::make_shared<TableStatsSnapshot>(*this);
    snap->generation_ = nextGeneration();
    for (auto& [key, table] : snap->tables_) {
      for (auto it = table.columns.begin(); it != table.columns.end();) {
        it = drop(key, it->first) ? table.columns.erase(it) : std::next(it);
      }
    }
    return snap;
  }
  // Unique per snapshot for the process's life, copies included (never reused, unlike an
  // address): a cache of decisions made over a snapshot is keyed by it.
  uint64_t generation() const { return generation_; }
  // Every table, keyed "schema.table", in name order.
  const std::map<std::string, TableStats, std::less<>>& tables() const { return tables_; }
  // Seconds since the catalog was read (copies keep the time of the read they came from).
  int64_t ageSeconds() const {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                            read_at_)
        .count();
  }

 private:
  static uint64_t nextGeneration();
  std::map<std::string, TableStats, std::less<>> tables_;  // key "schema.table"
  uint64_t generation_ = nextGeneration();
  std::chrono::steady_clock::time_point read_at_ = std::chrono::steady_clock::now();
};

}  // namespace pgwarden::analysis
