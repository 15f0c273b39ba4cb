// require_predicate: a row-returning read of a big table (estimated rows >= min_rows from the
// catalog snapshot, or listed in config) must filter it with a non-trivial predicate. Aggregates
// pass: a grouped count is how an agent learns what a column holds; the cost gate governs them.
// The reason names the table, its size, an indexed column and an example condition.
#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

class RequirePredicateGuard final : public Guard {
 public:
  RequirePredicateGuard(int64_t min_rows, std::vector<std::string> tables)
      : min_rows_(min_rows), tables_(std::move(tables)) {}

  std::string_view kind() const override { return "require_predicate"; }
  bool deterministic() const override { return true; }
  bool literalBlind() const override { return true; }
  std::vector<std::string_view> codes() const override { return {codes::kMissingPredicate}; }

  GuardResult checkStatement(const GuardInput& in,
                             const analysis::StatementInfo& st) const override {
    const bool read = (st.kind == analysis::StatementKind::kSelect && st.returns_rows) ||
                      (st.kind == analysis::StatementKind::kCopy && st.returns_rows) ||
                      ((st.kind == analysis::StatementKind::kPrepare ||
                        st.kind == analysis::StatementKind::kDeclareCursor) &&
                       st.inner_kind == analysis::StatementKind::kSelect);
    if (!read) return {};
    for (const auto& rel : st.relations) {
      if (!rel.unbounded_read) continue;
      std::string resolved;
      const analysis::TableStats* stats = util::findStats(in.stats, rel, in.group, &resolved);
      const bool big_by_size = stats && min_rows_ > 0 && stats->estimated_rows >= min_rows_;
      if (big_by_size || listed(rel, in.group)) return deny(rel, resolved, stats);
    }
    return {};
  }

 private:
  bool listed(const analysis::RelationRef& rel, const GroupSettings& group) const {
    for (const auto& n : util::candidates(rel, group)) {
      for (const auto& p : tables_) {
        if (util::globMatch(p, n, true)) return true;
      }
    }
    return false;
  }

  GuardResult deny(const analysis::RelationRef& rel, const std::string& resolved,
                   const analysis::TableStats* stats) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kMissingPredicate);
    r.subject = resolved;
    const size_t dot = resolved.find('.');
    const std::string table = dot == std::string::npos
                                  ? util::quoteIdent(resolved)
                                  : util::displayName(resolved.substr(0, dot), resolved.substr(dot + 1));
    std::string column, predicate;
    if (stats && !stats->indexed_columns.empty()) {
      column = stats->indexed_columns.front();
      predicate = util::examplePredicate(*stats);
    }
    const std::string size = stats ? table + " has " + util::approxCount(stats->estimated_rows) + " rows"
                                   : table + " is a large table";
    std::string what = rel.trivial_predicate
                           ? " and this query's WHERE clause cannot filter them (conditions such as "
                             "1=1, true, x = x or an OR with such a branch match every row)"
                           : " and this query reads them without a filter";
    if (!stats) what = rel.trivial_predicate ? " and this query's WHERE clause cannot filter it"
                                             : " and this query reads it without a filter";
    std::string next;
    if (!column.empty()) {
      next = "add a WHERE condition on an indexed column such as " + column + " (for example " +
             predicate + "), or aggregate with GROUP BY";
      r.hint = "SELECT * FROM " + table + " WHERE " + predicate + " LIMIT 100";
    } else {
      next = "add a WHERE condition that narrows the rows, or aggregate with GROUP BY";
      r.hint = "SELECT count(*) FROM " + table;
    }
    r.message = size + what + "; " + next + ".";
    r.facts.add("table", resolved);
    if (stats) r.facts.add("estimated_rows", stats->estimated_rows);
    if (stats) r.facts.add("indexed_columns", stats->indexed_columns);
    if (!predicate.empty()) r.facts.add("example_predicate", predicate);
    r.facts.add("trivial_predicate", rel.trivial_predicate).add("next_step", next);
    return r;
  }

 public:
  std::string describe() const override {
    Facts f;
    f.add("min_rows", min_rows_);
    if (!tables_.empty()) f.add("tables", tables_);
    return f.json(kind());
  }

 private:
  int64_t min_rows_;
  std::vector<std::string> tables_;
};

}  // namespace

std::unique_ptr<Guard> makeRequirePredicateGuard(const YAML::Node& node, const std::string& path,
                                                 const GroupSettings& group) {
  (void)group;
  checkGuardKeys(node, path, {"min_rows", "tables"});
  const int64_t min_rows = config::getInt(node, path, "min_rows", 100'000, 0);
  std::vector<std::string> tables = config::getStringList(node, path, "tables");
  for (const auto& p : tables) {
    if (p.find('.') == std::string::npos) {
      config::fail(node["tables"], path + ".tables",
                   "pattern '" + p + "' must be schema-qualified (\"schema.table\" or \"schema.*\")");
    }
  }
  return std::make_unique<RequirePredicateGuard>(min_rows, std::move(tables));
}

}  // namespace pgwarden::guards
