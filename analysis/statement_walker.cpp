// Walks libpg_query's JSON parse tree of one statement into a StatementInfo: the entry point and
// the statement kinds (SELECT and DML, EXPLAIN, PREPARE, COPY, transaction control, SET, DDL and
// the rest). The Walker class is declared in walker.h; query_walker.cpp walks the queries.
#include "analysis/statement_walker.h"

#include <cctype>
#include <optional>
#include <string>
#include <utility>

#include "analysis/walker.h"

namespace pgwarden::analysis::detail {

namespace {

// One element of a list setting (search_path) as it must be written inside the setting's string
// form: a plain lower-case name as it is, anything else double-quoted.
std::string quoteListElement(const std::string& name) {
  bool plain = !name.empty() && (std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (const char c : name) {
    plain = plain && (std::islower(static_cast<unsigned char>(c)) ||
                      std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '$');
  }
  if (plain) return name;
  std::string out = "\"";
  for (const char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + '"';
}

}  // namespace

// libpg_query 15's JSON writes a negative integer constant as {"ival": {}}, the form of zero: the
// number is read back from the text at the constant's location.
std::string Walker::numberAt(element a) const {
  const int64_t at = pgjson::int64(asNode(a).body, "location", -1);
  if (at < 0 || static_cast<size_t>(at) >= sql_.size()) return "0";
  size_t end = static_cast<size_t>(at);
  if (sql_[end] == '-' || sql_[end] == '+') ++end;
  while (end < sql_.size() && std::isdigit(static_cast<unsigned char>(sql_[end]))) ++end;
  const std::string_view token = sql_.substr(static_cast<size_t>(at), end - static_cast<size_t>(at));
  return token.empty() || token == "-" || token == "+" ? "0" : std::string(token);
}

void Walker::run(element stmt) {
  out_.kind = walkStmt(stmt, Ctx{}, true, true);
  finish();
}

void Walker::setCommand(bool top, std::string c) {
  if (top) out_.command = std::move(c);
}

// The families are asked in the order their types have always been tested; the first that knows
// the type decides it.
StatementKind Walker::walkStmt(element node, Ctx ctx, bool outermost, bool top) {
  Node n = asNode(node);
  const std::string_view t = n.type;
  const object b = n.body;
  if (auto k = walkSelectOrDml(n, ctx, outermost, top)) return *k;
  if (auto k = walkExplainOrPrepare(node, n, top)) return *k;
  if (t == "CopyStmt") return walkCopy(b, top);
  if (auto k = walkCreateRelation(n, top)) return *k;
  if (t == "TransactionStmt") return walkTransaction(b, top);
  if (auto k = walkSessionSetting(n, top)) return *k;
  if (auto k = walkCallOrNotify(n, top)) return *k;
  if (auto k = walkAdmin(node, n, top)) return *k;
  setCommand(top, commandFromType(t));
  walkAny(node, Ctx{false, false, -1});
  return isDdl(t) ? StatementKind::kDdl : StatementKind::kOther;
}

// SELECT, VALUES, and the statements that write rows.
std::optional<StatementKind> Walker::walkSelectOrDml(Node n, Ctx ctx, bool outermost, bool top) {
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
  return std::nullopt;
}

// EXPLAIN, PREPARE and DECLARE CURSOR, which wrap a statement, and the statements that run or
// drop a prepared statement or a portal.
std::optional<StatementKind> Walker::walkExplainOrPrepare(element node, Node n, bool top) {
  const std::string_view t = n.type;
  const object b = n.body;
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
  return std::nullopt;
}

// The DDL that creates a relation and names it: CREATE TABLE, CREATE TABLE AS, CREATE VIEW and
// CREATE MATERIALIZED VIEW.
std::optional<StatementKind> Walker::walkCreateRelation(Node n, bool top) {
  const std::string_view t = n.type;
  const object b = n.body;
  if (t == "CreateTableAsStmt") {
    const bool matview = pgjson::str(b, "objtype") == "OBJECT_MATVIEW";
    setCommand(top, matview ? "CREATE MATERIALIZED VIEW" : "CREATE TABLE AS");
    object into, rel;
    if (pgjson::getObject(b, "into", into) && pgjson::getObject(into, "rel", rel)) {
      if (top && pgjson::str(rel, "relpersistence") == "t") out_.temporary = true;
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
      if (top && pgjson::str(rel, "relpersistence") == "t") out_.temporary = true;
      recordRangeVar(rel, Ctx{false, false, -1}, false, true, false);
    }
    for (auto field : b) {
      if (field.key != "view" && field.key != "relation" && isContainer(field.value)) {
        walkAny(field.value, Ctx{false, false, -1});
      }
    }
    return StatementKind::kDdl;
  }
  return std::nullopt;
}

// SET, RESET, SHOW, SET CONSTRAINTS and DISCARD.
std::optional<StatementKind> Walker::walkSessionSetting(Node n, bool top) {
  const std::string_view t = n.type;
  const object b = n.body;
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
  return std::nullopt;
}

// CALL and DO, which run procedural code, and LISTEN, NOTIFY and UNLISTEN.
std::optional<StatementKind> Walker::walkCallOrNotify(Node n, bool top) {
  const std::string_view t = n.type;
  const object b = n.body;
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
  return std::nullopt;
}

// Maintenance (VACUUM, ANALYZE, CLUSTER, REINDEX, CHECKPOINT, REFRESH), LOCK, ALTER SYSTEM, LOAD
// and TRUNCATE.
std::optional<StatementKind> Walker::walkAdmin(element node, Node n, bool top) {
  const std::string_view t = n.type;
  const object b = n.body;
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
  return std::nullopt;
}

bool Walker::isDdl(std::string_view t) {
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
std::string Walker::commandFromType(std::string_view t) {
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

bool Walker::defBool(object def) {
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
bool Walker::readWriteIn(object body, std::string_view key) {
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

StatementKind Walker::walkTransaction(object b, bool top) {
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
    // For the write mode: COMMIT/ROLLBACK AND CHAIN, and the savepoint a statement names.
    out_.chain = pgjson::boolean(b, "chain");
    out_.savepoint = lower(pgjson::str(b, "savepoint_name"));
  }
  setCommand(top, command);
  return StatementKind::kTransaction;
}

StatementKind Walker::walkVariableSet(object b, bool top) {
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
    out_.set_local = pgjson::boolean(b, "is_local");
    if (kind == "VAR_SET_DEFAULT") {
      out_.setting_value = "default";
    } else if (kind == "VAR_SET_CURRENT") {
      out_.setting_value = "current";
    } else {
      array args;
      if (pgjson::getArray(b, "args", args)) {
        const bool list = out_.setting == "search_path";
        for (element a : args) {
          if (!out_.setting_value.empty()) out_.setting_value += ", ";
          const ConstArg c = pgjson::constOf(a);
          const std::string text =
              c.type == ConstArg::Type::kInteger && c.number == 0 ? numberAt(a) : c.text;
          out_.setting_value += list ? quoteListElement(text) : text;
        }
      }
    }
  }
  return StatementKind::kSet;
}

StatementKind Walker::walkCopy(object b, bool top) {
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

StatementKind Walker::walkDml(std::string_view t, object b, Ctx ctx) {
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

}  // namespace pgwarden::analysis::detail
