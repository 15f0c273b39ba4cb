#include "mcp/tool_calls.h"

#include <algorithm>
#include <cstdio>

#include "budgets/budget.h"
#include "guards/guard.h"
#include "guards/guard_util.h"
#include "guards/masking.h"
#include "mcp/result_json.h"
#include "mcp/search_tool.h"
#include "mcp/write_tools.h"

namespace pgwarden::mcp {

namespace {

constexpr size_t kMaxListedTables = 500;
constexpr int kMaxPlanDepth = 64;
// describe_table samples tables estimated at this size or more with TABLESAMPLE.
constexpr int64_t kSampleScanRows = 10000;

std::string argString(const Json& args, const char* key) {
  if (!args.is_object()) return {};
  const auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t argInt(const Json& args, const char* key, int64_t fallback) {
  if (!args.is_object()) return fallback;
  const auto it = args.find(key);
  return it != args.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

// A guard's describe() object with its kind under "guard" (Facts puts it under "code").
Json guardJson(const guards::Guard& g) {
  Json j = Json::parse(g.describe(), nullptr, false);
  if (!j.is_object()) j = Json::object();
  j.erase("code");
  Json out{{"guard", std::string(g.kind())}};
  if (g.warnOnly()) out["action"] = "warn";
  out.update(j);
  return out;
}

bool tableAllowed(const guards::PolicyGroup* policy, std::string_view qualified) {
  if (!policy) return true;
  for (const auto& g : policy->guards()) {
    if (g->warnOnly()) continue;
    if (auto ok = g->allowsTable(qualified); ok && !*ok) return false;
  }
  return true;
}

// SQL LIKE's % and _ as the guards' glob (a literal * or ? in the pattern also matches any).
bool likeMatch(std::string_view pattern, std::string_view s) {
  std::string glob(pattern);
  for (char& c : glob) {
    if (c == '%') c = '*';
    if (c == '_') c = '?';
  }
  return guards::util::globMatch(glob, s, false);
}

// What the require_predicate guard of the group asks for, read from its description.
struct PredicateRule {
  bool present = false;
  int64_t min_rows = 0;
  std::vector<std::string> tables;
};

PredicateRule predicateRule(const guards::PolicyGroup* policy) {
  PredicateRule r;
  if (!policy) return r;
  for (const auto& g : policy->guards()) {
    if (g->kind() != "require_predicate" || g->warnOnly()) continue;
    Json j = Json::parse(g->describe(), nullptr, false);
    if (!j.is_object()) continue;
    r.present = true;
    r.min_rows = j.value("min_rows", int64_t{0});
    if (j.contains("tables") && j["tables"].is_array()) {
      for (const auto& t : j["tables"]) {
        if (t.is_string()) r.tables.push_back(t.get<std::string>());
      }
    }
  }
  return r;
}

// One name of a table argument at `i`: an identifier ([A-Za-z_][A-Za-z0-9_$]*) or a
// double-quoted one (no NUL; "" is a quote). Advances `i` past it; false when there is none.
bool readNamePart(const std::string& s, size_t& i) {
  const auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (i < s.size() && alpha(s[i])) {
    ++i;
    while (i < s.size() && (alpha(s[i]) || digit(s[i]) || s[i] == '$')) ++i;
    return true;
  }
  if (i >= s.size() || s[i] != '"') return false;
  size_t n = 0;
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\0') return false;
    if (s[i] != '"') {
      ++n;
    } else if (i + 1 < s.size() && s[i + 1] == '"') {
      ++i;
      ++n;
    } else {
      ++i;
      return n > 0;
    }
  }
  return false;  // unterminated
}

// A table argument: an identifier or a double-quoted one, optionally schema-qualified.
bool validTableName(const std::string& s) {
  if (s.size() > 256) return false;
  size_t i = 0;
  if (!readNamePart(s, i)) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!readNamePart(s, i)) return false;
  }
  return i == s.size();
}

void walkPlan(const Json& node, int depth, Json& scans) {
  if (!node.is_object() || depth > kMaxPlanDepth || scans.size() >= 200) return;
  const std::string type = node.value("Node Type", std::string());
  if (node.contains("Relation Name")) {
    std::string rel = node.value("Relation Name", std::string());
    if (node.contains("Schema")) rel = node.value("Schema", std::string()) + "." + rel;
    Json s{{"table", rel}, {"scan", type}};
    if (node.contains("Index Name")) s["index"] = node["Index Name"];
    if (node.contains("Plan Rows")) s["estimated_rows"] = node["Plan Rows"];
    if (node.contains("Total Cost")) s["total_cost"] = node["Total Cost"];
    scans.push_back(std::move(s));
  }
  if (const auto it = node.find("Plans"); it != node.end() && it->is_array()) {
    for (const auto& child : *it) walkPlan(child, depth + 1, scans);
  }
}

const char* relationKind(char relkind) {
  switch (relkind) {
    case 'p':
      return "partitioned table";
    case 'v':
      return "view";
    case 'm':
      return "materialized view";
    case 'f':
      return "foreign table";
    default:
      return "table";
  }
}

const char* kCatalogSql =
    "SELECT json_build_object("
    "'table', n.nspname || '.' || c.relname,"
    "'kind', CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN "
    "'view'"
    " WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' ELSE c.relkind::text END,"
    "'estimated_rows', greatest(c.reltuples, 0)::bigint,"
    "'comment', obj_description(c.oid, 'pg_class'),"
    "'columns', (SELECT json_agg(json_build_object("
    "  'name', a.attname, 'type', format_type(a.atttypid, a.atttypmod), 'nullable', NOT "
    "a.attnotnull,"
    "  'comment', col_description(c.oid, a.attnum),"
    "  'known_values', COALESCE("
    "    (SELECT json_agg(e.enumlabel ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = "
    "a.atttypid),"
    "    (SELECT array_to_json(s.most_common_vals::text::text[]) FROM pg_stats s"
    "      WHERE s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = a.attname"
    "        AND cardinality(s.most_common_freqs) <= 30"
    "        AND (SELECT sum(f) FROM unnest(s.most_common_freqs) f) + s.null_frac >= 0.95)))"
    "  ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT "
    "a.attisdropped),"
    "'indexes', (SELECT json_agg(pg_get_indexdef(i.indexrelid)) FROM pg_index i WHERE i.indrelid = "
    "c.oid),"
    "'checks', (SELECT json_agg(pg_get_constraintdef(k.oid)) FROM pg_constraint k"
    "  WHERE k.conrelid = c.oid AND k.contype = 'c'),"
    "'foreign_keys', (SELECT json_agg(json_build_object('name', k.conname, 'references', "
    "k.confrelid::regclass::text,"
    "  'definition', pg_get_constraintdef(k.oid)) ORDER BY k.conname) FROM pg_constraint k"
    "  WHERE k.conrelid = c.oid AND k.contype = 'f'),"
    "'referenced_by', (SELECT json_agg(json_build_object('name', k.conname, 'table', "
    "k.conrelid::regclass::text,"
    "  'definition', pg_get_constraintdef(k.oid)) ORDER BY k.conname) FROM pg_constraint k"
    "  WHERE k.confrelid = c.oid AND k.contype = 'f'),"
    "'definition', CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END)"
    " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(";

// Masked columns (docs/masking.md): a column's known values are its values; it says it is masked.
void markMasked(Json& info, const guards::Masking& m, const analysis::TableStatsSnapshot* stats) {
  const std::string q = info["table"].get<std::string>();
  const size_t dot = q.find('.');
  if (dot == std::string::npos || !info["columns"].is_array()) return;
  const auto names = m.maskedNames(q.substr(0, dot), q.substr(dot + 1), stats);
  for (auto& c : info["columns"]) {
    const std::string name = c.is_object() ? c.value("name", std::string()) : std::string();
    for (const auto& n : names) {
      if (n != name && n != "*") continue;
      c["known_values"] = nullptr;
      c["masked"] = true;
    }
  }
}

}  // namespace

RunSpec runSpec(const CallContext& ctx, std::string_view tool, std::string sql, int64_t max_rows) {
  RunSpec spec;
  spec.who = ctx.who;
  spec.sql = std::move(sql);
  spec.agent_id = ctx.agent_id;
  spec.conversation_id = ctx.conversation_id;
  spec.application_name = "mcp:" + std::string(tool);
  spec.tool = std::string(tool);
  spec.client_addr = ctx.client_addr;
  spec.session_id = ctx.session_id;
  spec.max_rows = max_rows;
  spec.max_result_bytes = ctx.max_result_bytes;
  spec.request_id = ctx.request_id;
  spec.traceparent = ctx.traceparent;
  spec.history_ids = ctx.history_ids;
  return spec;
}

void addCallFacts(Json& structured, const CallContext& ctx) {
  if (!structured.is_object()) return;
  if (ctx.history_ids && !ctx.history_ids->empty()) structured["history_ids"] = *ctx.history_ids;
  if (!ctx.transaction_handle.empty()) structured["transaction_handle"] = ctx.transaction_handle;
}

ToolCall::ToolCall(McpHost& host, CallContext ctx, Tool tool, Json args, Done done)
    : host_(host), ctx_(std::move(ctx)), tool_(tool), args_(std::move(args)), done_(std::move(done)) {}

ToolCall::~ToolCall() {
  // The runners give the transaction's connection back before the transaction is let go.
  runner_.reset();
  spent_.clear();
  if (txn_claimed_) ctx_.writes->release();
}

void ToolCall::start() {
  switch (tool_) {
    case Tool::kQuery: {
      const int64_t max_rows = std::min(argInt(args_, "max_rows", ctx_.max_rows), ctx_.max_rows);
      runStatement(argString(args_, "sql"), max_rows, false, false,
                   [this](RunResult&& r) { finishQuery(std::move(r)); });
      return;
    }
    case Tool::kExplain:
      runStatement(argString(args_, "sql"), 1, true, false,
                   [this](RunResult&& r) { finishExplain(std::move(r)); });
      return;
    case Tool::kPolicy: answerPolicy(); return;
    case Tool::kListSchemas: answerListSchemas(); return;
    case Tool::kListTables: answerListTables(); return;
    case Tool::kDescribeTable: startDescribe(); return;
    case Tool::kSearch:
      startSearch();
      return;
    case Tool::kBegin:
    case Tool::kExecute:
    case Tool::kCommit:
    case Tool::kRollback:
      break;  // a WriteToolCall's (mcp/write_tools.h)
  }
  finish({{"code", "INTERNAL"}, {"message", "not a tool of this kind of call"}}, true, "error",
         "Failed:");
}

void ToolCall::cancel() {
  if (finished_) return;
  cancelled_ = true;
  if (runner_) runner_->cancel();
}

void ToolCall::runStatement(std::string sql, int64_t max_rows, bool explain_only, bool internal,
                            StatementRunner::Done done) {
  RunSpec spec = runSpec(ctx_, toolName(tool_), std::move(sql), max_rows);
  spec.explain_only = explain_only;
  spec.internal = internal;
  const session::TxnState txn = ctx_.writes ? ctx_.writes->state() : session::TxnState::kNone;
  if (txn == session::TxnState::kOpen || txn == session::TxnState::kFailed) {
    // Inside the session's open transaction a read runs on its connection and sees its changes.
    if (!txn_claimed_ && !ctx_.writes->claim()) {
      finish({{"code", "TRANSACTION_BUSY"},
              {"message",
               std::string(toolName(tool_)) +
                   " must wait: a call of this session's transaction is still running; call "
                   "again once it has answered."},
              {"next_step", "call " + std::string(toolName(tool_)) + " again"}},
             true, "denied", "pgwarden refused the call:");
      return;
    }
    txn_claimed_ = true;
    spec.txn = ctx_.writes.get();
    spec.read_only = true;
    done = [this, next = std::move(done)](RunResult&& r) {
      (void)ctx_.writes->afterRun(r);  // the transaction's state moves as the server says
      next(std::move(r));
    };
  }
  if (runner_) spent_.push_back(std::move(runner_));
  runner_ = std::make_unique<StatementRunner>(host_, std::move(spec), std::move(done));
  runner_->start();
}

void ToolCall::finish(Json structured, bool is_error, const char* outcome, std::string_view heading) {
  if (finished_) return;
  finished_ = true;
  if (txn_claimed_) {
    // The runner (whose callback this may be) has given the connection back already.
    txn_claimed_ = false;
    ctx_.writes->release();
  }
  addCallFacts(structured, ctx_);
  Json result = toolResult(std::move(structured), is_error, heading);
  Done done = std::move(done_);
  if (done) done(std::move(result), outcome);
}

bool ToolCall::finishedByFailure(const RunResult& r) {
  if (r.kind == RunResult::Kind::kDenied && r.plan) {
    Json d = denialJson(r.plan->decision.deny);
    d["denied"] = true;
    finish(std::move(d), true, "denied", "pgwarden refused the statement:");
    return true;
  }
  if (r.screen_denial) {
    Json d = denialJson(*r.screen_denial);
    d["denied"] = true;
    finish(std::move(d), true, "denied", "pgwarden refused the result:");
    return true;
  }
  if (r.kind == RunResult::Kind::kError || r.cancelled) {
    finish(runErrorJson(r, "fix the statement and try again"), true, runCancelled(r) ? "cancelled" : "error",
           "The statement failed:");
    return true;
  }
  return false;
}

void ToolCall::finishQuery(RunResult&& r) {
  if (finishedByFailure(r)) return;
  if (ctx_.writes && r.plan && r.plan->analysis) {
    // A write group's read: its tables count as looked at before the transaction changes them.
    for (const auto& st : r.plan->analysis->statements) {
      if (st.kind == analysis::StatementKind::kSelect) ctx_.writes->noteRead(st);
    }
  }
  Json out = queryResultJson(r);
  std::string heading = "The query returned " + std::to_string(out["row_count"].get<size_t>()) + " row(s)";
  if (out["truncated"].get<bool>()) heading += " (truncated: more rows exist; narrow the query)";
  heading += ":";
  finish(std::move(out), false, "ok", heading);
}

void ToolCall::finishExplain(RunResult&& r) {
  const bool cost_denied = r.kind == RunResult::Kind::kDenied && !r.explain_json.empty();
  if (!cost_denied && finishedByFailure(r)) return;
  Json out = Json::object();
  Json plan = Json::parse(r.explain_json, nullptr, false);
  if (plan.is_discarded() || !jsonDepthWithin(r.explain_json, 200)) plan = nullptr;
  Json scans = Json::array();
  if (plan.is_array() && !plan.empty() && plan[0].is_object() && plan[0].contains("Plan")) {
    const Json& root = plan[0]["Plan"];
    if (root.contains("Total Cost")) out["total_cost"] = root["Total Cost"];
    if (root.contains("Plan Rows")) out["estimated_rows"] = root["Plan Rows"];
    walkPlan(root, 0, scans);
  }
  out["scans"] = std::move(scans);
  bool has_gate = false;
  if (ctx_.who.policy) {
    for (const auto& g : ctx_.who.policy->guards()) has_gate = has_gate || g->kind() == "cost_gate";
  }
  out["allowed"] = !cost_denied;
  Json gate{{"configured", has_gate}, {"passes", !cost_denied}};
  if (cost_denied) gate["denial"] = denialJson(r.plan->decision.deny);
  out["cost_gate"] = std::move(gate);
  out["plan"] = std::move(plan);
  finish(std::move(out), false, cost_denied ? "denied" : "ok",
         cost_denied ? "The plan (the cost gate would refuse this statement):" : "The plan:");
}

void ToolCall::answerPolicy() {
  const auto* policy = ctx_.who.policy;
  Json out{{"user", ctx_.who.user}, {"group", ctx_.who.group}, {"database", ctx_.who.database}};
  Json guards = Json::array();
  if (policy) {
    for (const auto& g : policy->guards()) guards.push_back(guardJson(*g));
    if (!policy->searchPath().empty()) out["search_path"] = policy->searchPath();
  }
  out["guards"] = std::move(guards);
  Json limits{{"max_rows_per_call", ctx_.max_rows}, {"max_result_bytes", ctx_.max_result_bytes}};
  if (ctx_.who.statement_timeout_ms > 0) limits["statement_timeout_ms"] = ctx_.who.statement_timeout_ms;
  out["limits"] = std::move(limits);
  out["budget"] = nullptr;
  const std::string conversation =
      argString(args_, "conversation_id").empty() ? ctx_.conversation_id : argString(args_, "conversation_id");
  out["conversation_id"] = conversation;
  const budgets::BudgetGuard* bg = policy ? budgets::findBudgetGuard(*policy) : nullptr;
  if (bg) {
    const auto& l = bg->limits();
    Json b{{"max_statements", l.max_statements}, {"max_denied", l.max_denied}, {"max_rows", l.max_rows}};
    if (auto* ledger = host_.budgets()) {
      guards::RequestContext rc;
      rc.user = ctx_.who.user;
      rc.conversation_id = conversation;
      rc.session_id = ctx_.session_id;
      const auto used = ledger->counters(ledger->keyFor(rc));
      b["used"] = {{"statements", used.statements}, {"denied", used.denied}, {"rows", used.rows}};
      auto left = [](int64_t max, int64_t n) { return max > 0 ? Json(std::max<int64_t>(0, max - n)) : Json(nullptr); };
      b["remaining"] = {{"statements", left(l.max_statements, used.statements)},
                        {"denied", left(l.max_denied, used.denied)},
                        {"rows", left(l.max_rows, used.rows)}};
    }
    out["budget"] = std::move(b);
  }
  finish(std::move(out), false, "ok", "Your policy:");
}

void ToolCall::answerListSchemas() {
  auto snap = host_.tableStats(ctx_.who.server_database);
  std::map<std::string, int64_t> counts;
  if (snap) {
    for (const auto& [name, st] : snap->tables()) {
      if (!tableAllowed(ctx_.who.policy, name)) continue;
      const auto dot = name.find('.');
      ++counts[name.substr(0, dot)];
    }
  }
  Json schemas = Json::array();
  for (const auto& [s, n] : counts) schemas.push_back({{"schema", s}, {"tables", n}});
  Json out{{"schemas", std::move(schemas)}};
  if (!snap) out["note"] = "the catalog snapshot is not loaded yet; try again in a moment";
  finish(std::move(out), false, "ok", "Schemas you may read:");
}

void ToolCall::answerListTables() {
  auto snap = host_.tableStats(ctx_.who.server_database);
  const std::string schema = argString(args_, "schema");
  const std::string like = argString(args_, "name_like");
  const PredicateRule rule = predicateRule(ctx_.who.policy);
  Json tables = Json::array();
  bool truncated = false;
  if (snap) {
    for (const auto& [name, st] : snap->tables()) {
      const auto dot = name.find('.');
      const std::string_view sch = std::string_view(name).substr(0, dot);
      const std::string_view tab = dot == std::string::npos ? std::string_view(name) : std::string_view(name).substr(dot + 1);
      if (!schema.empty() && sch != schema) continue;
      if (!like.empty() && !likeMatch(like, tab)) continue;
      if (!tableAllowed(ctx_.who.policy, name)) continue;
      if (tables.size() >= kMaxListedTables) {
        truncated = true;
        break;
      }
      bool listed = false;
      for (const auto& t : rule.tables) listed = listed || t == name || t == tab;
      const bool required = rule.present && (listed || (rule.min_rows > 0 && st.estimated_rows >= rule.min_rows));
      Json t{{"schema", sch},
             {"table", tab},
             {"kind", relationKind(st.kind)},
             {"estimated_rows", st.estimated_rows},
             {"predicate_required", required}};
      if (!st.indexed_columns.empty()) t["indexed_columns"] = st.indexed_columns;
      tables.push_back(std::move(t));
    }
  }
  Json out{{"tables", std::move(tables)}, {"truncated", truncated}};
  if (!snap) out["note"] = "the catalog snapshot is not loaded yet; try again in a moment";
  finish(std::move(out), false, "ok", "Tables you may read:");
}

void ToolCall::startDescribe() {
  const std::string table = argString(args_, "table");
  if (!validTableName(table)) {
    finish({{"code", "INVALID_TABLE"}, {"message", "not a table name: use name or schema.name"},
            {"next_step", "call list_tables to see the names"}},
           true, "error", "Invalid argument:");
    return;
  }
  runStatement(std::string(kCatalogSql) + quoteLiteral(table) + ")", 1, false, true,
               [this](RunResult&& r) { describeGotCatalog(std::move(r)); });
}

void ToolCall::startSearch() {
  const std::string text = argString(args_, "text");
  const auto detail = parseSearchDetail(argString(args_, "detail"));
  const int64_t limit = argInt(args_, "limit", kSearchDefaultLimit);
  runStatement(searchSql(text, argString(args_, "schema")), kSearchMaxRows + 1, false, true,
               [this, detail, limit](RunResult&& r) {
                 if (cancelled_ || r.kind != RunResult::Kind::kOk || r.sets.empty()) {
                   finish({{"code", cancelled_ ? "CANCELLED" : "SERVER_ERROR"},
                           {"sqlstate", r.sqlstate},
                           {"message", r.message}},
                          true, cancelled_ ? "cancelled" : "error", "The search failed:");
                   return;
                 }
                 const auto* policy = ctx_.who.policy;
                 Json out = searchAnswer(
                     r.sets[0].rows, detail.value_or(SearchDetail::kNames), limit,
                     [policy](const std::string& t) { return tableAllowed(policy, t); });
                 const size_t n = out["matches"].size();
                 finish(std::move(out), false, "ok",
                        n == 0 ? "Nothing matched:" : "Matching tables and columns, best first:");
               });
}

void ToolCall::describeGotCatalog(RunResult&& r) {
  if (cancelled_ || r.kind != RunResult::Kind::kOk) {
    Json e{{"code", cancelled_ ? "CANCELLED" : "SERVER_ERROR"}, {"sqlstate", r.sqlstate}, {"message", r.message}};
    finish(std::move(e), true, cancelled_ ? "cancelled" : "error", "The table could not be described:");
    return;
  }
  Json info = nullptr;
  if (!r.sets.empty() && !r.sets[0].rows.empty() && !r.sets[0].rows[0].empty() && r.sets[0].rows[0][0]) {
    info = Json::parse(*r.sets[0].rows[0][0], nullptr, false);
  }
  if (!info.is_object() || !info.contains("table") || !info["table"].is_string()) {
    finish({{"code", "NO_SUCH_TABLE"}, {"message", "no such table: " + argString(args_, "table")},
            {"next_step", "call list_tables to see the names"}},
           true, "error", "The table could not be described:");
    return;
  }
  const std::string qualified = info["table"].get<std::string>();
  if (!tableAllowed(ctx_.who.policy, qualified)) {
    // Answered as if it did not exist: a denied table's columns are not for this caller.
    finish({{"code", "TABLE_DENIED"}, {"message", "your policy does not allow reading " + qualified},
            {"next_step", "call list_tables to see the tables you may read"}},
           true, "denied", "pgwarden refused:");
    return;
  }
  if (ctx_.writes) ctx_.writes->noteLooked(qualified);  // its columns were looked at
  describe_ = std::move(info);
  if (const guards::Masking* m = ctx_.who.policy ? ctx_.who.policy->masking() : nullptr) {
    markMasked(describe_, *m, host_.tableStats(ctx_.who.server_database).get());
  }
  const bool schema_only =
      ctx_.who.policy && ctx_.who.policy->masking() && ctx_.who.policy->masking()->schemaOnly();
  const int64_t n = schema_only ? 0 : argInt(args_, "sample_rows", 3);
  if (schema_only) describe_["sample_withheld"] = "schema_only";
  if (n <= 0) {
    describe_["sample"] = nullptr;
    finish(std::move(describe_), false, "ok", "The table:");
    return;
  }
  // The sample goes through the policy like any query (and is recorded). On a big table it is a
  // TABLESAMPLE of about a thousand rows' worth of pages, cut to n: a bounded read by
  // construction, which a guard against full scans accepts as it accepts a predicate.
  const int64_t estimated = describe_.value("estimated_rows", int64_t{0});
  std::string sql = "SELECT * FROM " + argString(args_, "table");
  if (estimated >= kSampleScanRows) {
    const double percent = std::clamp(100.0 * 1000.0 / static_cast<double>(estimated), 0.001, 50.0);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4f", percent);
    sql += std::string(" TABLESAMPLE SYSTEM (") + buf + ")";
  }
  sql += " LIMIT " + std::to_string(n);
  runStatement(std::move(sql), n, false, false, [this](RunResult&& res) { describeGotSample(std::move(res)); });
}

void ToolCall::describeGotSample(RunResult&& r) {
  if (r.kind == RunResult::Kind::kDenied && r.plan) {
    describe_["sample"] = nullptr;
    describe_["sample_denied"] = denialJson(r.plan->decision.deny);
  } else if (r.kind != RunResult::Kind::kOk) {
    describe_["sample"] = nullptr;
    describe_["sample_error"] = {{"sqlstate", r.sqlstate}, {"message", r.message}};
  } else {
    const ResultSet* s = nullptr;
    for (const auto& set : r.sets) {
      if (!set.columns.empty()) s = &set;
    }
    describe_["sample"] = s ? resultSetJson(*s) : Json(nullptr);
  }
  finish(std::move(describe_), false, "ok", "The table:");
}

}  // namespace pgwarden::mcp
