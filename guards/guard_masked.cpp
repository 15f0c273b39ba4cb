// The masked-columns check, which a group with `masked_columns` runs first: a statement over a
// table with masked columns may select them as they are (pgwarden replaces their values in the
// rows it relays), count them, group, sort, join and filter on them; it may not carry their
// values into the result any other way (an expression, a set operation, a whole-row reference,
// RETURNING, COPY, a cursor), since such a column comes back without the origin pgwarden masks by.
#include "analysis/exposure.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"
#include "guards/masking.h"

namespace pgwarden::guards {

namespace {

// The catalog's column statistics: their most common values and histograms are the values.
bool statisticsView(const analysis::RelationRef& rel) {
  if (!rel.schema.empty() && rel.schema != "pg_catalog") return false;
  return rel.name == "pg_stats" || rel.name == "pg_stats_ext" || rel.name == "pg_stats_ext_exprs" ||
         rel.name.rfind("pg_statistic", 0) == 0;
}

bool listed(const std::vector<std::string>& names, std::string_view name) {
  for (const auto& n : names) {
    if (n == name || n == "*") return true;
  }
  return false;
}

class MaskedColumnsGuard final : public Guard {
 public:
  explicit MaskedColumnsGuard(std::shared_ptr<const Masking> masking)
      : masking_(std::move(masking)) {}

  std::string_view kind() const override { return "masked_columns"; }
  bool deterministic() const override { return true; }
  std::vector<std::string_view> codes() const override { return {codes::kMaskedColumn}; }

  GuardResult checkText(const GuardInput& in) const override {
    std::vector<std::string> masked;
    std::string table;
    for (const auto& st : in.analysis.statements) {
      for (const auto& rel : st.relations) {
        if (statisticsView(rel)) {
          return denied(rel.name, "",
                        "its statistics (most common values, histograms) are "
                        "values of the masked columns");
        }
        auto names = masking_->maskedNames(rel.schema, rel.name, in.stats);
        if (names.empty()) continue;
        if (table.empty()) table = rel.schema.empty() ? rel.name : rel.schema + "." + rel.name;
        if (!readsByRows(st.kind)) {
          return denied(table, "",
                        "it can be read only by SELECT (" + st.command +
                            " would carry its values past the masking)");
        }
        masked.insert(masked.end(), names.begin(), names.end());
      }
    }
    if (masked.empty()) return {};
    const analysis::ColumnExposure e = analysis::columnExposure(in.sql);
    if (!e.ok) return denied(table, "", e.error);
    const auto tainted = analysis::taintedNames(e, masked);
    for (const auto& m : e.revealed) {
      if (listed(tainted, m.name)) return denied(table, m.name, "it is shown through " + m.how);
    }
    for (const auto& w : e.whole_rows) {
      for (const auto& r : e.relation_names) {
        if (w == r)
          return denied(table, "", "a whole-row reference (" + w + ") shows every column");
      }
    }
    if (e.star_revealed) return denied(table, "", "a * inside an expression shows every column");
    return {};
  }

  std::string describe() const override {
    std::vector<std::string> patterns;
    for (const auto& p : masking_->patterns()) {
      patterns.push_back(p.schema + "." + p.table + "." + p.column);
    }
    Facts f;
    f.add("masked_columns", patterns);
    f.add("masked_as", masking_->asNull() ? "null" : "token");
    return f.json(kind());
  }

 private:
  static bool readsByRows(analysis::StatementKind k) {
    return k == analysis::StatementKind::kSelect || k == analysis::StatementKind::kExplain ||
           k == analysis::StatementKind::kInsert || k == analysis::StatementKind::kUpdate ||
           k == analysis::StatementKind::kDelete || k == analysis::StatementKind::kMerge;
  }

  GuardResult denied(const std::string& table, std::string_view column, std::string why) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kMaskedColumn);
    r.subject = table;
    r.message = (column.empty() ? table + " has masked columns"
                                : "column " + std::string(column) + " of " + table + " is masked") +
                " for this group" + (masking_->schemaOnly() ? " (it sees the schema only)" : "") +
                ": " + why;
    r.hint =
        "select a masked column as it is (each value comes back as a token, equal for equal "
        "values), or count, group, join, sort and filter on it; not inside an expression, a "
        "function other than count, a UNION or a whole row";
    r.facts.add("table", table);
    if (!column.empty()) r.facts.add("column", column);
    r.facts.add("next_step", "select the column as it is, or aggregate it with count");
    return r;
  }

  std::shared_ptr<const Masking> masking_;
};

}  // namespace

std::unique_ptr<Guard> makeMaskedColumnsGuard(std::shared_ptr<const Masking> masking) {
  return std::make_unique<MaskedColumnsGuard>(std::move(masking));
}

}  // namespace pgwarden::guards
