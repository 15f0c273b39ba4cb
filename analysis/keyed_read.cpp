// KeyedRead (analysis/keyed_read.h) from the outermost SELECT's parse tree. Each rule keeps out a
// way one table row can become several result rows: a join or a second FROM item, a set operation,
// a WITH (a CTE may take the table's name), GROUP BY (grouping sets repeat a row), a target list
// or ORDER BY or DISTINCT ON that computes anything (a set-returning function there, or one behind
// an operator, returns rows of its own), and a cast of the column (`ts::date = '2024-01-01'`
// matches many unique timestamps). A parameter is noted as such: whether its type is the
// column's depends on the Parse that brought the text.
#include "analysis/keyed_read.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/pg_json.h"
#include "analysis/screen_facts_detail.h"
#include "analysis/statement_walker.h"

namespace pgwarden::analysis::detail {

namespace {

using pgjson::array;
using pgjson::element;
using pgjson::Node;
using pgjson::object;

constexpr size_t kMaxKeyColumns = 8;

// A column of the target list, ORDER BY or DISTINCT ON: a column, `*`, a constant, or a cast of
// one of these (a cast returns one value).
bool plainValue(element e) {
  Node n = pgjson::asNode(e);
  if (n.type == "ColumnRef" || n.type == "A_Const") return true;
  element arg;
  return n.type == "TypeCast" && pgjson::get(n.body, "arg", arg) && plainValue(arg);
}

bool plainTargets(object sel) {
  array list;
  if (pgjson::getArray(sel, "targetList", list)) {
    for (element t : list) {
      Node rt = pgjson::asNode(t);
      element val;
      if (rt.type != "ResTarget" || !pgjson::get(rt.body, "val", val) || !plainValue(val)) return false;
    }
  }
  if (pgjson::getArray(sel, "sortClause", list)) {
    for (element s : list) {
      Node sb = pgjson::asNode(s);
      element node;
      if (sb.type != "SortBy" || !pgjson::get(sb.body, "node", node) || !plainValue(node)) return false;
    }
  }
  if (pgjson::getArray(sel, "distinctClause", list)) {
    for (element d : list) {
      // DISTINCT is a list holding one empty node; DISTINCT ON names its expressions.
      if (pgjson::asNode(d) && !plainValue(d)) return false;
    }
  }
  return true;
}

// `col = literal` or `literal = col` (or a parameter for the literal), the column bare
// (unqualified or qualified by the table's name or alias), the literal not NULL: the column's
// name, and the parameter's number (0 for a literal).
bool keyColumn(object expr, std::string_view qualifier, std::string& column, int& param) {
  if (pgjson::str(expr, "kind") != "AEXPR_OP") return false;
  array names;
  if (!pgjson::getArray(expr, "name", names) || names.size() != 1) return false;
  for (element n : names) {
    if (pgjson::stringNode(n) != "=") return false;
  }
  element l, r;
  if (!pgjson::get(expr, "lexpr", l) || !pgjson::get(expr, "rexpr", r)) return false;
  if (pgjson::asNode(l).type != "ColumnRef") std::swap(l, r);
  Node col = pgjson::asNode(l);
  const Node value = pgjson::asNode(r);
  if (col.type != "ColumnRef") return false;
  param = 0;
  if (value.type == "ParamRef") {
    param = static_cast<int>(pgjson::int64(value.body, "number", 0));
    if (param <= 0) return false;
  } else {
    if (value.type != "A_Const") return false;
    const ConstArg c = pgjson::constOf(r);
    if (c.type == ConstArg::Type::kNone || c.type == ConstArg::Type::kNull) return false;
  }
  array fields;
  if (!pgjson::getArray(col.body, "fields", fields)) return false;
  std::vector<std::string_view> parts;
  for (element f : fields) parts.push_back(pgjson::stringNode(f));
  if (parts.empty() || parts.size() > 2 || parts.back().empty()) return false;
  if (parts.size() == 2 && parts[0] != qualifier) return false;
  column.assign(parts.back());
  return true;
}

}  // namespace

void findKeyedRead(element stmt, KeyedRead& out) {
  out = KeyedRead{};
  const Node n = pgjson::asNode(stmt);
  if (n.type != "SelectStmt") return;
  const object sel = n.body;
  const std::string_view op = pgjson::str(sel, "op");
  if ((!op.empty() && op != "SETOP_NONE") || pgjson::has(sel, "withClause") ||
      pgjson::has(sel, "groupClause") || pgjson::has(sel, "windowClause") ||
      pgjson::has(sel, "valuesLists") || pgjson::has(sel, "intoClause")) {
    return;
  }
  array from;
  element where;
  if (!pgjson::getArray(sel, "fromClause", from) || from.size() != 1 ||
      !pgjson::get(sel, "whereClause", where) || !plainTargets(sel)) {
    return;
  }
  Node rel;
  for (element item : from) rel = pgjson::asNode(item);
  if (rel.type != "RangeVar") return;
  object alias;
  std::string_view qualifier = pgjson::str(rel.body, "relname");
  if (pgjson::getObject(rel.body, "alias", alias)) qualifier = pgjson::str(alias, "aliasname");
  std::vector<object> parts;
  facts::conjuncts(where, parts);
  for (object p : parts) {
    std::string column;
    int param = 0;
    if (out.columns.size() < kMaxKeyColumns && keyColumn(p, qualifier, column, param)) {
      out.columns.push_back(std::move(column));
      out.params.push_back(param);
    }
  }
  if (out.columns.empty()) return;
  out.schema.assign(pgjson::str(rel.body, "schemaname"));
  out.table.assign(pgjson::str(rel.body, "relname"));
}

}  // namespace pgwarden::analysis::detail
