// Walks libpg_query's JSON parse tree of one statement into a StatementInfo. The walk is generic
// (every object is visited, so relations and calls hidden in odd places are still found) with
// special handling where meaning depends on position: FROM items and their predicates, WITH
// scopes, sublinks, the outermost LIMIT, and the statement kinds.
#include "analysis/statement_walker.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

namespace pgwarden::guards::detail {

namespace {

using pgjson::array;
using pgjson::asNode;
using pgjson::element;
using pgjson::Node;
using pgjson::object;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool isContainer(element e) {
  const auto t = e.type();
  return t == simdjson::dom::element_type::OBJECT || t == simdjson::dom::element_type::ARRAY;
}

// The last String of a name list such as A_Expr.name (["pg_catalog", "="]).
std::string_view lastName(object body, std::string_view key) {
  array names;
  std::string_view last;
  if (!pgjson::getArray(body, key, names)) return last;
  for (element n : names) last = pgjson::stringNode(n);
  return last;
}

// ---- Column references and trivial predicates ----------------------------------------------

using Names = std::vector<std::string_view>;

// Which relations of a query level an expression reads columns of.
struct Refs {
  bool any = false;       // reads some column of the level
  bool wildcard = false;  // an unqualified column: may belong to any relation of the level
  std::vector<std::string_view> quals;
  bool references(std::string_view name) const {
    return wildcard || std::find(quals.begin(), quals.end(), name) != quals.end();
  }
};

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

class Walker {
 public:
  Walker(std::string_view sql, StatementInfo& out) : sql_(sql), out_(out) {}

  void run(element stmt) {
    out_.kind = walkStmt(stmt, Ctx{}, true, true);
    finish();
  }

 private:
  struct Ctx {
    bool filtered = false;  // an enclosing level filters these rows
    bool reaches = true;    // rows can reach the client
    int cte = -1;           // innermost CTE body being walked
  };
  // One mention of a relation (cte_target < 0) or of a CTE name (cte_target = its id).
  struct Ref {
    std::string_view schema, name;
    bool filtered = false, aggregated = false, reaches = false, written = false;
    bool trivial_where = false;
    int owner = -1;
    int cte_target = -1;
  };
  // How the rows of a CTE are used, summed over its references.
  struct Cte {
    std::string_view name;
    bool visiting = false, done = false;
    bool filtered = true, aggregated = true, reaches = false, unbounded = false;
  };
  struct Level {
    bool aggregate = false;
    bool collecting = false;
  };

  // ---- statements ----

  void setCommand(bool top, std::string c) {
    if (top) out_.command = std::move(c);
  }

  StatementKind walkStmt(element node, Ctx ctx, bool outermost, bool top) {
    Node n = asNode(node);
    const std::string_view t = n.type;
    const object b = n.body;
    if (t == "SelectStmt") {
      setCommand(top, pgjson::has(b, "intoClause")    ? "SELECT INTO"
                      : pgjson::has(b, "valuesLists") ? "VALUES"
                                                      : "SELECT");
      const bool agg = walkSelect(b, ctx, outermost);
      if (outermost) out_.has_aggregate = agg;
      return StatementKind::kSelect;
    }
    if (t == "InsertStmt" || t == "UpdateStmt" || t == "DeleteStmt" || t == "MergeStmt") {
      setCommand(top, t == "InsertStmt"   ? "INSERT"
                      : t == "UpdateStmt" ? "UPDATE"
                      : t == "DeleteStmt" ? "DELETE"
                                          : "MERGE");
      return walkDml(t, b, ctx);
    }
    if (t == "ExplainStmt") {
      bool analyze = false;
      array opts;
      if (pgjson::getArray(b, "options", opts)) {
        for (element o : opts) {
          Node d = asNode(o);
          if (d.type == "DefElem" && pgjson::str(d.body, "defname") == "analyze") {
            analyze = defBool(d.body);
          }
        }
      }
      if (top) out_.explain_analyze = analyze;
      setCommand(top, analyze ? "EXPLAIN ANALYZE" : "EXPLAIN");
      element q;
      if (pgjson::get(b, "query", q)) {
        const StatementKind k = walkStmt(q, Ctx{false, false, -1}, false, false);
        if (top) out_.inner_kind = k;
      }
      return StatementKind::kExplain;
    }
    if (t == "PrepareStmt" || t == "DeclareCursorStmt") {
      const bool prepare = t == "PrepareStmt";
      setCommand(top, prepare ? "PREPARE" : "DECLARE CURSOR");
      // CURSOR_OPT_HOLD (0x20) from parsenodes.h.
      if (!prepare && (pgjson::int64(b, "options") & 0x20)) out_.with_hold = true;
      element q;
      if (pgjson::get(b, "query", q)) {
        const StatementKind k = walkStmt(q, Ctx{false, true, -1}, true, false);
        if (top) out_.inner_kind = k;
      }
      return prepare ? StatementKind::kPrepare : StatementKind::kDeclareCursor;
    }
    if (t == "ExecuteStmt") {
      setCommand(top, "EXECUTE");
      walkAny(node, Ctx{false, false, -1});
      return StatementKind::kExecute;
    }
    if (t == "DeallocateStmt") {
      setCommand(top, "DEALLOCATE");
      return StatementKind::kDeallocate;
    }
    if (t == "FetchStmt") {
      setCommand(top, pgjson::boolean(b, "ismove") ? "MOVE" : "FETCH");
      return StatementKind::kFetch;
    }
    if (t == "ClosePortalStmt") {
      setCommand(top, "CLOSE");
      return StatementKind::kClosePortal;
    }
    if (t == "CopyStmt") return walkCopy(b, top);
    if (t == "CreateTableAsStmt") {
      const bool matview = pgjson::str(b, "objtype") == "OBJECT_MATVIEW";
      setCommand(top, matview ? "CREATE MATERIALIZED VIEW" : "CREATE TABLE AS");
      object into, rel;
      if (pgjson::getObject(b, "into", into) && pgjson::getObject(into, "rel", rel)) {
        recordRangeVar(rel, Ctx{false, false, -1}, false, true, false);
      }
      element q;
      if (pgjson::get(b, "query", q)) {
        const StatementKind k = walkStmt(q, Ctx{false, false, -1}, false, false);
        if (top) out_.inner_kind = k;
      }
      return StatementKind::kDdl;
    }
    if (t == "ViewStmt" || t == "CreateStmt") {
      setCommand(top, t == "ViewStmt" ? "CREATE VIEW" : "CREATE TABLE");
      object rel;
      if (pgjson::getObject(b, t == "ViewStmt" ? "view" : "relation", rel)) {
        recordRangeVar(rel, Ctx{false, false, -1}, false, true, false);
      }
      for (auto field : b) {
        if (field.key != "view" && field.key != "relation" && isContainer(field.value)) {
          walkAny(field.value, Ctx{false, false, -1});
        }
      }
      return StatementKind::kDdl;
    }
    if (t == "TransactionStmt") return walkTransaction(b, top);
    if (t == "VariableSetStmt") return walkVariableSet(b, top);
    if (t == "VariableShowStmt") {
      setCommand(top, "SHOW");
      if (top) out_.setting = lower(pgjson::str(b, "name"));
      return StatementKind::kShow;
    }
    if (t == "ConstraintsSetStmt") {
      setCommand(top, "SET CONSTRAINTS");
      return StatementKind::kSet;
    }
    if (t == "DiscardStmt") {
      setCommand(top, "DISCARD");
      return StatementKind::kDiscard;
    }
    if (t == "CallStmt") {
      setCommand(top, "CALL");
      object fc;
      if (pgjson::getObject(b, "funccall", fc)) {
        recordFunc(fc);
        array args;
        if (pgjson::getArray(fc, "args", args)) walkAny(args, Ctx{false, false, -1});
      }
      return StatementKind::kCall;
    }
    if (t == "DoStmt") {
      setCommand(top, "DO");
      return StatementKind::kDo;
    }
    if (t == "ListenStmt") {
      setCommand(top, "LISTEN");
      return StatementKind::kListen;
    }
    if (t == "NotifyStmt") {
      setCommand(top, "NOTIFY");
      return StatementKind::kNotify;
    }
    if (t == "UnlistenStmt") {
      setCommand(top, "UNLISTEN");
      return StatementKind::kUnlisten;
    }
    if (t == "VacuumStmt" || t == "ClusterStmt" || t == "ReindexStmt" || t == "CheckPointStmt" ||
        t == "RefreshMatViewStmt") {
      setCommand(top, t == "VacuumStmt"      ? (pgjson::boolean(b, "is_vacuumcmd") ? "VACUUM"
                                                                                   : "ANALYZE")
                      : t == "ClusterStmt"   ? "CLUSTER"
                      : t == "ReindexStmt"   ? "REINDEX"
                      : t == "CheckPointStmt" ? "CHECKPOINT"
                                              : "REFRESH MATERIALIZED VIEW");
      walkAny(node, Ctx{false, false, -1});
      return StatementKind::kMaintenance;
    }
    if (t == "LockStmt") {
      setCommand(top, "LOCK TABLE");
      walkAny(node, Ctx{false, false, -1});
      return StatementKind::kLock;
    }
    if (t == "AlterSystemStmt") {
      setCommand(top, "ALTER SYSTEM");
      object set;
      if (top && pgjson::getObject(b, "setstmt", set)) {
        out_.setting = pgjson::str(set, "kind") == "VAR_RESET_ALL" ? "all"
                                                                    : lower(pgjson::str(set, "name"));
      }
      return StatementKind::kAlterSystem;
    }
    if (t == "LoadStmt") {
      setCommand(top, "LOAD");
      return StatementKind::kLoad;
    }
    if (t == "TruncateStmt") {
      setCommand(top, "TRUNCATE");
      array rels;
      if (pgjson::getArray(b, "relations", rels)) {
        for (element r : rels) {
          Node rv = asNode(r);
          if (rv.type == "RangeVar") recordRangeVar(rv.body, Ctx{false, false, -1}, false, true, false);
        }
      }
      return StatementKind::kDelete;
    }
    setCommand(top, commandFromType(t));
    walkAny(node, Ctx{false, false, -1});
    return isDdl(t) ? StatementKind::kDdl : StatementKind::kOther;
  }

  static bool isDdl(std::string_view t) {
    auto starts = [&](std::string_view p) { return t.substr(0, p.size()) == p; };
    if (starts("Create") || starts("Alter") || starts("Drop") || starts("Define")) return true;
    static constexpr std::string_view kOthers[] = {
        "IndexStmt",      "GrantStmt",          "GrantRoleStmt",        "CommentStmt",
        "RenameStmt",     "RuleStmt",           "SecLabelStmt",         "ReassignOwnedStmt",
        "CompositeTypeStmt", "ImportForeignSchemaStmt", "AlterDefaultPrivilegesStmt"};
    for (auto o : kOthers) {
      if (o == t) return true;
    }
    return false;
  }

  // "CreateFunctionStmt" -> "CREATE FUNCTION", with the few PostgreSQL spellings that differ.
  static std::string commandFromType(std::string_view t) {
    static constexpr std::pair<std::string_view, std::string_view> kSpecial[] = {
        {"IndexStmt", "CREATE INDEX"},
        {"CreateSeqStmt", "CREATE SEQUENCE"},
        {"AlterSeqStmt", "ALTER SEQUENCE"},
        {"CreateFdwStmt", "CREATE FOREIGN DATA WRAPPER"},
        {"AlterFdwStmt", "ALTER FOREIGN DATA WRAPPER"},
        {"CreateForeignServerStmt", "CREATE SERVER"},
        {"CreateTrigStmt", "CREATE TRIGGER"},
        {"CreatedbStmt", "CREATE DATABASE"},
        {"DropdbStmt", "DROP DATABASE"},
        {"RuleStmt", "CREATE RULE"},
        {"DefineStmt", "CREATE"},
        {"CreatePLangStmt", "CREATE LANGUAGE"},
        {"GrantStmt", "GRANT"},
        {"GrantRoleStmt", "GRANT ROLE"},
        {"CompositeTypeStmt", "CREATE TYPE"},
        {"CreateEnumStmt", "CREATE TYPE"},
        {"CreateRangeStmt", "CREATE TYPE"},
    };
    for (const auto& [k, v] : kSpecial) {
      if (k == t) return std::string(v);
    }
    std::string_view base = t;
    if (base.size() > 4 && base.substr(base.size() - 4) == "Stmt") base.remove_suffix(4);
    std::string out;
    for (size_t i = 0; i < base.size(); ++i) {
      const char c = base[i];
      if (i > 0 && std::isupper(static_cast<unsigned char>(c))) out += ' ';
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out.empty() ? std::string("UNKNOWN") : out;
  }

  static bool defBool(object def) {
    element arg;
    if (!pgjson::get(def, "arg", arg)) return true;  // a bare option means true
    Node n = asNode(arg);
    if (n.type == "String") {
      const std::string v = lower(pgjson::str(n.body, "sval"));
      return !(v == "false" || v == "off" || v == "0" || v == "no");
    }
    if (n.type == "Integer") return pgjson::int64(n.body, "ival", 0) != 0;
    if (n.type == "Boolean") return pgjson::boolean(n.body, "boolval");
    const ConstArg c = pgjson::constOf(arg);
    if (c.type == ConstArg::Type::kInteger) return c.number != 0;
    if (c.type == ConstArg::Type::kBool) return c.text == "true";
    return true;  // unknown shape: assume the option is on
  }

  // Transaction modes: READ WRITE is transaction_read_only = 0.
  static bool readWriteIn(object body, std::string_view key) {
    array opts;
    if (!pgjson::getArray(body, key, opts)) return false;
    for (element o : opts) {
      Node d = asNode(o);
      element arg;
      if (d.type != "DefElem" || pgjson::str(d.body, "defname") != "transaction_read_only" ||
          !pgjson::get(d.body, "arg", arg)) {
        continue;
      }
      const ConstArg c = pgjson::constOf(arg);
      if ((c.type == ConstArg::Type::kInteger && c.number == 0) ||
          (c.type == ConstArg::Type::kBool && c.text == "false")) {
        return true;
      }
    }
    return false;
  }

  StatementKind walkTransaction(object b, bool top) {
    const std::string_view k = pgjson::str(b, "kind");
    static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
        {"TRANS_STMT_BEGIN", "BEGIN"},
        {"TRANS_STMT_START", "START TRANSACTION"},
        {"TRANS_STMT_COMMIT", "COMMIT"},
        {"TRANS_STMT_ROLLBACK", "ROLLBACK"},
        {"TRANS_STMT_SAVEPOINT", "SAVEPOINT"},
        {"TRANS_STMT_RELEASE", "RELEASE"},
        {"TRANS_STMT_ROLLBACK_TO", "ROLLBACK TO SAVEPOINT"},
        {"TRANS_STMT_PREPARE", "PREPARE TRANSACTION"},
        {"TRANS_STMT_COMMIT_PREPARED", "COMMIT PREPARED"},
        {"TRANS_STMT_ROLLBACK_PREPARED", "ROLLBACK PREPARED"},
    };
    std::string command = "TRANSACTION";
    for (const auto& [key, name] : kNames) {
      if (key == k) command = name;
    }
    if (top) {
      out_.two_phase = k == "TRANS_STMT_PREPARE" || k == "TRANS_STMT_COMMIT_PREPARED" ||
                       k == "TRANS_STMT_ROLLBACK_PREPARED";
      if (readWriteIn(b, "options")) out_.read_write_requested = true;
    }
    setCommand(top, command);
    return StatementKind::kTransaction;
  }

  StatementKind walkVariableSet(object b, bool top) {
    const std::string_view kind = pgjson::str(b, "kind");
    const std::string_view name = pgjson::str(b, "name");
    if (kind == "VAR_SET_MULTI") {
      const bool rw = readWriteIn(b, "args");
      if (top && rw) out_.read_write_requested = true;
      if (name == "SESSION CHARACTERISTICS") {
        setCommand(top, "SET SESSION CHARACTERISTICS");
        if (top) out_.setting = "session characteristics";
        return StatementKind::kSet;
      }
      setCommand(top, name == "TRANSACTION" ? "SET TRANSACTION" : "SET " + std::string(name));
      return StatementKind::kTransaction;
    }
    if (kind == "VAR_RESET_ALL" || kind == "VAR_RESET") {
      setCommand(top, "RESET");
      if (top) out_.setting = kind == "VAR_RESET_ALL" ? "all" : lower(name);
      return StatementKind::kReset;
    }
    setCommand(top, "SET");
    if (top) {
      out_.setting = lower(name);
      if (kind == "VAR_SET_DEFAULT") {
        out_.setting_value = "default";
      } else if (kind == "VAR_SET_CURRENT") {
        out_.setting_value = "current";
      } else {
        array args;
        if (pgjson::getArray(b, "args", args)) {
          for (element a : args) {
            if (!out_.setting_value.empty()) out_.setting_value += ", ";
            out_.setting_value += pgjson::constOf(a).text;
          }
        }
      }
    }
    return StatementKind::kSet;
  }

  StatementKind walkCopy(object b, bool top) {
    const bool from = pgjson::boolean(b, "is_from");
    const bool program = pgjson::boolean(b, "is_program");
    const bool file = pgjson::has(b, "filename");
    const bool to_client = !from && !program && !file;
    if (top) {
      out_.copy_from = from;
      out_.copy_to_file = !from && (program || file);
    }
    setCommand(top, "COPY");
    object rel;
    if (pgjson::getObject(b, "relation", rel)) {
      recordRangeVar(rel, Ctx{false, to_client, -1}, false, from, false);
    }
    element q;
    if (pgjson::get(b, "query", q)) {
      const StatementKind k = walkStmt(q, Ctx{false, to_client, -1}, true, false);
      if (top) out_.inner_kind = k;
    }
    element where;
    if (pgjson::get(b, "whereClause", where)) walkAny(where, Ctx{false, false, -1});
    return StatementKind::kCopy;
  }

  StatementKind walkDml(std::string_view t, object b, Ctx ctx) {
    const size_t visible = visible_.size();
    object with;
    if (pgjson::getObject(b, "withClause", with)) walkWith(with, ctx);
    object rel;
    const bool has_rel = pgjson::getObject(b, "relation", rel);
    bool filtered = false;
    element where;
    if ((t == "UpdateStmt" || t == "DeleteStmt") && pgjson::get(b, "whereClause", where)) {
      Names names;
      if (has_rel) {
        const std::string_view a = aliasOf(rel);
        names.push_back(a.empty() ? pgjson::str(rel, "relname") : a);
      }
      for (std::string_view key : {"fromClause", "usingClause"}) {
        array items;
        if (pgjson::getArray(b, key, items)) {
          for (element item : items) fromNames(item, names);
        }
      }
      filtered = !filtersOf(where, names).empty();
    }
    if (has_rel) recordRangeVar(rel, ctx, filtered, true, false);
    const Ctx inner{false, false, ctx.cte};
    for (auto field : b) {
      if (field.key == "relation" || field.key == "withClause" || !isContainer(field.value)) continue;
      walkAny(field.value, inner);
    }
    visible_.resize(visible);
    if (t == "InsertStmt") return StatementKind::kInsert;
    if (t == "UpdateStmt") return StatementKind::kUpdate;
    if (t == "DeleteStmt") return StatementKind::kDelete;
    return StatementKind::kMerge;
  }

  // ---- queries ----

  // Makes the CTE names of a WITH clause visible (the caller restores visible_ afterwards) and
  // walks each body. Without RECURSIVE a CTE sees only the ones before it, so a later CTE named
  // like a table cannot hide a read of that table in an earlier body.
  void walkWith(object with, Ctx ctx) {
    array list;
    if (!pgjson::getArray(with, "ctes", list)) return;
    const bool recursive = pgjson::boolean(with, "recursive");
    std::vector<int> ids;
    if (recursive) {
      out_.recursive_cte = true;
      for (element c : list) {
        Node n = asNode(c);
        const int id = newCte(pgjson::str(n.body, "ctename"));
        visible_.emplace_back(ctes_[id].name, id);
        ids.push_back(id);
      }
    }
    size_t i = 0;
    for (element c : list) {
      Node n = asNode(c);
      const std::string_view name = pgjson::str(n.body, "ctename");
      const int id = recursive ? ids[i] : newCte(name);
      ++i;
      element q;
      if (pgjson::get(n.body, "ctequery", q)) {
        Node qn = asNode(q);
        const Ctx body{false, true, id};
        if (qn.type == "InsertStmt" || qn.type == "UpdateStmt" || qn.type == "DeleteStmt" ||
            qn.type == "MergeStmt") {
          out_.modifying_cte = true;
          walkDml(qn.type, qn.body, body);
        } else if (qn.type == "SelectStmt") {
          Level* saved = level_;
          level_ = nullptr;
          walkSelect(qn.body, body, false);
          level_ = saved;
          if (recursive && armUnbounded(qn.body, name)) out_.unbounded_recursion = true;
        } else {
          walkAny(q, body);
        }
      }
      if (!recursive) visible_.emplace_back(name, id);
    }
    (void)ctx;
  }

  int newCte(std::string_view name) {
    ctes_.push_back(Cte{});
    ctes_.back().name = name;
    return static_cast<int>(ctes_.size()) - 1;
  }

  // The fields of a SelectStmt that the walk looks at, gathered in one pass over the object
  // (key lookups are linear scans; doing them one by one cost more than the rest of the walk).
  struct SelectFields {
    object with, larg, rarg, into;
    bool has_with = false, has_larg = false, has_rarg = false, has_into = false;
    array from;
    bool has_from = false;
    element where;
    bool has_where = false;
    bool locking = false, group = false, distinct = false, having = false;
    std::string_view op;
  };

  static SelectFields selectFields(object sel) {
    SelectFields f;
    for (auto field : sel) {
      const std::string_view k = field.key;
      if (k == "fromClause") {
        f.has_from = !field.value.get_array().get(f.from);
      } else if (k == "whereClause") {
        f.where = field.value;
        f.has_where = true;
      } else if (k == "withClause") {
        f.has_with = !field.value.get_object().get(f.with);
      } else if (k == "op") {
        f.op = field.value.get_string().value_unsafe();
      } else if (k == "larg") {
        f.has_larg = !field.value.get_object().get(f.larg);
      } else if (k == "rarg") {
        f.has_rarg = !field.value.get_object().get(f.rarg);
      } else if (k == "intoClause") {
        f.has_into = !field.value.get_object().get(f.into);
      } else if (k == "lockingClause") {
        f.locking = true;
      } else if (k == "groupClause") {
        f.group = true;
      } else if (k == "distinctClause") {
        f.distinct = true;
      } else if (k == "havingClause") {
        f.having = true;
      }
    }
    return f;
  }

  // Returns whether this query level reduces its rows (aggregate, GROUP BY, DISTINCT, HAVING).
  bool walkSelect(object sel, Ctx ctx, bool outermost) {
    const size_t visible = visible_.size();
    const SelectFields f = selectFields(sel);
    if (f.has_with) walkWith(f.with, ctx);
    if (f.locking) out_.locking_clause = true;
    bool aggregated = false;
    Level* saved = level_;
    if (!f.op.empty() && f.op != "SETOP_NONE") {
      const bool al = f.has_larg ? walkSelect(f.larg, ctx, false) : true;
      const bool ar = f.has_rarg ? walkSelect(f.rarg, ctx, false) : true;
      aggregated = al && ar;
      level_ = nullptr;
      for (auto field : sel) {
        const std::string_view k = field.key;
        if (k == "sortClause" || k == "limitCount" || k == "limitOffset") {
          walkAny(field.value, Ctx{false, ctx.reaches, ctx.cte});
        }
      }
    } else {
      Names names;
      if (f.has_from) {
        for (element item : f.from) fromNames(item, names);
      }
      std::vector<Refs> filters;
      if (f.has_where) filters = filtersOf(f.where, names);
      const bool trivial_where = f.has_where && filters.empty();

      level_ = nullptr;
      const size_t from_begin = refs_.size();
      if (f.has_from) {
        for (element item : f.from) walkFrom(item, ctx, filters, false, trivial_where);
      }
      const size_t from_end = refs_.size();

      Level level;
      level_ = &level;
      const Ctx expr{false, ctx.reaches, ctx.cte};
      for (auto field : sel) {
        const std::string_view k = field.key;
        if (k == "targetList" || k == "whereClause" || k == "havingClause" || k == "groupClause" ||
            k == "sortClause" || k == "windowClause" || k == "distinctClause" ||
            k == "valuesLists" || k == "limitCount" || k == "limitOffset") {
          walkAny(field.value, expr);
        }
      }
      aggregated = level.aggregate || f.group || f.distinct || f.having;
      if (level.collecting) aggregated = false;
      if (aggregated) {
        for (size_t i = from_begin; i < from_end; ++i) refs_[i].aggregated = true;
      }
      object rel;
      if (f.has_into) {
        if (outermost) out_.select_into = true;
        if (pgjson::getObject(f.into, "rel", rel)) recordRangeVar(rel, ctx, false, true, false);
      }
    }
    level_ = saved;
    if (outermost) readLimit(sel);
    visible_.resize(visible);
    return aggregated;
  }

  void walkFrom(element item, Ctx ctx, const std::vector<Refs>& filters, bool wild,
                bool trivial_where) {
    Node n = asNode(item);
    // A join and a sampled table are counted by the items they hold.
    if (n.type != "JoinExpr" && n.type != "RangeTableSample") ++out_.from_items;
    if (n.type == "RangeVar") {
      const std::string_view a = aliasOf(n.body);
      const std::string_view name = a.empty() ? pgjson::str(n.body, "relname") : a;
      const bool filtered = ctx.filtered || wild || matches(filters, name);
      recordRangeVar(n.body, ctx, filtered, false, trivial_where);
      return;
    }
    if (n.type == "RangeSubselect") {
      const std::string_view a = aliasOf(n.body);
      const bool filtered = ctx.filtered || wild || (!a.empty() && matches(filters, a));
      element sub;
      if (pgjson::get(n.body, "subquery", sub)) {
        Node sn = asNode(sub);
        const Ctx c{filtered, ctx.reaches, ctx.cte};
        if (sn.type == "SelectStmt") {
          walkSelect(sn.body, c, false);
        } else {
          walkAny(sub, c);
        }
      }
      return;
    }
    if (n.type == "JoinExpr") {
      const std::string_view jt = pgjson::str(n.body, "jointype");
      Names names;
      fromNames(item, names);
      element quals;
      const bool has_quals = pgjson::get(n.body, "quals", quals);
      std::vector<Refs> qf;
      if (has_quals) qf = filtersOf(quals, names);
      const bool join_wild = pgjson::has(n.body, "usingClause") || pgjson::boolean(n.body, "isNatural");
      const std::string_view a = aliasOf(n.body);
      const bool alias_hit = !a.empty() && matches(filters, a);
      // An outer join's ON clause does not filter its preserved side.
      const bool left_gets = jt.empty() || jt == "JOIN_INNER" || jt == "JOIN_RIGHT";
      const bool right_gets = jt.empty() || jt == "JOIN_INNER" || jt == "JOIN_LEFT";
      auto side = [&](bool gets) {
        std::vector<Refs> v = filters;
        if (gets) v.insert(v.end(), qf.begin(), qf.end());
        return v;
      };
      element l, r;
      if (pgjson::get(n.body, "larg", l)) {
        walkFrom(l, ctx, side(left_gets), wild || alias_hit || (join_wild && left_gets),
                 trivial_where);
      }
      if (pgjson::get(n.body, "rarg", r)) {
        walkFrom(r, ctx, side(right_gets), wild || alias_hit || (join_wild && right_gets),
                 trivial_where);
      }
      if (has_quals) walkAny(quals, Ctx{false, false, ctx.cte});
      return;
    }
    if (n.type == "RangeTableSample") {
      // TABLESAMPLE with a constant percentage below 100 bounds the rows like a predicate does.
      bool sampled = false;
      array args;
      if (pgjson::getArray(n.body, "args", args)) {
        for (element a : args) {
          const ConstArg c = pgjson::constOf(a);
          sampled = (c.type == ConstArg::Type::kInteger || c.type == ConstArg::Type::kFloat) &&
                    c.number < 100;
          break;
        }
        walkAny(args, Ctx{false, false, ctx.cte});
      }
      element rel;
      if (pgjson::get(n.body, "relation", rel)) {
        walkFrom(rel, Ctx{ctx.filtered || sampled, ctx.reaches, ctx.cte}, filters, wild,
                 trivial_where);
      }
      return;
    }
    walkAny(item, ctx);
  }

  void readLimit(object sel) {
    element lc;
    if (!pgjson::get(sel, "limitCount", lc)) {
      out_.limit = LimitKind::kNone;
      return;
    }
    Node n = asNode(lc);
    if (n.type == "A_Const") {
      const int loc = static_cast<int>(pgjson::int64(n.body, "location", -1));
      out_.limit_location = loc;
      out_.limit_length = loc >= 0 ? literalLength(sql_, loc) : 0;
      if (pgjson::boolean(n.body, "isnull")) {
        out_.limit = LimitKind::kAll;
        return;
      }
      const ConstArg c = pgjson::constOf(lc);
      if (c.type == ConstArg::Type::kInteger || c.type == ConstArg::Type::kFloat) {
        out_.limit = LimitKind::kConstant;
        out_.limit_value = c.number >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(std::llround(c.number));
        return;
      }
      out_.limit = LimitKind::kOther;
      return;
    }
    out_.limit_location = -1;
    out_.limit = n.type == "ParamRef" ? LimitKind::kParameter : LimitKind::kOther;
  }

  // ---- the generic walk ----

  void walkAny(array a, Ctx ctx) {
    for (element child : a) walkAny(child, ctx);
  }

  void walkAny(element e, Ctx ctx) {
    if (e.type() == simdjson::dom::element_type::ARRAY) {
      array a;
      if (e.get_array().get(a)) return;
      for (element child : a) walkAny(child, ctx);
      return;
    }
    object o;
    if (e.get_object().get(o)) return;
    for (auto field : o) {
      const std::string_view k = field.key;
      if (k == "relname") {
        // A RangeVar written unwrapped (a typed struct field such as COPY's relation). Its
        // fields before relname are scalars, so nothing below it was walked yet.
        recordRangeVar(o, ctx, ctx.filtered, false, false);
        return;
      }
      if (!isContainer(field.value)) continue;
      object body;
      if (k == "ColumnRef" || k == "A_Const" || k == "typeName" || k == "TypeName" ||
          k == "alias" || k == "String") {
        continue;
      }
      if (k == "ParamRef") {
        if (!field.value.get_object().get(body)) {
          out_.max_param = std::max<int>(out_.max_param, static_cast<int>(pgjson::int64(body, "number")));
        }
        continue;
      }
      if (k == "SelectStmt") {
        if (field.value.get_object().get(body)) continue;
        Level* saved = level_;
        level_ = nullptr;
        walkSelect(body, ctx, false);
        level_ = saved;
        continue;
      }
      if (k == "InsertStmt" || k == "UpdateStmt" || k == "DeleteStmt" || k == "MergeStmt") {
        if (!field.value.get_object().get(body)) walkDml(k, body, ctx);
        continue;
      }
      if (k == "FuncCall") {
        if (field.value.get_object().get(body)) continue;
        recordFunc(body);
        walkAny(field.value, ctx);
        continue;
      }
      if (k == "SubLink") {
        if (field.value.get_object().get(body)) continue;
        element test, sub;
        if (pgjson::get(body, "testexpr", test)) walkAny(test, ctx);
        if (pgjson::get(body, "subselect", sub)) {
          // ARRAY(...) hands its rows to the client as one array value, and so does a scalar
          // subquery: (SELECT array_agg(id) FROM big) is one value holding the whole table.
          const std::string_view type = pgjson::str(body, "subLinkType");
          const bool array_sub = type == "ARRAY_SUBLINK" || type == "EXPR_SUBLINK";
          Level* saved = level_;
          level_ = nullptr;
          walkAny(sub, Ctx{false, array_sub && ctx.reaches, ctx.cte});
          level_ = saved;
        }
        continue;
      }
      walkAny(field.value, ctx);
    }
  }

  void recordRangeVar(object rv, Ctx ctx, bool filtered, bool written, bool trivial_where) {
    Ref r;
    r.schema = pgjson::str(rv, "schemaname");
    r.name = pgjson::str(rv, "relname");
    r.owner = ctx.cte;
    r.filtered = filtered;
    r.written = written;
    r.reaches = ctx.reaches && !written;
    r.trivial_where = trivial_where;
    if (r.schema.empty()) {
      for (auto it = visible_.rbegin(); it != visible_.rend(); ++it) {
        if (it->first == r.name) {
          r.cte_target = it->second;
          break;
        }
      }
    }
    refs_.push_back(r);
  }

  void recordFunc(object fc) {
    array names;
    std::vector<std::string_view> parts;
    if (pgjson::getArray(fc, "funcname", names)) {
      for (element n : names) parts.push_back(pgjson::stringNode(n));
    }
    if (parts.empty()) return;
    FunctionCall call;
    call.name = std::string(parts.back());
    if (parts.size() >= 2) call.schema = std::string(parts[parts.size() - 2]);
    array args;
    if (pgjson::getArray(fc, "args", args)) {
      for (element a : args) call.args.push_back(pgjson::constOf(a));
    }
    call.aggregate_star = pgjson::boolean(fc, "agg_star");
    std::string qualified = call.schema.empty() ? call.name : call.schema + "." + call.name;
    if (std::find(out_.functions.begin(), out_.functions.end(), qualified) == out_.functions.end()) {
      out_.functions.push_back(std::move(qualified));
    }
    const std::string lname = lower(call.name);
    if (lname == "set_config" && (call.schema.empty() || iequals(call.schema, "pg_catalog"))) {
      const bool named = !call.args.empty() && call.args[0].type == ConstArg::Type::kString;
      out_.set_config_names.push_back(named ? lower(call.args[0].text) : "*");
    }
    if (level_ && !pgjson::has(fc, "over")) {
      const bool agg = call.aggregate_star || pgjson::boolean(fc, "agg_distinct") ||
                       pgjson::has(fc, "agg_order") || pgjson::boolean(fc, "agg_within_group") ||
                       pgjson::has(fc, "agg_filter") || aggregateName(lname);
      if (agg) {
        level_->aggregate = true;
        if (collectingName(lname)) level_->collecting = true;
      }
    }
    out_.calls.push_back(std::move(call));
  }

  // ---- results ----

  const Cte& effective(int id) {
    Cte& c = ctes_[id];
    if (c.done) return c;
    if (c.visiting) return c;  // a cycle through recursive CTEs: the partial sums so far
    c.visiting = true;
    bool any_use = false;
    bool f = true, a = true, r = false, u = false;
    for (const Ref& use : refs_) {
      if (use.cte_target != id || use.owner == id) continue;  // self-references add nothing
      any_use = true;
      bool uf = use.filtered, ua = use.aggregated, ur = use.reaches;
      bool uu = ur && !uf && !ua;
      if (use.owner >= 0) {
        const Cte& o = effective(use.owner);
        uf = uf || o.filtered;
        ua = ua || o.aggregated;
        ur = ur && o.reaches;
        uu = uu && o.unbounded;
      }
      f = f && uf;
      a = a && ua;
      r = r || ur;
      u = u || uu;
    }
    if (any_use) {
      c.filtered = f;
      c.aggregated = a;
      c.reaches = r;
      c.unbounded = u;
    }  // else: never read, so never run (a data-modifying CTE is caught by its own flag)
    c.visiting = false;
    c.done = true;
    return c;
  }

  void finish() {
    for (const Ref& ref : refs_) {
      if (ref.cte_target >= 0) continue;
      bool filtered = ref.filtered, aggregated = ref.aggregated, reaches = ref.reaches;
      bool unbounded = reaches && !filtered && !aggregated;
      if (ref.owner >= 0) {
        const Cte& c = effective(ref.owner);
        filtered = filtered || c.filtered;
        aggregated = aggregated || c.aggregated;
        reaches = reaches && c.reaches;
        unbounded = unbounded && c.unbounded;
      }
      RelationRef* rel = nullptr;
      for (auto& existing : out_.relations) {
        if (existing.schema == ref.schema && existing.name == ref.name) {
          rel = &existing;
          break;
        }
      }
      if (!rel) {
        out_.relations.push_back(RelationRef{});
        rel = &out_.relations.back();
        rel->schema = std::string(ref.schema);
        rel->name = std::string(ref.name);
        rel->has_predicate = true;
      }
      rel->has_predicate = rel->has_predicate && filtered;
      rel->written = rel->written || ref.written;
      rel->reaches_client = rel->reaches_client || reaches;
      rel->unbounded_read = rel->unbounded_read || unbounded;
      rel->trivial_predicate = rel->trivial_predicate || (ref.trivial_where && !filtered);
    }

    const StatementKind k = out_.kind;
    out_.returns_rows = (k == StatementKind::kSelect && !out_.select_into) ||
                        (k == StatementKind::kCopy && !out_.copy_from && !out_.copy_to_file) ||
                        k == StatementKind::kFetch || k == StatementKind::kExecute;
    out_.intent = inferIntent();
  }

  static bool isWrite(StatementKind k) {
    return k == StatementKind::kInsert || k == StatementKind::kUpdate ||
           k == StatementKind::kDelete || k == StatementKind::kMerge;
  }

  Intent readIntent() const {
    if (out_.relations.empty()) {
      for (const auto& c : out_.calls) {
        const std::string n = lower(c.name);
        if (n.rfind("pg_", 0) == 0 || n.rfind("has_", 0) == 0 || n.rfind("current_", 0) == 0 ||
            n == "version" || n == "obj_description" || n == "col_description" ||
            n == "format_type" || n.rfind("to_reg", 0) == 0) {
          return Intent::kCatalog;
        }
      }
      return Intent::kLookup;
    }
    bool all_catalog = true;
    for (const auto& r : out_.relations) {
      const bool catalog = iequals(r.schema, "pg_catalog") || iequals(r.schema, "information_schema") ||
                           (r.schema.empty() && r.name.rfind("pg_", 0) == 0);
      all_catalog = all_catalog && catalog;
    }
    if (all_catalog) return Intent::kCatalog;
    return out_.has_aggregate ? Intent::kAggregation : Intent::kLookup;
  }

  Intent inferIntent() const {
    if (out_.modifying_cte || out_.select_into) return Intent::kWrite;
    switch (out_.kind) {
      case StatementKind::kInsert:
      case StatementKind::kUpdate:
      case StatementKind::kDelete:
      case StatementKind::kMerge:
        return Intent::kWrite;
      case StatementKind::kDdl:
        return Intent::kDdl;
      case StatementKind::kMaintenance:
      case StatementKind::kLock:
      case StatementKind::kAlterSystem:
      case StatementKind::kLoad:
      case StatementKind::kListen:
      case StatementKind::kNotify:
      case StatementKind::kUnlisten:
      case StatementKind::kDiscard:
      case StatementKind::kCall:
      case StatementKind::kDo:
      case StatementKind::kSet:
      case StatementKind::kReset:
      case StatementKind::kShow:
        return Intent::kAdmin;
      case StatementKind::kTransaction:
      case StatementKind::kDeallocate:
      case StatementKind::kFetch:
      case StatementKind::kClosePortal:
      case StatementKind::kExecute:
      case StatementKind::kOther:
        return Intent::kOther;
      case StatementKind::kCopy:
        if (out_.copy_from) return Intent::kWrite;
        if (out_.copy_to_file) return Intent::kAdmin;
        return isWrite(out_.inner_kind) ? Intent::kWrite : readIntent();
      case StatementKind::kExplain:
        if (isWrite(out_.inner_kind)) return out_.explain_analyze ? Intent::kWrite : Intent::kOther;
        return readIntent();
      case StatementKind::kPrepare:
      case StatementKind::kDeclareCursor:
        if (isWrite(out_.inner_kind)) return Intent::kWrite;
        if (out_.inner_kind == StatementKind::kDdl) return Intent::kDdl;
        return readIntent();
      case StatementKind::kSelect:
        return readIntent();
    }
    return Intent::kOther;
  }

  std::string_view sql_;
  StatementInfo& out_;
  std::vector<Ref> refs_;
  std::vector<Cte> ctes_;
  std::vector<std::pair<std::string_view, int>> visible_;  // CTE names in scope, innermost last
  Level* level_ = nullptr;  // the query level whose target list is being walked
};

}  // namespace

int literalLength(std::string_view sql, int pos) {
  if (pos < 0 || static_cast<size_t>(pos) >= sql.size()) return 0;
  size_t i = static_cast<size_t>(pos);
  auto digit = [&](size_t j) { return j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j])); };
  const char c = sql[i];
  if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
    while (digit(i) || (i < sql.size() && sql[i] == '.')) ++i;
    if (i < sql.size() && (sql[i] == 'e' || sql[i] == 'E')) {
      size_t j = i + 1;
      if (j < sql.size() && (sql[j] == '+' || sql[j] == '-')) ++j;
      if (digit(j)) {
        i = j;
        while (digit(i)) ++i;
      }
    }
    return static_cast<int>(i - static_cast<size_t>(pos));
  }
  if (std::isalpha(static_cast<unsigned char>(c))) {
    while (i < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[i])) || sql[i] == '_')) ++i;
    return static_cast<int>(i - static_cast<size_t>(pos));
  }
  if (c == '\'') {
    ++i;
    while (i < sql.size()) {
      if (sql[i] == '\'') {
        if (i + 1 < sql.size() && sql[i + 1] == '\'') {
          i += 2;
          continue;
        }
        return static_cast<int>(i + 1 - static_cast<size_t>(pos));
      }
      ++i;
    }
  }
  return 0;
}

void walkStatement(element stmt, std::string_view sql, StatementInfo& out) {
  Walker(sql, out).run(stmt);
}

}  // namespace pgwarden::guards::detail
