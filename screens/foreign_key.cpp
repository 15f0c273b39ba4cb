// FOREIGN_KEY_MISMATCH: a join that equates a table's own key with another table's column that one
// of its foreign keys references (invoices.id = accounts.id where invoices.account_id references
// accounts.id): rows are paired by coincidence of numbers. Needs the catalog's foreign keys; the
// hint is the statement joined on the foreign key's column.
#include <cctype>

#include "guards/codes.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {

// The column of `from` whose single-column foreign key references `target` ("schema.table.col").
const std::string* referencing(const analysis::TableStats& from, const std::string& target) {
  for (const auto& [name, col] : from.columns) {
    if (col.references == target) return &name;
  }
  return nullptr;
}

bool check(const ScreenInput& in, const analysis::ScreenJoinKey& own,
           const analysis::ScreenJoinKey& other, Findings& out) {
  const ResolvedColumn x = resolveColumn(in, own.table, own.column);
  const ResolvedColumn y = resolveColumn(in, other.table, other.column);
  if (!x.column || !y.column || !x.column->references.empty() || !x.column->knownUnique())
    return false;
  const std::string target = y.tableName() + "." + other.column;
  const std::string* fk = referencing(*x.table, target);
  if (!fk || *fk == own.column) return false;
  // Nor a key of the other side that references this one (a shared primary key).
  if (y.column->references == x.tableName() + "." + own.column) return false;

  guards::GuardResult r;
  r.code = std::string(guards::codes::kForeignKeyMismatch);
  r.subject = x.tableName();
  r.message = "The join pairs " + x.tableName() + "." + own.column + " with " + target + ", but " +
              x.tableName() + "." + *fk + " is the column that references " + target +
              ": rows are matched by coincidence of numbers. Join on " + *fk + ".";
  r.facts.add("table", x.tableName())
      .add("joined", x.tableName() + "." + own.column)
      .add("references", target)
      .add("foreign_key", x.tableName() + "." + *fk);
  // The column as written ends with its name (unquoted): replace that name.
  const size_t at = static_cast<size_t>(own.location);
  if (own.location >= 0 && at < in.sql.size()) {
    size_t end = at;
    while (end < in.sql.size() && (std::isalnum(static_cast<unsigned char>(in.sql[end])) ||
                                   in.sql[end] == '_' || in.sql[end] == '.')) {
      ++end;
    }
    if (end - at >= own.column.size() &&
        in.sql.substr(end - own.column.size(), own.column.size()) == own.column) {
      r.hint = correctedStatement(in, static_cast<int>(end - own.column.size()),
                                  static_cast<int>(own.column.size()), *fk);
    }
  }
  out.push_back(std::move(r));
  return true;
}

}  // namespace

void foreignKeyMismatch(const ScreenInput& in, Findings& out) {
  const auto& keys = in.statement->screen.join_keys;
  for (size_t i = 0; i + 1 < keys.size(); i += 2) {
    if (check(in, keys[i], keys[i + 1], out) || check(in, keys[i + 1], keys[i], out)) return;
  }
}

}  // namespace pgwarden::screens::detail
