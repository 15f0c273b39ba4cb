// Reads the facts the result screens need from the outermost SELECT of a statement's parse tree:
// column = constant / IN / LIKE without wildcards, range predicates, LIMIT without ORDER BY, and
// count/sum over a join with its equality join keys. Anything it does not understand is left
// out, so a screen stays silent rather than guess.
#include <cctype>
#include <string_view>

#include "analysis/screen_facts_detail.h"
#include "analysis/statement_walker.h"

namespace pgwarden::analysis::detail {

namespace facts {

using pgjson::array;
using pgjson::asNode;
using pgjson::element;
using pgjson::Node;
using pgjson::object;

constexpr size_t kMaxComparisons = 32;
constexpr size_t kMaxInValues = 256;
constexpr size_t kMaxOutputs = 64;

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

// now(), current_timestamp, localtimestamp, current_date: the base of a relative time.
bool timeBase(element e, bool& date) {
  Node n = asNode(e);
  if (n.type == "FuncCall") {
    const std::string name = funcName(n.body);
    date = false;
    return (name == "now" || name == "transaction_timestamp" || name == "statement_timestamp") &&
           !pgjson::has(n.body, "args");
  }
  if (n.type != "SQLValueFunction") return false;
  const std::string_view op = pgjson::str(n.body, "op");
  date = op == "SVFOP_CURRENT_DATE";
  return date || op.starts_with("SVFOP_CURRENT_TIMESTAMP") ||
         op.starts_with("SVFOP_LOCALTIMESTAMP");
}

// '30 days', '1 month', '2 weeks 3 days', '1 year', '12 hours' (whole days only: hours round down).
bool intervalText(std::string_view s, int sign, ScreenValue& v) {
  size_t i = 0;
  bool any = false;
  while (true) {
    i = skipSpaces(s, i);
    if (i >= s.size()) return any;
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j == i || j - i > 6) return false;
    const int n = std::stoi(std::string(s.substr(i, j - i))) * sign;
    j = skipSpaces(s, j);
    size_t k = j;
    while (k < s.size() && std::isalpha(static_cast<unsigned char>(s[k]))) ++k;
    std::string unit(s.substr(j, k - j));
    for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!unit.empty() && unit.back() == 's') unit.pop_back();
    if (unit == "day")
      v.rel_days += n;
    else if (unit == "week")
      v.rel_days += 7 * n;
    else if (unit == "hour")
      v.rel_days += n / 24;
    else if (unit == "month" || unit == "mon")
      v.rel_months += n;
    else if (unit == "year")
      v.rel_months += 12 * n;
    else
      return false;
    any = true;
    i = k;
  }
}

// base, base - interval '...', base + interval '...', current_date - 7.
bool relativeOf(element e, ScreenValue& v) {
  bool date = false;
  if (timeBase(e, date)) return v.relative = true;
  Node n = asNode(e);
  if (n.type != "A_Expr" || pgjson::str(n.body, "kind") != "AEXPR_OP") return false;
  const std::string_view op = opName(n.body);
  element l, r;
  if ((op != "-" && op != "+") || !pgjson::get(n.body, "lexpr", l) ||
      !pgjson::get(n.body, "rexpr", r) || !timeBase(l, date)) {
    return false;
  }
  const int sign = op == "-" ? -1 : 1;
  const ConstArg c = pgjson::constOf(r);
  if (date && c.type == ConstArg::Type::kInteger && c.number > -100000 && c.number < 100000) {
    v.rel_days = static_cast<int>(c.number) * sign;
    return v.relative = true;
  }
  Node cast = asNode(r);
  element arg, type_name;
  array names;
  object tn;
  if (cast.type != "TypeCast" || !pgjson::get(cast.body, "arg", arg) ||
      !pgjson::getObject(cast.body, "typeName", tn) || !pgjson::getArray(tn, "names", names)) {
    return false;
  }
  std::string_view last;
  for (element x : names) last = pgjson::stringNode(x);
  const ConstArg text = pgjson::constOf(arg);
  if (last != "interval" || text.type != ConstArg::Type::kString || pgjson::has(tn, "typmods"))
    return false;
  return v.relative = intervalText(text.text, sign, v);
}

bool valueOf(element e, ScreenValue& v) {
  if (relativeOf(e, v)) return true;
  v = ScreenValue{};
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

int locationOf(element e) {
  Node n = asNode(e);
  return n ? static_cast<int>(pgjson::int64(n.body, "location", -1)) : -1;
}

bool wordAt(std::string_view sql, int pos, std::string_view word) {
  if (pos < 0 || static_cast<size_t>(pos) + word.size() > sql.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    const char c = sql[static_cast<size_t>(pos) + i];
    if ((c | 0x20) != word[i]) return false;
  }
  const size_t after = static_cast<size_t>(pos) + word.size();
  return after == sql.size() || !(std::isalnum(static_cast<unsigned char>(sql[after])) || sql[after] == '_');
}

size_t skipSpaces(std::string_view sql, size_t pos) {
  while (pos < sql.size() && std::isspace(static_cast<unsigned char>(sql[pos]))) ++pos;
  return pos;
}

// One past the end of the plain '...' string written at `pos`; -1 when the text there is
// anything else, or a cast follows it (the span would cut the cast in two).
int stringEnd(std::string_view sql, int pos) {
  if (pos < 0 || static_cast<size_t>(pos) >= sql.size() || sql[static_cast<size_t>(pos)] != '\'') return -1;
  size_t i = static_cast<size_t>(pos) + 1;
  while (i < sql.size()) {
    if (sql[i] == '\'') {
      if (i + 1 < sql.size() && sql[i + 1] == '\'') {
        i += 2;
        continue;
      }
      const size_t next = skipSpaces(sql, i + 1);
      if (sql.substr(next, 2) == "::") return -1;
      return static_cast<int>(i + 1);
    }
    ++i;
  }
  return -1;
}

// `col op v` with the column on either side; ranges are flipped when the constant comes first.
void comparison(object body, const ScreenFacts& f, bool single, const Text& text,
                std::vector<ScreenComparison>& out) {
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
    upper.between = true;
    if (asNode(l).type == "ColumnRef" && pgjson::str(body, "kind") == "AEXPR_BETWEEN") {
      element last;
      for (element item : items) last = item;
      const int from = locationOf(l);
      const int end = stringEnd(text.sql, locationOf(last));
      if (from >= text.base && end > from) {
        upper.location = from - text.base;
        upper.length = end - from;
      }
    }
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
    if (v.param > 0 || v.relative) return;  // a bound pattern may or may not hold wildcards
    c.op = hasWildcard(v.text) ? Op::kLike : Op::kEq;
    c.icase = kind == "AEXPR_ILIKE";
  } else if (op == "=") {
    c.op = Op::kEq;
  } else if (op == ">" || op == ">=" || op == "<" || op == "<=") {
    const bool greater = (op[0] == '>') != flipped;
    c.op = greater ? Op::kLower : Op::kUpper;
    c.inclusive = op.size() == 2;
    if (op == "<=" && !flipped && asNode(l).type == "ColumnRef") {
      const int from = locationOf(l);
      const int end = stringEnd(text.sql, locationOf(r));
      if (from >= text.base && end > from) {
        c.location = from - text.base;
        c.length = end - from;
      }
    }
  } else {
    return;
  }
  c.values.push_back(std::move(v));
  out.push_back(std::move(c));
}

void joinKey(object body, const ScreenFacts& f, const Text& text, std::vector<ScreenJoinKey>& out) {
  if (pgjson::str(body, "kind") != "AEXPR_OP" || opName(body) != "=") return;
  element l, r;
  if (!pgjson::get(body, "lexpr", l) || !pgjson::get(body, "rexpr", r)) return;
  ScreenJoinKey a, b;
  if (!columnOf(l, f, false, a.table, a.column) || !columnOf(r, f, false, b.table, b.column)) return;
  if (a.table < 0 || b.table < 0 || a.table == b.table) return;
  a.location = locationOf(l) - text.base;
  b.location = locationOf(r) - text.base;
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

// The outermost WHERE's conjuncts counted (whatever they are), and its `col IS [NOT] NULL` ones
// added to the comparisons.
void whereConditions(element e, ScreenFacts& f, bool single) {
  Node n = asNode(e);
  if (n.type == "BoolExpr" && pgjson::str(n.body, "boolop") == "AND_EXPR") {
    array args;
    if (!pgjson::getArray(n.body, "args", args)) return;
    for (element a : args) whereConditions(a, f, single);
    return;
  }
  if (f.where_conditions >= static_cast<int>(kMaxComparisons)) return;
  ++f.where_conditions;
  element arg;
  if (n.type != "NullTest" || !pgjson::get(n.body, "arg", arg)) return;
  ScreenComparison c;
  if (!columnOf(arg, f, single, c.table, c.column)) return;
  c.op = pgjson::str(n.body, "nulltesttype") == "IS_NULL" ? Op::kIsNull : Op::kNotNull;
  f.comparisons.push_back(std::move(c));
}

void joinQuals(element item, const ScreenFacts& f, const Text& text,
               std::vector<ScreenJoinKey>& out) {
  Node n = asNode(item);
  if (n.type != "JoinExpr") return;
  element l, r, quals;
  if (pgjson::get(n.body, "larg", l)) joinQuals(l, f, text, out);
  if (pgjson::get(n.body, "rarg", r)) joinQuals(r, f, text, out);
  std::vector<object> parts;
  if (pgjson::get(n.body, "quals", quals)) conjuncts(quals, parts);
  for (object p : parts) joinKey(p, f, text, out);
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
    if ((name != "count" && name != "sum" && name != "avg") ||
        pgjson::boolean(fn.body, "agg_distinct"))
      continue;
    found = true;
    array args;
    if (name != "count" && pgjson::getArray(fn.body, "args", args)) {
      for (element a : args) {
        int table = -1;
        std::string column;
        if (columnOf(a, f, false, table, column) && table >= 0) f.summed_tables.push_back(table);
      }
    }
  }
  return found;
}

// ---- Statement-only issues ----

constexpr size_t kMaxIssues = 8;
constexpr int kMaxIssueDepth = 32;

void addIssue(ScreenFacts& f, const Text& text, ScreenIssue::Kind kind, std::string subject, int from,
              int to, std::string replacement) {
  if (f.issues.size() >= kMaxIssues || from < text.base || to < from) return;
  ScreenIssue i;
  i.kind = kind;
  i.subject = std::move(subject);
  i.location = from - text.base;
  i.length = to - from;
  i.replacement = std::move(replacement);
  f.issues.push_back(std::move(i));
}

std::string funcName(object fn) {
  array names;
  std::string_view name;
  if (pgjson::getArray(fn, "funcname", names)) {
    for (element x : names) name = pgjson::stringNode(x);
  }
  return std::string(name);
}

// The byte just inside a call's parenthesis: the first '(' after its name.
size_t argsStart(std::string_view sql, int call_location) {
  if (call_location < 0) return std::string_view::npos;
  const size_t open = sql.find('(', static_cast<size_t>(call_location));
  return open == std::string_view::npos ? open : skipSpaces(sql, open + 1);
}

// `x = NULL` and `x <> NULL` (never true: use IS [NOT] NULL), and `x NOT IN (..., NULL)` (never
// true: drop the NULL), under the AND, OR and NOT of a condition.
void conditionIssues(element e, const ScreenFacts& facts, const Text& text, ScreenFacts& f, int depth) {
  if (depth > kMaxIssueDepth) return;
  Node n = asNode(e);
  if (n.type == "BoolExpr") {
    array args;
    if (!pgjson::getArray(n.body, "args", args)) return;
    if (pgjson::str(n.body, "boolop") == "NOT_EXPR") {
      for (element a : args) {
        Node sub = asNode(a);
        if (sub.type == "SubLink") notInSubquery(sub.body, text, f);
      }
    }
    for (element a : args) conditionIssues(a, facts, text, f, depth + 1);
    return;
  }
  if (n.type != "A_Expr") return;
  const std::string_view kind = pgjson::str(n.body, "kind");
  const std::string_view op = opName(n.body);
  element l, r;
  if (!pgjson::get(n.body, "lexpr", l) || !pgjson::get(n.body, "rexpr", r)) return;
  int table = -1;
  std::string column;
  const bool is_column = columnOf(l, facts, false, table, column);
  if (kind == "AEXPR_OP" && (op == "=" || op == "<>") && asNode(r).type == "A_Const" &&
      pgjson::constOf(r).type == ConstArg::Type::kNull) {
    const int op_at = static_cast<int>(pgjson::int64(n.body, "location", -1));
    const int null_at = locationOf(r);
    if (op_at < 0 || null_at <= op_at || !wordAt(text.sql, null_at, "null")) return;
    addIssue(f, text, ScreenIssue::Kind::kNullComparison, is_column ? column : std::string(), op_at,
             null_at + 4, op == "=" ? "IS NULL" : "IS NOT NULL");
    return;
  }
  if (kind == "AEXPR_IN" && op == "<>") {
    Node list = asNode(r);
    array items;
    if (list.type != "List" || !pgjson::getArray(list.body, "items", items)) return;
    size_t count = 0;
    int null_at = -1;
    for (element item : items) {
      ++count;
      if (null_at < 0 && asNode(item).type == "A_Const" && pgjson::constOf(item).type == ConstArg::Type::kNull) {
        null_at = locationOf(item);
      }
    }
    if (null_at < 0 || count < 2 || !wordAt(text.sql, null_at, "null")) return;
    // Drop the NULL with the comma before it (or after it, when it comes first).
    size_t from = static_cast<size_t>(null_at);
    size_t to = from + 4;
    size_t back = from;
    while (back > 0 && std::isspace(static_cast<unsigned char>(text.sql[back - 1]))) --back;
    if (back > 0 && text.sql[back - 1] == ',') {
      from = back - 1;
    } else {
      const size_t next = skipSpaces(text.sql, to);
      if (next >= text.sql.size() || text.sql[next] != ',') return;
      to = skipSpaces(text.sql, next + 1);
    }
    addIssue(f, text, ScreenIssue::Kind::kNotInNull, is_column ? column : std::string(),
             static_cast<int>(from), static_cast<int>(to), "");
  }
}

bool isCall(element e, std::string_view name) {
  Node n = asNode(e);
  return n.type == "FuncCall" && funcName(n.body) == name && !pgjson::has(n.body, "over");
}

// count(...) / count(...) (and sum(int column) / count(...)) divide integers: a share comes back
// 0. sum(DISTINCT x) and avg(DISTINCT x) add equal values of different rows once. Anywhere in
// the target list's expressions, outside subqueries.
void expressionIssues(element e, const ScreenFacts& facts, const Text& text, ScreenFacts& f, int depth) {
  if (depth > kMaxIssueDepth) return;
  Node n = asNode(e);
  if (!n || n.type == "SubLink") return;
  if (n.type == "A_Expr" && pgjson::str(n.body, "kind") == "AEXPR_OP" && opName(n.body) == "/") {
    element l, r;
    if (pgjson::get(n.body, "lexpr", l) && pgjson::get(n.body, "rexpr", r) && isCall(r, "count") &&
        (isCall(l, "count") || isCall(l, "sum"))) {
      const int op_at = static_cast<int>(pgjson::int64(n.body, "location", -1));
      if (op_at >= 0 && static_cast<size_t>(op_at) < text.sql.size() && text.sql[static_cast<size_t>(op_at)] == '/') {
        const size_t before = f.issues.size();
        addIssue(f, text, ScreenIssue::Kind::kIntegerRatio, isCall(l, "sum") ? "sum" : "count", op_at, op_at,
                 "* 1.0 ");
        if (f.issues.size() > before && isCall(l, "sum")) {
          // Integer division only when the summed column is a smallint or integer: the screen checks.
          array args;
          bool resolved = false;
          if (pgjson::getArray(asNode(l).body, "args", args)) {
            for (element a : args) {
              resolved = columnOf(a, facts, facts.tables.size() == 1, f.issues.back().sum_table,
                                  f.issues.back().sum_column);
              break;
            }
          }
          if (!resolved) f.issues.pop_back();
        }
      }
    }
  }
  if (n.type == "FuncCall" && pgjson::boolean(n.body, "agg_distinct")) {
    const std::string name = funcName(n.body);
    const size_t at = argsStart(text.sql, locationOf(e));
    if ((name == "sum" || name == "avg") && at != std::string_view::npos &&
        wordAt(text.sql, static_cast<int>(at), "distinct")) {
      addIssue(f, text, ScreenIssue::Kind::kDistinctMeasure, name, static_cast<int>(at),
               static_cast<int>(skipSpaces(text.sql, at + 8)), "");
    }
  }
  // Every child node: expressions nest through operators, calls, casts, CASE and COALESCE.
  const auto visit = [&](element child) { expressionIssues(child, facts, text, f, depth + 1); };
  for (auto field : n.body) {
    element v = field.value;
    if (v.is_array()) {
      for (element item : v.get_array()) visit(item);
    } else if (v.is_object()) {
      visit(v);
    }
  }
}

// count(*) grouped by the preserved side of `a LEFT JOIN b`: a row of a that matched nothing is
// counted as 1. count(b.key) counts the matches.
void outerJoinCount(object select, const Text& text, ScreenFacts& f) {
  array from, groups, targets;
  if (!pgjson::getArray(select, "fromClause", from) || !pgjson::getArray(select, "groupClause", groups) ||
      !pgjson::getArray(select, "targetList", targets) || f.tables.size() != 2) {
    return;
  }
  object join;
  size_t items = 0;
  for (element item : from) {
    ++items;
    Node n = asNode(item);
    if (n.type == "JoinExpr") join = n.body;
  }
  if (items != 1 || pgjson::str(join, "jointype") != "JOIN_LEFT") return;
  element larg, rarg, quals;
  if (!pgjson::get(join, "larg", larg) || !pgjson::get(join, "rarg", rarg) ||
      asNode(larg).type != "RangeVar" || asNode(rarg).type != "RangeVar" || !pgjson::get(join, "quals", quals)) {
    return;
  }
  // Grouped by columns of the preserved table (index 0) only.
  for (element g : groups) {
    int table = -1;
    std::string column;
    if (!columnOf(g, f, false, table, column) || table != 0) return;
  }
  // The join key on the nullable side (index 1).
  std::vector<ScreenJoinKey> keys;
  std::vector<object> parts;
  conjuncts(quals, parts);
  for (object p : parts) joinKey(p, f, text, keys);
  std::string key;
  for (const auto& k : keys) {
    if (k.table == 1) {
      const ScreenTable& t = f.tables[1];
      key = (t.alias.empty() ? t.name : t.alias) + "." + k.column;
      break;
    }
  }
  if (key.empty()) return;
  for (element t : targets) {
    Node rt = asNode(t);
    element val;
    if (rt.type != "ResTarget" || !pgjson::get(rt.body, "val", val)) continue;
    Node fn = asNode(val);
    if (fn.type != "FuncCall" || funcName(fn.body) != "count" || !pgjson::boolean(fn.body, "agg_star") ||
        pgjson::has(fn.body, "over") || pgjson::has(fn.body, "agg_filter")) {
      continue;
    }
    const size_t at = argsStart(text.sql, locationOf(val));
    if (at == std::string_view::npos || at >= text.sql.size() || text.sql[at] != '*') continue;
    addIssue(f, text, ScreenIssue::Kind::kOuterJoinCount, key, static_cast<int>(at), static_cast<int>(at + 1), key);
  }
}

// The name PostgreSQL gives a target list entry's column: its alias, a column's name, a
// function's name (through casts); "" for a `*` (its columns are not known here).
std::string outputName(object target) {
  if (const std::string_view alias = pgjson::str(target, "name"); !alias.empty())
    return std::string(alias);
  element val;
  if (!pgjson::get(target, "val", val)) return "?column?";
  Node n = asNode(val);
  while (n.type == "TypeCast") {
    element arg;
    if (!pgjson::get(n.body, "arg", arg)) break;
    Node inner = asNode(arg);
    if (inner.type != "ColumnRef" && inner.type != "FuncCall" && inner.type != "TypeCast") break;
    n = inner;
  }
  if (n.type == "ColumnRef") {
    array fields;
    std::string_view last;
    if (pgjson::getArray(n.body, "fields", fields)) {
      for (element x : fields) {
        if (asNode(x).type == "A_Star") return "";
        last = pgjson::stringNode(x);
      }
    }
    return std::string(last);
  }
  if (n.type == "FuncCall") return funcName(n.body);
  return "?column?";
}

void outputNames(object select, ScreenFacts& f) {
  array targets;
  if (!pgjson::getArray(select, "targetList", targets)) return;
  for (element t : targets) {
    Node rt = asNode(t);
    std::string name = rt.type == "ResTarget" ? outputName(rt.body) : std::string();
    if (name.empty() || f.outputs.size() >= kMaxOutputs) {
      f.outputs.clear();  // a `*`: which column is where is not known
      return;
    }
    f.outputs.push_back(std::move(name));
  }
}

}  // namespace facts

void walkScreenFacts(pgjson::element stmt, std::string_view sql, int location, ScreenFacts& f) {
  using namespace facts;
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

  Text text{sql, std::max(location, 0)};
  while (static_cast<size_t>(text.base) < sql.size() &&
         (sql[static_cast<size_t>(text.base)] == ' ' || sql[static_cast<size_t>(text.base)] == '\n' ||
          sql[static_cast<size_t>(text.base)] == '\t' || sql[static_cast<size_t>(text.base)] == '\r')) {
    ++text.base;
  }

  element where;
  std::vector<object> parts;
  if (pgjson::get(n.body, "whereClause", where)) conjuncts(where, parts);
  for (object p : parts) comparison(p, f, single, text, f.comparisons);
  if (pgjson::has(n.body, "whereClause")) whereConditions(where, f, single);
  f.grouped_filter = pgjson::has(n.body, "havingClause");

  // Statement-only issues: the conditions (WHERE, HAVING, each JOIN's ON) and the target list.
  element having;
  if (pgjson::get(n.body, "whereClause", where)) conditionIssues(where, f, text, f, 0);
  if (pgjson::get(n.body, "havingClause", having)) conditionIssues(having, f, text, f, 0);
  array targets;
  if (pgjson::getArray(n.body, "targetList", targets)) {
    for (element t : targets) expressionIssues(t, f, text, f, 0);
  }
  outerJoinCount(n.body, text, f);

  element limit;
  if (pgjson::get(n.body, "limitCount", limit) && !pgjson::has(n.body, "sortClause")) {
    const ConstArg c = pgjson::constOf(limit);
    f.limit_without_order = c.type == ConstArg::Type::kInteger && c.number > 0;
  }

  f.count_or_sum = countOrSum(n.body, f);
  if (f.joined) {  // FANOUT_JOIN with count/sum/avg; FOREIGN_KEY_MISMATCH for any join
    for (element item : from) joinQuals(item, f, text, f.join_keys);
    for (object p : parts) joinKey(p, f, text, f.join_keys);
  }
  leftJoinFiltered(n.body, text, f);
  softDeleteFacts(n.body, text, f);
  outputNames(n.body, f);
}

}  // namespace pgwarden::analysis::detail
