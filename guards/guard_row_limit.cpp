// row_limit: `max_limit` refuses an explicit LIMIT above it; `max_rows` caps what a client
// receives by rewriting the statement so the engine itself stops after max_rows + 1 rows (the
// extra row tells the session the result was cut). The rewrite edits only what the parser located:
// an existing LIMIT literal is replaced in place, a missing LIMIT is added on a new line after the
// statement's last byte, so a trailing ';' or '-- comment' cannot swallow it. A read that returns
// at most one row (a unique column equated to a literal, or to a parameter whose type the server
// infers) is left as written.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

// Writes the parts over `out`, in its storage when it is large enough.
void assignConcat(std::string& out, std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (const auto p : parts) size += p.size();
  out.clear();
  out.reserve(size);
  for (const auto p : parts) out.append(p);
}

class RowLimitGuard final : public Guard {
 public:
  RowLimitGuard(int64_t max_limit, int64_t max_rows, bool deny_recursion)
      : max_limit_(max_limit),
        max_rows_(max_rows),
        deny_recursion_(deny_recursion),
        capped_("The result is capped at " + std::to_string(max_rows) + " rows."),
        truncated_("The result was truncated at " + std::to_string(max_rows) +
                   " rows; add a WHERE condition, aggregate with GROUP BY, or use "
                   "ORDER BY ... LIMIT to choose which rows you get.") {}

  std::string_view kind() const override { return "row_limit"; }
  bool deterministic() const override { return true; }
  std::vector<std::string_view> codes() const override {
    return {codes::kLimitTooLarge, codes::kLimitRequired, codes::kRecursionUnbounded,
            codes::kRowsCapped, codes::kRowsTruncated};
  }

  GuardResult checkStatement(const GuardInput& in,
                             const analysis::StatementInfo& st) const override {
    GuardResult r;
    checkStatementInto(in, st, r);
    return r;
  }

  // Every read without a LIMIT is capped here, so the chain's reused result takes the texts.
  void checkStatementInto(const GuardInput& in, const analysis::StatementInfo& st,
                          GuardResult& r) const override {
    if (deny_recursion_ && st.unbounded_recursion) {
      r = unboundedRecursion();
      return;
    }
    const bool direct = st.kind == analysis::StatementKind::kSelect && st.returns_rows;
    const bool deferred = (st.kind == analysis::StatementKind::kPrepare ||
                           st.kind == analysis::StatementKind::kDeclareCursor) &&
                          st.inner_kind == analysis::StatementKind::kSelect;
    const bool copy = st.kind == analysis::StatementKind::kCopy && st.returns_rows;
    if (!direct && !deferred && !copy) return;

    const int64_t bound = max_limit_ >= 0 ? max_limit_ : max_rows_;
    if (st.limit == analysis::LimitKind::kOther) {
      r = limitNotConstant(bound);
      return;
    }
    if (max_limit_ >= 0 && st.limit == analysis::LimitKind::kConstant &&
        st.limit_value > max_limit_) {
      r = limitTooLarge(in.sql, st);
      return;
    }
    if (max_rows_ < 0) return;
    if (copy) {
      if (st.limit == analysis::LimitKind::kConstant && st.limit_value <= max_rows_) return;
      if (copyIsSmall(in, st)) return;
      r = limitRequired();
      return;
    }
    if (st.limit == analysis::LimitKind::kConstant && st.limit_value <= max_rows_) return;
    if (direct && atMostOneRow(in, st)) {
      // Nothing to cut in the text; the session's count of rows stays as the backstop (a catalog
      // older than a dropped unique index, a temporary table of the same name).
      r.max_rows = max_rows_;
      r.truncation_notice.assign(truncated_);
      return;
    }

    // Reads the session runs now get max_rows + 1 (to see a cut); a cursor or prepared statement
    // runs later, row by row, so it gets the cap itself and a notice now.
    const int64_t cap = direct ? max_rows_ + 1 : max_rows_;
    r.action = direct ? Action::kRewrite : Action::kWarn;
    r.code.assign(codes::kRowsCapped);
    if (auto e = rowCapEdit(st, cap)) r.edits.push_back(std::move(*e));
    if (direct) {
      r.max_rows = max_rows_;
      r.message.assign(capped_);
      r.truncation_notice.assign(truncated_);
      const std::string_view text = util::statementText(in.sql, st);
      // On its own lines, so a trailing "-- comment" in the statement cannot swallow the ")".
      if (text.size() <= 500) {
        assignConcat(r.hint, {"SELECT count(*) FROM (\n", text, "\n) AS t"});
      } else {
        r.hint.assign("SELECT count(*) FROM ... to learn how many rows match");
      }
    } else {
      r.message = "Rows from this " +
                  std::string(st.kind == analysis::StatementKind::kPrepare ? "prepared statement"
                                                                           : "cursor") +
                  " are capped at " + std::to_string(max_rows_) +
                  "; add a WHERE condition or ORDER BY ... LIMIT to choose which rows you get.";
    }
    if (r.action != Action::kRewrite || in.group.hasReason(r.code)) {
      r.facts.add("max_rows", max_rows_);
      if (st.limit == analysis::LimitKind::kConstant) r.facts.add("limit", st.limit_value);
      r.facts.add("next_step", "narrow the query with WHERE, GROUP BY or ORDER BY ... LIMIT");
    }
  }

 private:
  GuardResult limitTooLarge(std::string_view sql, const analysis::StatementInfo& st) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kLimitTooLarge);
    const std::string max = std::to_string(max_limit_);
    r.message = "LIMIT " + std::to_string(st.limit_value) + " is above the maximum of " + max +
                " rows; use LIMIT " + max + " or less, or aggregate the rows with GROUP BY.";
    r.facts.add("limit", st.limit_value).add("max_limit", max_limit_)
        .add("next_step", "use LIMIT " + max + " or less");
    const size_t begin = static_cast<size_t>(st.location);
    const size_t end = begin + static_cast<size_t>(st.length);
    if (st.limit_location >= 0 && st.limit_length > 0 && end <= sql.size() && st.length <= 1000 &&
        static_cast<size_t>(st.limit_location) >= begin) {
      const size_t at = static_cast<size_t>(st.limit_location);
      r.hint = util::excerpt(std::string(sql.substr(begin, at - begin)) + max +
                                 std::string(sql.substr(at + st.limit_length, end - at - st.limit_length)),
                             1000);
    }
    return r;
  }

  GuardResult limitNotConstant(int64_t bound) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kLimitTooLarge);
    const std::string max = std::to_string(bound);
    r.message = "LIMIT must be a plain number (or a $n parameter) on this connection so the row "
                "limit can be checked; write LIMIT " + max + " or less.";
    r.facts.add("max_limit", bound).add("next_step", "write LIMIT as a plain number");
    return r;
  }

  // A keyed read of a table whose key column is unique: at most one row. The table must be one
  // whose unique index covers every row it reads: a plain table or materialized view without
  // inheritance children, or a partitioned table (a unique index on one holds the partition key).
  static bool atMostOneRow(const GuardInput& in, const analysis::StatementInfo& st) {
    if (st.keyed.columns.empty() || in.stats == nullptr) return false;
    const analysis::TableStats* stats =
        util::findStats(in.stats, st.keyed.schema, st.keyed.table, in.group, nullptr);
    if (stats == nullptr) return false;
    const bool whole = stats->kind == 'p' ||
                       ((stats->kind == 'r' || stats->kind == 'm') && !stats->has_children);
    if (!whole) return false;
    for (size_t i = 0; i < st.keyed.columns.size(); ++i) {
      if (st.keyed.params[i] != 0 && !in.ctx.inferred_params) continue;
      const auto it = stats->columns.find(st.keyed.columns[i]);
      if (it != stats->columns.end() && it->second.unique) return true;
    }
    return false;
  }

  // COPY streams rows the session does not count, so it is not rewritten; it may run without a
  // LIMIT when it reads no table, or only tables the catalog puts at max_rows rows or fewer.
  bool copyIsSmall(const GuardInput& in, const analysis::StatementInfo& st) const {
    for (const auto& rel : st.relations) {
      if (rel.written) continue;
      const analysis::TableStats* stats = util::findStats(in.stats, rel, in.group, nullptr);
      if (!stats || stats->estimated_rows > max_rows_) return false;
    }
    return true;
  }

  GuardResult limitRequired() const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kLimitRequired);
    const std::string n = std::to_string(max_rows_);
    r.message = "COPY ... TO STDOUT needs a query with LIMIT " + n +
                " or less on this connection; write COPY (SELECT ... LIMIT " + n + ") TO STDOUT.";
    r.facts.add("max_rows", max_rows_).add("next_step", "COPY a query with LIMIT " + n + " or less");
    r.hint = "COPY (SELECT 1 LIMIT " + n + ") TO STDOUT";
    return r;
  }

  static GuardResult unboundedRecursion() {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kRecursionUnbounded);
    r.message = "The recursive part of this WITH RECURSIVE query has no condition that stops it, so "
                "it would run until the statement timeout; add a stop condition such as WHERE n < "
                "100 to the recursive SELECT.";
    r.facts.add("next_step", "add a WHERE condition to the recursive SELECT");
    r.hint = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100) SELECT n FROM r";
    return r;
  }

 public:
  std::string describe() const override {
    Facts f;
    if (max_limit_ > 0) f.add("max_limit", max_limit_);
    if (max_rows_ > 0) f.add("max_rows", max_rows_);
    f.add("deny_unbounded_recursion", deny_recursion_);
    return f.json(kind());
  }

 private:
  int64_t max_limit_;
  int64_t max_rows_;
  bool deny_recursion_;
  // A capped read's message and truncation notice: the same for every statement.
  std::string capped_;
  std::string truncated_;
};

}  // namespace

std::optional<TextEdit> rowCapEdit(const analysis::StatementInfo& st, int64_t cap) {
  if (st.limit == analysis::LimitKind::kNone) {
    return TextEdit{static_cast<size_t>(st.location + st.length), 0,
                    "\nLIMIT " + std::to_string(cap)};
  }
  if ((st.limit == analysis::LimitKind::kAll || st.limit == analysis::LimitKind::kConstant) &&
      st.limit_location >= 0 && st.limit_length > 0) {
    return TextEdit{static_cast<size_t>(st.limit_location), static_cast<size_t>(st.limit_length),
                    std::to_string(cap)};
  }
  return std::nullopt;  // LIMIT $n: the value comes with Bind; the session's row cap still applies
}

std::unique_ptr<Guard> makeRowLimitGuard(const YAML::Node& node, const std::string& path,
                                         const GroupSettings& group) {
  (void)group;
  checkGuardKeys(node, path, {"max_limit", "max_rows", "deny_unbounded_recursion"});
  const int64_t max_limit = config::getInt(node, path, "max_limit", -1, 1);
  const int64_t max_rows = config::getInt(node, path, "max_rows", -1, 1, INT64_MAX - 1);
  if (max_limit < 0 && max_rows < 0) {
    config::fail(node, path, "a row_limit guard needs max_limit, max_rows or both");
  }
  const bool recursion = config::getBool(node, path, "deny_unbounded_recursion", true);
  return std::make_unique<RowLimitGuard>(max_limit, max_rows, recursion);
}

}  // namespace pgwarden::guards
