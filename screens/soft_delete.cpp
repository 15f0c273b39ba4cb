// SOFT_DELETED_ROWS: a read of a table with a soft-delete column (deleted_at, archived_at,
// is_deleted...: found by name and type, or declared in the group's soft_delete_columns) that
// does not name it, while the statistics say some
// rows are marked deleted: the answer includes them. The count is the estimate pg_stats gives
// (null_frac of a timestamp, the frequency of true of a boolean); no probe, no round trip. The
// hint is the statement with the filter added. A lookup by a unique key is left alone.
#include <cmath>

#include "guards/codes.h"
#include "guards/guard_util.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {

struct SoftDelete {
  const std::string* column = nullptr;
  bool flag = false;   // a boolean (is_deleted) rather than a time (deleted_at)
  double deleted = 0;  // estimated rows marked deleted
};

// The rows `col` marks deleted: a time that is not NULL, or a boolean that is true.
SoftDelete marked(const std::string& name, const analysis::ColumnStats& col,
                  int64_t estimated_rows) {
  const double rows = static_cast<double>(estimated_rows);
  if (!col.analyzed) return {};
  if (col.category == 'D') {
    if (col.not_null) return {};  // a deleted_at that is never NULL marks nothing
    return SoftDelete{&name, false, (1.0 - col.null_frac) * rows};
  }
  if (col.type != "boolean") return {};
  double share = 0;
  for (size_t i = 0; i < col.mcv.size() && i < col.mcv_freqs.size(); ++i) {
    if (col.mcv[i] == "t" || col.mcv[i] == "true") share = col.mcv_freqs[i];
  }
  return SoftDelete{&name, true, share * rows};
}

// The table's soft-delete column that marks rows: one the group declares for it (unless the
// statement names it), else one found by name and type.
SoftDelete softDeleteOf(const ScreenInput& in, const analysis::TableStats& t,
                        std::string_view schema, std::string_view table) {
  if (in.group) {
    for (const auto& d : in.group->settings().soft_delete_columns) {
      if (d.schema != schema || d.table != table) continue;
      auto it = t.columns.find(d.column);
      // The screened text must be at hand to tell whether it names the column.
      if (it == t.columns.end() || in.sql.empty() ||
          analysis::namesWord(in.sql, guards::util::lower(d.column))) {
        continue;
      }
      SoftDelete out = marked(it->first, it->second, t.estimated_rows);
      if (out.column && out.deleted >= 1) return out;
    }
  }
  for (const auto& [name, col] : t.columns) {
    if (!analysis::softDeleteColumn(name, col)) continue;
    SoftDelete out = marked(name, col, t.estimated_rows);
    if (out.column && out.deleted >= 1) return out;
  }
  return {};
}

// A lookup by a unique key (`id = 42` among the outermost WHERE's conjuncts) names its row:
// whether that row is marked deleted is not what the table's share of deleted rows says, so "the
// answer includes deleted rows" would be wrong far more often than right.
bool identifiesOneRow(const ScreenInput& in, const analysis::TableStats& ts) {
  for (const analysis::ScreenComparison& c : in.statement->screen.comparisons) {
    if (c.op != analysis::ScreenComparison::Op::kEq || c.values.size() != 1 || c.values[0].null) {
      continue;
    }
    const ResolvedColumn col = resolveColumn(in, c.table, c.column);
    if (col.table == &ts && col.column->unique) return true;
  }
  return false;
}

}  // namespace

void softDeletes(const ScreenInput& in, Findings& out) {
  const analysis::ScreenFacts& f = in.statement->screen;
  if (f.mentions_soft_delete || !in.stats) return;
  static const guards::GroupSettings kNoGroup{};
  const guards::GroupSettings& settings = in.group ? in.group->settings() : kNoGroup;
  for (const analysis::ScreenTable& t : f.tables) {
    std::string_view schema;
    const analysis::TableStats* ts =
        guards::util::findStats(in.stats, t.schema, t.name, settings, &schema);
    if (!ts) continue;
    const SoftDelete sd = softDeleteOf(in, *ts, schema, t.name);
    if (!sd.column || identifiesOneRow(in, *ts)) continue;
    const std::string table = std::string(schema) + "." + t.name;
    const std::string written =
        f.tables.size() == 1 ? *sd.column : (t.alias.empty() ? t.name : t.alias) + "." + *sd.column;
    const std::string filter = sd.flag ? "NOT " + written : written + " IS NULL";
    const auto deleted = static_cast<int64_t>(std::llround(sd.deleted));
    guards::GuardResult r;
    r.code = std::string(guards::codes::kSoftDeletedRows);
    r.subject = table;
    r.message =
        table + " marks deleted rows in " + *sd.column + " (about " + std::to_string(deleted) +
        " of " + std::to_string(ts->estimated_rows) +
        "), and this statement does not filter on it: the answer includes rows that are deleted. "
        "Add " +
        filter + " unless deleted rows are meant.";
    r.facts.add("table", table)
        .add("column", *sd.column)
        .add("deleted_rows", deleted)
        .add("estimated_rows", ts->estimated_rows)
        .add("filter", filter);
    if (f.filter_at >= 0) {
      // Before GROUP BY or ORDER BY, or at the end of the text.
      const bool at_end = static_cast<size_t>(f.filter_at) >= in.sql.size();
      r.hint = correctedStatement(in, f.filter_at, 0,
                                  f.filter_in_where
                                      ? filter + " AND "
                                      : (at_end ? " WHERE " + filter : "WHERE " + filter + " "));
    }
    out.push_back(std::move(r));
    return;
  }
}

}  // namespace pgwarden::screens::detail
