// Column references and trivial predicates for the statement walker: which relations of a query
// level an expression reads, which WHERE/ON conjuncts can filter rows, FROM-item names, the stop
// condition of a recursive CTE arm, and the aggregate names that do or do not narrow rows.
#include "analysis/predicates.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace pgwarden::analysis::detail {

bool isContainer(element e) {
  const auto t = e.type();
  return t == simdjson::dom::element_type::OBJECT || t == simdjson::dom::element_type::ARRAY;
}

namespace {

// The last String of a name list such as A_Expr.name (["pg_catalog", "="]).
std::string_view lastName(object body, std::string_view key) {
  array names;
  std::string_view last;
  if (!pgjson::getArray(body, key, names)) return last;
  for (element n : names) last = pgjson::stringNode(n);
  return last;
}

}  // namespace

// ---- Column references and trivial predicates ----------------------------------------------

namespace {

void collectRefs(element e, const Names& level, bool inside_sub, Refs& r);

void columnRef(object body, const Names& level, bool inside_sub, Refs& r) {
  array fields;
  if (!pgjson::getArray(body, "fields", fields)) return;
  std::vector<std::string_view> parts;
  for (element f : fields) parts.push_back(pgjson::stringNode(f));  // A_Star gives ""
  if (parts.size() >= 2 && !parts[parts.size() - 2].empty()) {
    const std::string_view qual = parts[parts.size() - 2];
    // Inside a sublink only a reference qualified with this level's name is a correlation;
    // an unqualified one most likely names the sublink's own columns.
    if (!inside_sub || std::find(level.begin(), level.end(), qual) != level.end()) {
      r.any = true;
      r.quals.push_back(qual);
    }
  } else if (!inside_sub) {
    r.any = true;
    r.wildcard = true;
  }
}

void collectRefs(element e, const Names& level, bool inside_sub, Refs& r) {
  if (e.type() == simdjson::dom::element_type::ARRAY) {
    array a;
    if (e.get_array().get(a)) return;
    for (element child : a) collectRefs(child, level, inside_sub, r);
    return;
  }
  object o;
  if (e.get_object().get(o)) return;
  for (auto field : o) {
    const std::string_view k = field.key;
    // Operator names, constants, type names and aliases hold no column references.
    if (k == "name" || k == "A_Const" || k == "String" || k == "typeName" || k == "alias" ||
        !isContainer(field.value)) {
      continue;
    }
    if (k == "ColumnRef") {
      object body;
      if (!field.value.get_object().get(body)) columnRef(body, level, inside_sub, r);
    } else if (k == "SubLink") {
      object body;
      if (field.value.get_object().get(body)) continue;
      element test, sub;
      if (pgjson::get(body, "testexpr", test)) collectRefs(test, level, inside_sub, r);
      if (pgjson::get(body, "subselect", sub)) collectRefs(sub, level, true, r);
    } else {
      collectRefs(field.value, level, inside_sub, r);
    }
  }
}

bool onlyChar(std::string_view s, char c) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
}

bool complementaryNullTests(array args) {
  std::vector<std::pair<element, bool>> tests;  // (arg, is_null)
  for (element a : args) {
    Node n = asNode(a);
    element arg;
    if (n.type != "NullTest" || !pgjson::get(n.body, "arg", arg)) continue;
    tests.emplace_back(arg, pgjson::str(n.body, "nulltesttype") != "IS_NOT_NULL");
  }
  for (size_t i = 0; i < tests.size(); ++i) {
    for (size_t j = i + 1; j < tests.size(); ++j) {
      if (tests[i].second != tests[j].second && pgjson::sameTree(tests[i].first, tests[j].first)) {
        return true;
      }
    }
  }
  return false;
}

bool isTrivial(element expr, const Names& level);

// The shapes that cannot filter even though they read columns: x = x, LIKE '%', an OR with a
// trivial arm, NOT of a trivial one, an AND of trivial ones.
bool triviallyShaped(element expr, const Names& level) {
  Node n = asNode(expr);
  if (n.type == "BoolExpr") {
    const std::string_view op = pgjson::str(n.body, "boolop");
    array args;
    if (!pgjson::getArray(n.body, "args", args)) return true;
    if (op == "AND_EXPR") {
      for (element a : args) {
        if (!isTrivial(a, level)) return false;
      }
      return true;
    }
    if (op == "OR_EXPR") {
      for (element a : args) {
        if (isTrivial(a, level)) return true;
      }
      return complementaryNullTests(args);
    }
    if (op == "NOT_EXPR") {
      for (element a : args) return isTrivial(a, level);
      return true;
    }
    return false;
  }
  if (n.type == "A_Expr") {
    const std::string_view kind = pgjson::str(n.body, "kind");
    const std::string_view op = lastName(n.body, "name");
    element l, r;
    const bool hl = pgjson::get(n.body, "lexpr", l);
    const bool hr = pgjson::get(n.body, "rexpr", r);
    if (hl && hr) {
      if ((kind == "AEXPR_OP" && (op == "=" || op == "<=" || op == ">=")) ||
          kind == "AEXPR_NOT_DISTINCT") {
        if (pgjson::sameTree(l, r)) return true;
      }
      if ((kind == "AEXPR_LIKE" || kind == "AEXPR_ILIKE") && (op == "~~" || op == "~~*")) {
        const ConstArg c = pgjson::constOf(r);
        if (c.type == ConstArg::Type::kString && onlyChar(c.text, '%')) return true;
      }
      if (kind == "AEXPR_OP" && (op == "~" || op == "~*")) {
        const ConstArg c = pgjson::constOf(r);
        if (c.type == ConstArg::Type::kString && (c.text.empty() || c.text == ".*")) return true;
      }
    }
  }
  return false;
}

// A predicate is trivial when it cannot filter rows of the level: one that reads no column of
// the level (a constant, a parameter, an uncorrelated sublink) or one of the shapes above.
// `refs` receives the columns it reads (one scan serves both questions).
bool isTrivial(element expr, const Names& level, Refs& refs) {
  collectRefs(expr, level, false, refs);
  return !refs.any || triviallyShaped(expr, level);
}

bool isTrivial(element expr, const Names& level) {
  Refs refs;
  return isTrivial(expr, level, refs);
}

void conjuncts(element e, std::vector<element>& out) {
  Node n = asNode(e);
  if (n.type == "BoolExpr" && pgjson::str(n.body, "boolop") == "AND_EXPR") {
    array args;
    if (pgjson::getArray(n.body, "args", args)) {
      for (element a : args) conjuncts(a, out);
      return;
    }
  }
  out.push_back(e);
}

}  // namespace

// The non-trivial conjuncts of a WHERE/ON clause, each with the relations it reads.
std::vector<Refs> filtersOf(element expr, const Names& level) {
  std::vector<element> parts;
  conjuncts(expr, parts);
  std::vector<Refs> out;
  for (element c : parts) {
    Refs r;
    if (!isTrivial(c, level, r)) out.push_back(std::move(r));
  }
  return out;
}

bool matches(const std::vector<Refs>& filters, std::string_view name) {
  for (const auto& f : filters) {
    if (f.references(name)) return true;
  }
  return false;
}

std::string_view aliasOf(object body) {
  object alias;
  if (pgjson::getObject(body, "alias", alias)) return pgjson::str(alias, "aliasname");
  return {};
}

// Names a FROM item makes visible to column references (aliases, else relation names).
void fromNames(element item, Names& out) {
  Node n = asNode(item);
  if (n.type == "RangeVar") {
    const std::string_view a = aliasOf(n.body);
    out.push_back(a.empty() ? pgjson::str(n.body, "relname") : a);
  } else if (n.type == "JoinExpr") {
    element l, r;
    if (pgjson::get(n.body, "larg", l)) fromNames(l, out);
    if (pgjson::get(n.body, "rarg", r)) fromNames(r, out);
    const std::string_view a = aliasOf(n.body);
    if (!a.empty()) out.push_back(a);
  } else if (n.type == "RangeTableSample") {
    element rel;
    if (pgjson::get(n.body, "relation", rel)) fromNames(rel, out);
  } else if (n) {
    const std::string_view a = aliasOf(n.body);
    if (!a.empty()) out.push_back(a);
  }
}

namespace {

// Does the subtree read a relation named `name` without a schema (a recursive self-reference)?
bool mentions(element e, std::string_view name) {
  if (e.type() == simdjson::dom::element_type::ARRAY) {
    array a;
    if (e.get_array().get(a)) return false;
    for (element child : a) {
      if (mentions(child, name)) return true;
    }
    return false;
  }
  object o;
  if (e.get_object().get(o)) return false;
  if (pgjson::str(o, "relname") == name && !pgjson::has(o, "schemaname")) return true;
  for (auto field : o) {
    if (isContainer(field.value) && mentions(field.value, name)) return true;
  }
  return false;
}

bool hasNonTrivialJoinQuals(element item, const Names& level) {
  Node n = asNode(item);
  if (n.type != "JoinExpr") return false;
  element q, l, r;
  if (pgjson::has(n.body, "usingClause") || pgjson::boolean(n.body, "isNatural")) return true;
  if (pgjson::get(n.body, "quals", q) && !filtersOf(q, level).empty()) return true;
  return (pgjson::get(n.body, "larg", l) && hasNonTrivialJoinQuals(l, level)) ||
         (pgjson::get(n.body, "rarg", r) && hasNonTrivialJoinQuals(r, level));
}

}  // namespace

// A recursive arm that refers to its CTE must carry a stop condition: a non-trivial WHERE or
// join condition, or a LIMIT. Otherwise WITH RECURSIVE produces rows until a timeout.
bool armUnbounded(object sel, std::string_view cte) {
  const std::string_view op = pgjson::str(sel, "op");
  if (!op.empty() && op != "SETOP_NONE") {
    object l, r;
    return (pgjson::getObject(sel, "larg", l) && armUnbounded(l, cte)) ||
           (pgjson::getObject(sel, "rarg", r) && armUnbounded(r, cte));
  }
  element from;
  if (!pgjson::get(sel, "fromClause", from) || !mentions(from, cte)) return false;
  if (pgjson::has(sel, "limitCount")) return false;
  Names names;
  array items;
  if (pgjson::getArray(sel, "fromClause", items)) {
    for (element item : items) fromNames(item, names);
    for (element item : items) {
      if (hasNonTrivialJoinQuals(item, names)) return false;
    }
  }
  element where;
  if (pgjson::get(sel, "whereClause", where) && !filtersOf(where, names).empty()) return false;
  return true;
}

// Aggregates that return every input row in one value: they do not narrow what reaches the client.
bool collectingName(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "array_agg", "string_agg", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg",
      "xmlagg", "json_agg_strict", "jsonb_agg_strict", "json_object_agg_strict",
      "jsonb_object_agg_strict", "json_object_agg_unique", "jsonb_object_agg_unique",
      "json_arrayagg", "json_objectagg"};
  for (auto k : kNames) {
    if (k == n) return true;
  }
  return false;
}

bool aggregateName(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "bit_and", "bit_or",
      "bit_xor", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp", "corr",
      "covar_pop", "covar_samp", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept",
      "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "percentile_cont",
      "percentile_disc", "mode", "range_agg", "range_intersect_agg", "any_value"};
  for (auto k : kNames) {
    if (k == n) return true;
  }
  return collectingName(n);
}

}  // namespace pgwarden::analysis::detail
