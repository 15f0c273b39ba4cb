// Screen facts about NULLs that need more than one node: `x NOT IN (SELECT col FROM t)` (the
// screen looks up whether col holds NULLs, which empty the result) and a WHERE condition on the
// nullable side of a LEFT JOIN (it drops the unmatched rows: the join acts as an inner one). Both
// carry the corrected statement's edit when the text allows one simple edit.
#include <cctype>

#include "analysis/screen_facts_detail.h"
#include "analysis/sql_scan.h"

namespace pgwarden::analysis::detail::facts {

namespace {

using pgjson::array;
using pgjson::asNode;
using pgjson::element;
using pgjson::Node;
using pgjson::object;

// The ')' closing the '(' at `open`, skipping quoted strings and names; npos when unbalanced.
size_t closeParen(std::string_view sql, size_t open) {
  int depth = 0;
  for (size_t i = open; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      const size_t end = sql.find(c, i + 1);
      if (end == std::string_view::npos) return end;
      i = end;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

// One past a name written at `pos` (plain or qualified, maybe quoted): "o.status", "\"Order\".id".
size_t nameEnd(std::string_view sql, size_t pos) {
  size_t i = pos;
  while (i < sql.size()) {
    const char c = sql[i];
    if (c == '"') {
      const size_t close = sql.find('"', i + 1);
      if (close == std::string_view::npos) return pos;
      i = close + 1;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' ||
               static_cast<unsigned char>(c) >= 0x80) {
      ++i;
    } else {
      break;
    }
  }
  return i;
}

// One past the constant written at `pos` ('text', 42, -1.5, true, $1); -1 when a cast follows.
int constEnd(std::string_view sql, int pos) {
  if (pos < 0 || static_cast<size_t>(pos) >= sql.size()) return -1;
  if (sql[static_cast<size_t>(pos)] == '\'') return stringEnd(sql, pos);
  size_t i = static_cast<size_t>(pos);
  if (sql[i] == '-') ++i;
  const size_t end = nameEnd(sql, i);
  if (end == i || sql.substr(skipSpaces(sql, end), 2) == "::") return -1;
  return static_cast<int>(end);
}

// The subquery's WHERE keeps NULLs of `column` out: `column IS NOT NULL`, or a comparison of it.
bool excludesNulls(object select, const ScreenFacts& sub, const std::string& column) {
  element where;
  if (!pgjson::get(select, "whereClause", where)) return false;
  std::vector<element> parts;
  Node w = asNode(where);
  array args;
  if (w.type == "BoolExpr" && pgjson::str(w.body, "boolop") == "AND_EXPR" &&
      pgjson::getArray(w.body, "args", args)) {
    for (element a : args) parts.push_back(a);
  } else {
    parts.push_back(where);
  }
  for (element p : parts) {
    Node n = asNode(p);
    element arg, l, r;
    int table = -1;
    std::string name;
    if (n.type == "NullTest" && pgjson::str(n.body, "nulltesttype") == "IS_NOT_NULL" &&
        pgjson::get(n.body, "arg", arg) && columnOf(arg, sub, true, table, name) &&
        name == column) {
      return true;
    }
    if (n.type == "A_Expr" && pgjson::str(n.body, "kind") != "AEXPR_DISTINCT" &&
        pgjson::str(n.body, "kind") != "AEXPR_NOT_DISTINCT" &&
        ((pgjson::get(n.body, "lexpr", l) && columnOf(l, sub, true, table, name) &&
          name == column) ||
         (pgjson::get(n.body, "rexpr", r) && columnOf(r, sub, true, table, name) &&
          name == column))) {
      return true;
    }
  }
  return false;
}

}  // namespace

void notInSubquery(object sublink, const Text& text, ScreenFacts& f) {
  element select_el;
  array ops;
  if (pgjson::str(sublink, "subLinkType") != "ANY_SUBLINK" ||
      !pgjson::get(sublink, "subselect", select_el))
    return;
  if (pgjson::getArray(sublink, "operName", ops)) {
    for (element o : ops) {
      if (pgjson::stringNode(o) != "=") return;
    }
  }
  Node select = asNode(select_el);
  array from, targets;
  if (select.type != "SelectStmt" || pgjson::str(select.body, "op") != "SETOP_NONE" ||
      !pgjson::getArray(select.body, "fromClause", from) ||
      !pgjson::getArray(select.body, "targetList", targets)) {
    return;
  }
  ScreenFacts sub;  // the subquery's one plain table, to resolve its column against
  for (element item : from) {
    Node t = asNode(item);
    if (t.type != "RangeVar" || !sub.tables.empty()) return;
    ScreenTable st;
    st.schema = std::string(pgjson::str(t.body, "schemaname"));
    st.name = std::string(pgjson::str(t.body, "relname"));
    object alias;
    if (pgjson::getObject(t.body, "alias", alias))
      st.alias = std::string(pgjson::str(alias, "aliasname"));
    sub.tables.push_back(std::move(st));
  }
  element target;
  size_t count = 0;
  for (element t : targets) {
    ++count;
    target = t;
  }
  element val;
  int table = -1;
  std::string column;
  if (count != 1 || sub.tables.size() != 1 || !pgjson::get(asNode(target).body, "val", val) ||
      asNode(val).type != "ColumnRef" || !columnOf(val, sub, true, table, column) || table != 0 ||
      excludesNulls(select.body, sub, column)) {
    return;
  }
  // The edit: `col IS NOT NULL` added to the subquery's WHERE, just before its closing parenthesis,
  // when nothing follows the WHERE there and the WHERE is not an OR (which the AND would split).
  const size_t loc = static_cast<size_t>(std::max(locationOf(val), 0));
  const std::string written(text.sql.substr(loc, nameEnd(text.sql, loc) - loc));
  int at = -1;
  std::string insert;
  element where;
  const bool has_where = pgjson::get(select.body, "whereClause", where);
  const bool simple =
      !pgjson::has(select.body, "groupClause") && !pgjson::has(select.body, "havingClause") &&
      !pgjson::has(select.body, "sortClause") && !pgjson::has(select.body, "limitCount") &&
      !pgjson::has(select.body, "limitOffset") && !pgjson::has(select.body, "lockingClause") &&
      !pgjson::has(select.body, "windowClause") &&
      !(has_where && asNode(where).type == "BoolExpr" &&
        pgjson::str(asNode(where).body, "boolop") == "OR_EXPR");
  const int link_at = static_cast<int>(pgjson::int64(sublink, "location", -1));
  const size_t open =
      link_at < 0 ? std::string_view::npos : text.sql.find('(', static_cast<size_t>(link_at));
  const size_t close = open == std::string_view::npos ? open : closeParen(text.sql, open);
  if (simple && !written.empty() && close != std::string_view::npos) {
    size_t end = close;
    while (end > open && std::isspace(static_cast<unsigned char>(text.sql[end - 1]))) --end;
    at = static_cast<int>(end);
    insert = std::string(has_where ? " AND " : " WHERE ") + written + " IS NOT NULL";
  }
  const size_t before = f.issues.size();
  if (at >= 0) {
    addIssue(f, text, ScreenIssue::Kind::kNotInSubquery, written, at, at, insert);
  } else {
    addIssue(f, text, ScreenIssue::Kind::kNotInSubquery, written, text.base, text.base, "");
  }
  if (f.issues.size() == before) return;
  ScreenIssue& issue = f.issues.back();
  if (at < 0) issue.location = -1;
  issue.ref_schema = sub.tables[0].schema;
  issue.ref_table = sub.tables[0].name;
  issue.ref_column = column;
}

namespace {

// Marks the FROM tables (in the order ScreenFacts::tables holds them) that sit on the nullable
// side of a LEFT or RIGHT JOIN: 1 nullable, 0 preserved, 2 under a FULL JOIN (left alone).
void nullableSides(element item, int mark, std::vector<int>& out) {
  Node n = asNode(item);
  if (n.type == "RangeVar") {
    out.push_back(mark);
    return;
  }
  if (n.type != "JoinExpr") return;
  const std::string_view type = pgjson::str(n.body, "jointype");
  const int full = type == "JOIN_FULL" ? 2 : mark;
  element l, r;
  if (pgjson::get(n.body, "larg", l))
    nullableSides(l, type == "JOIN_RIGHT" ? std::max(mark, 1) : full, out);
  if (pgjson::get(n.body, "rarg", r))
    nullableSides(r, type == "JOIN_LEFT" ? std::max(mark, 1) : full, out);
}

// A condition that is never true for a NULL column of the nullable side: `b.col op constant`
// (comparison, IN, LIKE, BETWEEN). Its column's table, and one past its end in the text (-1
// unknown).
bool rejectsNulls(object expr, const ScreenFacts& f, const Text& text, int& table, int& end) {
  const std::string_view kind = pgjson::str(expr, "kind");
  const std::string_view op = opName(expr);
  element l, r;
  std::string column;
  if (!pgjson::get(expr, "lexpr", l) || !pgjson::get(expr, "rexpr", r) ||
      asNode(l).type != "ColumnRef" || !columnOf(l, f, false, table, column) || table < 0) {
    return false;
  }
  ScreenValue v;
  if ((kind == "AEXPR_OP" &&
       (op == "=" || op == "<>" || op == "<" || op == ">" || op == "<=" || op == ">=")) ||
      (kind == "AEXPR_LIKE" || kind == "AEXPR_ILIKE")) {
    if (!valueOf(r, v) || v.null) return false;
    end = v.relative ? -1 : constEnd(text.sql, locationOf(r));
    return true;
  }
  Node list = asNode(r);
  array items;
  if ((kind != "AEXPR_IN" && kind != "AEXPR_BETWEEN") || list.type != "List" ||
      !pgjson::getArray(list.body, "items", items)) {
    return false;
  }
  element last;
  for (element item : items) {
    if (!valueOf(item, v) || v.null) return false;
    last = item;
  }
  end = -1;
  if (kind == "AEXPR_BETWEEN") {
    end = constEnd(text.sql, locationOf(last));
  } else {
    const int at = static_cast<int>(pgjson::int64(expr, "location", -1));
    const size_t open =
        at < 0 ? std::string_view::npos : text.sql.find('(', static_cast<size_t>(at));
    const size_t close = open == std::string_view::npos ? open : closeParen(text.sql, open);
    if (close != std::string_view::npos) end = static_cast<int>(close + 1);
  }
  return true;
}

}  // namespace

void leftJoinFiltered(object select, const Text& text, ScreenFacts& f) {
  array from;
  element where;
  if (!pgjson::getArray(select, "fromClause", from) || !pgjson::get(select, "whereClause", where))
    return;
  std::vector<int> sides;
  element top;
  size_t items = 0;
  for (element item : from) {
    nullableSides(item, 0, sides);
    top = item;
    ++items;
  }
  if (sides.size() != f.tables.size()) return;
  // The WHERE's top-level AND operands (or the whole WHERE), in order.
  std::vector<element> args;
  Node w = asNode(where);
  array list;
  if (w.type == "BoolExpr" && pgjson::str(w.body, "boolop") == "AND_EXPR" &&
      pgjson::getArray(w.body, "args", list)) {
    for (element a : list) args.push_back(a);
  } else {
    args.push_back(where);
  }
  std::vector<object> parts;
  for (element a : args) parts.push_back(asNode(a).body);
  for (size_t i = 0; i < parts.size() && i < 32; ++i) {
    int table = -1, end = -1;
    if (asNode(args[i]).type != "A_Expr" || !rejectsNulls(parts[i], f, text, table, end) ||
        sides[static_cast<size_t>(table)] != 1) {
      continue;
    }
    element l;
    pgjson::get(parts[i], "lexpr", l);
    const int start = locationOf(l);
    const ScreenTable& t = f.tables[static_cast<size_t>(table)];
    const std::string subject(text.sql.substr(
        static_cast<size_t>(start),
        nameEnd(text.sql, static_cast<size_t>(start)) - static_cast<size_t>(start)));
    // The edit moves the condition into the ON of the join: when that join is the whole FROM
    // (its ON ends where WHERE begins), its ON is no OR, and the condition comes first in WHERE.
    Node join = asNode(top);
    element quals, rarg;
    const bool movable = items == 1 && i == 0 && end > start && join.type == "JoinExpr" &&
                         pgjson::str(join.body, "jointype") == "JOIN_LEFT" &&
                         pgjson::get(join.body, "rarg", rarg) && asNode(rarg).type == "RangeVar" &&
                         static_cast<size_t>(table) + 1 == f.tables.size() &&
                         pgjson::get(join.body, "quals", quals) &&
                         !(asNode(quals).type == "BoolExpr" &&
                           pgjson::str(asNode(quals).body, "boolop") == "OR_EXPR");
    size_t kw = static_cast<size_t>(start);
    while (kw > 0 && std::isspace(static_cast<unsigned char>(text.sql[kw - 1]))) --kw;
    const bool after_where = kw >= 5 && wordAt(text.sql, static_cast<int>(kw - 5), "where");
    const std::string cond(
        movable ? text.sql.substr(static_cast<size_t>(start), static_cast<size_t>(end - start))
                : std::string_view());
    const size_t before = f.issues.size();
    if (movable && after_where) {
      const size_t from_kw = kw - 5;
      size_t rest = skipSpaces(text.sql, static_cast<size_t>(end));
      const bool more = parts.size() > 1;
      if (more && !wordAt(text.sql, static_cast<int>(rest), "and")) return;
      const size_t to = more ? skipSpaces(text.sql, rest + 3) : static_cast<size_t>(end);
      addIssue(f, text, ScreenIssue::Kind::kLeftJoinFiltered, subject, static_cast<int>(from_kw),
               static_cast<int>(to), "AND " + cond + (more ? " WHERE " : ""));
    } else {
      addIssue(f, text, ScreenIssue::Kind::kLeftJoinFiltered, subject, text.base, text.base, "");
      if (f.issues.size() > before) f.issues.back().location = -1;
    }
    if (f.issues.size() > before) f.issues.back().ref_table = t.name;
    return;  // one is enough: the fix is the same for the others
  }
}

namespace {

// The least location in a subtree: where an expression begins in the text.
int leftmost(element e, int depth) {
  Node n = asNode(e);
  if (!n || depth > 32) return -1;
  int best = static_cast<int>(pgjson::int64(n.body, "location", -1));
  for (auto field : n.body) {
    element v = field.value;
    auto visit = [&](element c) {
      const int at = leftmost(c, depth + 1);
      if (at >= 0 && (best < 0 || at < best)) best = at;
    };
    if (v.is_array()) {
      for (element item : v.get_array()) visit(item);
    } else if (v.is_object()) {
      visit(v);
    }
  }
  return best;
}

// The start of `first word second` (ORDER BY, GROUP BY) written just before `at`; -1 otherwise.
int keywordsBefore(std::string_view sql, int at, std::string_view first, std::string_view second) {
  size_t i = static_cast<size_t>(std::max(at, 0));
  for (std::string_view word : {second, first}) {
    if (word.empty()) continue;
    while (i > 0 && std::isspace(static_cast<unsigned char>(sql[i - 1]))) --i;
    if (i < word.size() || !wordAt(sql, static_cast<int>(i - word.size()), word)) return -1;
    i -= word.size();
  }
  return at >= 0 ? static_cast<int>(i) : -1;
}

// Whether `word` (lowercase) occurs in `sql` outside its string constants and comments: a
// constant ('deleted') is data the shape cache may swap for another, never a name the text uses.
bool containsWord(std::string_view sql, std::string_view word) {
  size_t i = 0;
  while (i < sql.size()) {
    if (const size_t next = skipConstantOrComment(sql, i); next != i) {
      i = next;
      continue;
    }
    size_t k = 0;
    // ASCII letters compare case-blind; '_' and digits as they are.
    auto folded = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch | 0x20) : ch; };
    while (k < word.size() && i + k < sql.size() && folded(sql[i + k]) == word[k]) ++k;
    if (k == word.size()) return true;
    ++i;
  }
  return false;
}

}  // namespace

void softDeleteFacts(object select, const Text& text, ScreenFacts& f) {
  const std::string_view sql = text.sql.substr(static_cast<size_t>(text.base));
  f.mentions_soft_delete =
      containsWord(sql, "delete") || containsWord(sql, "archive") || containsWord(sql, "remove");
  if (f.mentions_soft_delete || f.tables.empty()) return;
  element where, first;
  if (pgjson::get(select, "whereClause", where)) {
    Node w = asNode(where);
    if (w.type == "BoolExpr" && pgjson::str(w.body, "boolop") == "OR_EXPR") return;
    const int at = leftmost(where, 0);
    if (keywordsBefore(text.sql, at, "where", "") < 0) return;  // a parenthesis comes first
    f.filter_in_where = true;
    f.filter_at = at - text.base;
    return;
  }
  if (pgjson::has(select, "havingClause") || pgjson::has(select, "windowClause") ||
      pgjson::has(select, "lockingClause")) {
    return;
  }
  // No WHERE: one goes before GROUP BY, ORDER BY, LIMIT, or at the end.
  array items;
  int at = -1;
  if (pgjson::getArray(select, "groupClause", items)) {
    for (element g : items) {
      at = keywordsBefore(text.sql, leftmost(g, 0), "group", "by");
      break;
    }
  } else if (pgjson::getArray(select, "sortClause", items)) {
    for (element s : items) {
      at = keywordsBefore(text.sql, leftmost(s, 0), "order", "by");
      break;
    }
  } else if (pgjson::get(select, "limitCount", first) ||
             pgjson::get(select, "limitOffset", first)) {
    return;
  } else {
    size_t end = text.sql.size();
    while (
        end > static_cast<size_t>(text.base) &&
        (std::isspace(static_cast<unsigned char>(text.sql[end - 1])) || text.sql[end - 1] == ';')) {
      --end;
    }
    // Only the text's last statement ends at the end of the text.
    const size_t semicolon = text.sql.find(';', static_cast<size_t>(text.base));
    at = semicolon < end ? -1 : static_cast<int>(end);
  }
  if (at >= 0) f.filter_at = at - text.base;
}

}  // namespace pgwarden::analysis::detail::facts

namespace pgwarden::analysis {

bool namesWord(std::string_view sql, std::string_view word) {
  return detail::facts::containsWord(sql, word);
}

}  // namespace pgwarden::analysis
