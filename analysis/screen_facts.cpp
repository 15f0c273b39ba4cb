// Reads the facts the result screens need from the outermost SELECT of a statement's parse tree:
// column = constant / IN / LIKE without wildcards, range predicates, LIMIT without ORDER BY, and
// count/sum over a join with its equality join keys. Anything it does not understand is left
// out, so a screen stays silent rather than guess.
#include <string_view>

#include "analysis/pg_json.h"
#include "analysis/statement_walker.h"

namespace pgwarden::guards::detail {

namespace {

using pgjson::array;
using pgjson::asNode;
using pgjson::element;
using pgjson::Node;
using pgjson::object;

constexpr size_t kMaxComparisons = 32;
constexpr size_t kMaxInValues = 256;

std::string_view opName(object body) {
  array names;
  std::string_view last;
  if (!pgjson::getArray(body, "name", names)) return last;
  for (element n : names) last = pgjson::stringNode(n);
  return last;
}

void addTables(element item, ScreenFacts& f, int& items) {
  Node n = asNode(item);
  if (n.type == "RangeVar") {
    ++items;
    ScreenTable t;
    t.schema = std::string(pgjson::str(n.body, "schemaname"));
    t.name = std::string(pgjson::str(n.body, "relname"));
    object alias;
    if (pgjson::getObject(n.body, "alias", alias)) t.alias = std::string(pgjson::str(alias, "aliasname"));
    f.tables.push_back(std::move(t));
  } else if (n.type == "JoinExpr") {
    element l, r;
    if (pgjson::get(n.body, "larg", l)) addTables(l, f, items);
    if (pgjson::get(n.body, "rarg", r)) addTables(r, f, items);
  } else if (n) {
    ++items;  // a subquery, a function or VALUES: joins, but holds no table of its own here
  }
}

// The column a ColumnRef (or a cast of one) names, with the FROM table it resolves to.
bool columnOf(element e, const ScreenFacts& f, bool single_item, int& table, std::string& column) {
  Node n = asNode(e);
  if (n.type == "TypeCast") {
    element arg;
    return pgjson::get(n.body, "arg", arg) && columnOf(arg, f, single_item, table, column);
  }
  if (n.type != "ColumnRef") return false;
  array fields;
  if (!pgjson::getArray(n.body, "fields", fields)) return false;
  std::vector<std::string_view> parts;
  for (element x : fields) parts.push_back(pgjson::stringNode(x));
  if (parts.empty() || parts.size() > 3 || parts.back().empty()) return false;  // col.* or odd
  column = std::string(parts.back());
  table = -1;
  if (parts.size() == 1) {
    if (single_item && f.tables.size() == 1) table = 0;
    return true;
  }
  const std::string_view qual = parts[parts.size() - 2];
  for (size_t i = 0; i < f.tables.size(); ++i) {
    const auto& t = f.tables[i];
    if (t.alias.empty() ? t.name == qual : t.alias == qual) {
      table = static_cast<int>(i);
      return true;
    }
  }
  return false;  // names something this level does not hold plainly (a subquery alias)
}

bool valueOf(element e, ScreenValue& v) {
  Node n = asNode(e);
  if (n.type == "ParamRef") {
    v.param = static_cast<int>(pgjson::int64(n.body, "number", 0));
    return v.param > 0;
  }
  if (n.type == "TypeCast") {
    element arg;
    if (pgjson::get(n.body, "arg", arg) && asNode(arg).type == "ParamRef") return valueOf(arg, v);
  }
  const ConstArg c = pgjson::constOf(e);
  switch (c.type) {
    case ConstArg::Type::kNone: return false;
    case ConstArg::Type::kNull: v.null = true; return true;
    case ConstArg::Type::kInteger:
    case ConstArg::Type::kFloat:
    case ConstArg::Type::kString:
    case ConstArg::Type::kBool: v.text = c.text; return true;
  }
  return false;
}

bool hasWildcard(std::string_view s) {
  return s.find_first_of("%_\\") != std::string_view::npos;
}

using Op = ScreenComparison::Op;

// `col op v` with the column on either side; ranges are flipped when the constant comes first.
void comparison(object body, const ScreenFacts& f, bool single, std::vector<ScreenComparison>& out) {
  const std::string_view kind = pgjson::str(body, "kind");
  const std::string_view op = opName(body);
  element l, r;
  if (!pgjson::get(body, "lexpr", l) || !pgjson::get(body, "rexpr", r)) return;
  ScreenComparison c;
  if (kind == "AEXPR_IN" && op == "=") {
    Node list = asNode(r);
    array items;
    if (list.type != "List" || !pgjson::getArray(list.body, "items", items)) return;
    if (!columnOf(l, f, single, c.table, c.column)) return;
    for (element item : items) {
      ScreenValue v;
      if (!valueOf(item, v) || c.values.size() >= kMaxInValues) return;
      c.values.push_back(std::move(v));
    }
    out.push_back(std::move(c));
    return;
  }
  if (kind == "AEXPR_BETWEEN") {
    Node list = asNode(r);
    array items;
    if (list.type != "List" || !pgjson::getArray(list.body, "items", items)) return;
    if (!columnOf(l, f, single, c.table, c.column)) return;
    std::vector<ScreenValue> ends;
    for (element item : items) {
      ScreenValue v;
      if (!valueOf(item, v)) return;
      ends.push_back(std::move(v));
    }
    if (ends.size() != 2) return;
    ScreenComparison upper = c;
    c.op = Op::kLower;
    c.values.push_back(std::move(ends[0]));
    upper.op = Op::kUpper;
    upper.values.push_back(std::move(ends[1]));
    out.push_back(std::move(c));
    out.push_back(std::move(upper));
    return;
  }
  const bool like = (kind == "AEXPR_LIKE" && op == "~~") || (kind == "AEXPR_ILIKE" && op == "~~*");
  if (kind != "AEXPR_OP" && !like) return;
  ScreenValue v;
  bool flipped = false;
  if (columnOf(l, f, single, c.table, c.column) && valueOf(r, v)) {
  } else if (!like && columnOf(r, f, single, c.table, c.column) && valueOf(l, v)) {
    flipped = true;
  } else {
    return;
  }
  if (like) {
    if (v.param == 0 && hasWildcard(v.text)) return;
    if (v.param > 0) return;  // a bound pattern may hold wildcards
    c.op = Op::kEq;
    c.icase = kind == "AEXPR_ILIKE";
  } else if (op == "=") {
    c.op = Op::kEq;
  } else if (op == ">" || op == ">=" || op == "<" || op == "<=") {
    const bool greater = (op[0] == '>') != flipped;
    c.op = greater ? Op::kLower : Op::kUpper;
    c.inclusive = op.size() == 2;
  } else {
    return;
  }
  c.values.push_back(std::move(v));
  out.push_back(std::move(c));
}

void joinKey(object body, const ScreenFacts& f, std::vector<ScreenJoinKey>& out) {
  if (pgjson::str(body, "kind") != "AEXPR_OP" || opName(body) != "=") return;
  element l, r;
  if (!pgjson::get(body, "lexpr", l) || !pgjson::get(body, "rexpr", r)) return;
  ScreenJoinKey a, b;
  if (!columnOf(l, f, false, a.table, a.column) || !columnOf(r, f, false, b.table, b.column)) return;
  if (a.table < 0 || b.table < 0 || a.table == b.table) return;
  out.push_back(std::move(a));
  out.push_back(std::move(b));
}

void conjuncts(element e, std::vector<object>& out) {
  Node n = asNode(e);
  if (n.type == "BoolExpr" && pgjson::str(n.body, "boolop") == "AND_EXPR") {
    array args;
    if (!pgjson::getArray(n.body, "args", args)) return;
    for (element a : args) conjuncts(a, out);
  } else if (n.type == "A_Expr" && out.size() < kMaxComparisons) {
    out.push_back(n.body);
  }
}

void joinQuals(element item, const ScreenFacts& f, std::vector<ScreenJoinKey>& out) {
  Node n = asNode(item);
  if (n.type != "JoinExpr") return;
  element l, r, quals;
  if (pgjson::get(n.body, "larg", l)) joinQuals(l, f, out);
  if (pgjson::get(n.body, "rarg", r)) joinQuals(r, f, out);
  std::vector<object> parts;
  if (pgjson::get(n.body, "quals", quals)) conjuncts(quals, parts);
  for (object p : parts) joinKey(p, f, out);
}

bool countOrSum(object select, ScreenFacts& f) {
  array targets;
  bool found = false;
  if (!pgjson::getArray(select, "targetList", targets)) return false;
  for (element t : targets) {
    Node rt = asNode(t);
    element val;
    if (rt.type != "ResTarget" || !pgjson::get(rt.body, "val", val)) continue;
    Node fn = asNode(val);
    if (fn.type != "FuncCall") continue;
    array names;
    std::string_view name;
    if (pgjson::getArray(fn.body, "funcname", names)) {
      for (element x : names) name = pgjson::stringNode(x);
    }
    if ((name != "count" && name != "sum") || pgjson::boolean(fn.body, "agg_distinct")) continue;
    found = true;
    array args;
    if (name == "sum" && pgjson::getArray(fn.body, "args", args)) {
      for (element a : args) {
        int table = -1;
        std::string column;
        if (columnOf(a, f, false, table, column) && table >= 0) f.summed_tables.push_back(table);
      }
    }
  }
  return found;
}

}  // namespace

void walkScreenFacts(element stmt, ScreenFacts& f) {
  Node n = asNode(stmt);
  if (n.type != "SelectStmt" || pgjson::str(n.body, "op") != "SETOP_NONE") return;
  array from;
  int items = 0;
  if (pgjson::getArray(n.body, "fromClause", from)) {
    for (element item : from) addTables(item, f, items);
  }
  if (items == 0) return;  // SELECT 1, SELECT now(): nothing a result could be wrong about
  const bool single = items == 1;
  f.joined = items > 1;

  element where;
  std::vector<object> parts;
  if (pgjson::get(n.body, "whereClause", where)) conjuncts(where, parts);
  for (object p : parts) comparison(p, f, single, f.comparisons);

  element limit;
  if (pgjson::get(n.body, "limitCount", limit) && !pgjson::has(n.body, "sortClause")) {
    const ConstArg c = pgjson::constOf(limit);
    f.limit_without_order = c.type == ConstArg::Type::kInteger && c.number > 0;
  }

  f.count_or_sum = countOrSum(n.body, f);
  if (f.count_or_sum && f.joined) {
    for (element item : from) joinQuals(item, f, f.join_keys);
    for (object p : parts) joinKey(p, f, f.join_keys);
  }
}

}  // namespace pgwarden::guards::detail
