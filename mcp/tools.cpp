#include "mcp/tools.h"

#include <array>

#include "mcp/search_tool.h"

namespace pgwarden::mcp {

namespace {

struct Def {
  Tool tool;
  const char* name;
};
constexpr std::array<Def, 11> kTools = {{{Tool::kQuery, "query"},
                                         {Tool::kExplain, "explain"},
                                         {Tool::kPolicy, "policy"},
                                         {Tool::kListSchemas, "list_schemas"},
                                         {Tool::kListTables, "list_tables"},
                                         {Tool::kDescribeTable, "describe_table"},
                                         {Tool::kSearch, "search"},
                                         {Tool::kBegin, "begin"},
                                         {Tool::kExecute, "execute"},
                                         {Tool::kCommit, "commit"},
                                         {Tool::kRollback, "rollback"}}};

constexpr int64_t kMaxSampleRows = 20;
constexpr size_t kMaxSqlBytes = 1u << 20;
constexpr size_t kMaxNameBytes = 256;

Json object(Json properties, Json required = Json::array()) {
  return Json{{"type", "object"},
              {"properties", std::move(properties)},
              {"required", std::move(required)},
              {"additionalProperties", false}};
}

Json conversationProperty() {
  return {{"type", "string"},
          {"maxLength", 256},
          {"description", "run under this conversation (budgets, history); default: the MCP session"}};
}

Json denialSchema() {
  return {{"type", "object"},
          {"description", "present when pgwarden refused the statement (isError is then true)"},
          {"properties",
           {{"code", {{"type", "string"}}},
            {"sqlstate", {{"type", "string"}}},
            {"message", {{"type", "string"}}},
            {"detail", {{"description", "the facts of the denial"}}},
            {"hint", {{"type", {"string", "null"}}}},
            {"next_step", {{"type", {"string", "null"}}}}}}};
}

Json outputObject(Json properties) {
  properties["denial"] = denialSchema();
  properties["error"] = {{"type", "object"}, {"description", "the database's error, when it failed"}};
  return Json{{"type", "object"}, {"properties", std::move(properties)}};
}

Json resultSetSchema() {
  return {{"type", "object"},
          {"properties",
           {{"columns", {{"type", "array"}}},
            {"rows", {{"type", "array"}}},
            {"row_count", {{"type", "integer"}}},
            {"truncated", {{"type", "boolean"}}},
            {"max_rows", {{"type", "integer"}}}}}};
}

Json tool(const char* name, const char* title, std::string description, Json input, Json output) {
  return Json{{"name", name},
              {"title", title},
              {"description", std::move(description)},
              {"inputSchema", std::move(input)},
              {"outputSchema", std::move(output)},
              {"annotations",
               {{"title", title}, {"readOnlyHint", true}, {"destructiveHint", false},
                {"idempotentHint", true}, {"openWorldHint", false}}}};
}

// A transaction tool: it changes data (execute may destroy it), and calling it twice is not the
// same as once.
Json writeTool(const char* name, const char* title, std::string description, Json input,
               bool destructive) {
  Json out = {
      {"type", "object"},
      {"properties",
       {{"state", {{"type", "string"}, {"description", "none, open, failed or rolled_back"}}},
        {"next_moves", {{"type", "array"}, {"items", {{"type", "string"}}}}},
        {"transaction", {{"type", {"object", "null"}}, {"description", "what changed so far"}}},
        {"notice", {{"type", {"object", "null"}}}}}}};
  Json t = tool(name, title, std::move(description), std::move(input), std::move(out));
  t["outputSchema"]["properties"]["denial"] = denialSchema();
  if (std::string_view(name) == "execute") {
    for (const char* k : {"columns", "rows", "command"}) {
      t["outputSchema"]["properties"][k] = Json::object();
    }
    t["outputSchema"]["properties"]["row_count"] = {{"type", "integer"}};
  }
  t["annotations"]["readOnlyHint"] = false;
  t["annotations"]["destructiveHint"] = destructive;
  t["annotations"]["idempotentHint"] = false;
  return t;
}

void addWriteTools(Json& tools, const ToolCaps& caps) {
  constexpr const char* kMoves =
      " Every result carries `state` and `next_moves`, the tools you may call next; any other "
      "order is refused with INVALID_STATE.";
  tools.push_back(writeTool(
      "begin", "Begin a write transaction",
      std::string(
          "Opens the one write transaction of this MCP session. Changes happen only inside it, "
          "and nothing is kept until commit. pgwarden rolls it back when idle or old.") +
          kMoves,
      object(Json::object()), false));
  tools.push_back(writeTool(
      "execute", "Run a statement inside the open transaction",
      "Runs one statement inside the open transaction: an INSERT, UPDATE, DELETE or MERGE, or a "
      "SELECT to inspect what changed (RETURNING previews a write's rows). Look at a table first "
      "(describe_table, or a SELECT from it); UPDATE and DELETE need a WHERE that narrows the "
      "rows; a write changing more rows than your group allows (per statement, per transaction) "
      "is undone with TOO_MANY_ROWS and the transaction stays open. Returns at most " +
          std::to_string(caps.max_rows) + " rows." + kMoves,
      object({{"sql",
               {{"type", "string"},
                {"minLength", 1},
                {"description", "one SQL statement (PostgreSQL)"}}},
              {"max_rows",
               {{"type", "integer"},
                {"minimum", 1},
                {"maximum", caps.max_rows},
                {"description", "return at most this many rows"}}}},
             {"sql"}),
      true));
  tools.push_back(writeTool(
      "commit", "Keep the transaction's changes",
      std::string("Commits the open transaction; the answer says what was kept.") + kMoves,
      object(Json::object()), false));
  tools.push_back(writeTool(
      "rollback", "Undo the transaction's changes",
      std::string("Rolls the transaction back; the answer says what was discarded.") + kMoves,
      object(Json::object()), false));
}

std::string capsText(const ToolCaps& caps) {
  std::string s = " Returns at most " + std::to_string(caps.max_rows) +
                  " rows (fewer if your policy group caps rows; `truncated` says when rows were cut).";
  if (caps.statement_timeout_ms > 0) {
    s += " Statements are cancelled after " + std::to_string(caps.statement_timeout_ms / 1000.0).substr(0, 5) + " s.";
  }
  s += " Read-only: writes, DDL and transaction control are refused.";
  return s;
}

std::optional<std::string> checkString(const Json& args, const char* key, bool required, size_t max_bytes) {
  const auto it = args.find(key);
  if (it == args.end()) {
    if (required) return std::string("missing required argument \"") + key + "\"";
    return std::nullopt;
  }
  if (!it->is_string()) return std::string("argument \"") + key + "\" must be a string";
  const auto& s = it->get_ref<const std::string&>();
  if (required && s.empty()) return std::string("argument \"") + key + "\" must not be empty";
  if (s.size() > max_bytes) return std::string("argument \"") + key + "\" is too long";
  return std::nullopt;
}

std::optional<std::string> checkInteger(const Json& args, const char* key, int64_t min, int64_t max) {
  const auto it = args.find(key);
  if (it == args.end()) return std::nullopt;
  if (!it->is_number_integer()) return std::string("argument \"") + key + "\" must be an integer";
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return std::string("argument \"") + key + "\" must be between " + std::to_string(min) + " and " +
           std::to_string(max);
  }
  return std::nullopt;
}

}  // namespace

bool isWriteTool(Tool t) {
  return t == Tool::kBegin || t == Tool::kExecute || t == Tool::kCommit || t == Tool::kRollback;
}

std::optional<Tool> toolByName(std::string_view name) {
  for (const auto& d : kTools) {
    if (name == d.name) return d.tool;
  }
  return std::nullopt;
}

std::vector<std::string> builtinToolNames() {
  std::vector<std::string> out;
  for (const auto& d : kTools) out.emplace_back(d.name);
  return out;
}

const char* toolName(Tool t) {
  for (const auto& d : kTools) {
    if (d.tool == t) return d.name;
  }
  return "?";
}

Json toolList(const ToolCaps& caps) {
  Json tools = Json::array();
  const Json sql{{"type", "string"}, {"minLength", 1}, {"description", "one SQL statement (PostgreSQL)"}};
  tools.push_back(tool(
      "query", "Run a read-only SQL query",
      "Runs one SQL statement through pgwarden's policy for your user (the same guards, budgets and "
      "history as a SQL client). A refused statement comes back with isError and a denial "
      "{code, message, detail, hint, next_step}: follow next_step and try again." + capsText(caps),
      object({{"sql", sql},
              {"max_rows", {{"type", "integer"}, {"minimum", 1}, {"maximum", caps.max_rows},
                            {"description", "return at most this many rows"}}},
              {"conversation_id", conversationProperty()}},
             {"sql"}),
      outputObject({{"columns", {{"type", "array"}}},
                    {"rows", {{"type", "array"}}},
                    {"row_count", {{"type", "integer"}}},
                    {"truncated", {{"type", "boolean"}}},
                    {"max_rows", {{"type", "integer"}}},
                    {"notices", {{"type", "array"}}},
                    {"warnings", {{"type", "array"}}},
                    {"elapsed_ms", {{"type", "number"}}},
                    {"result_sets", {{"type", "array"}, {"items", resultSetSchema()}}}})));
  tools.push_back(tool(
      "explain", "Explain a query without running it",
      "Shows PostgreSQL's plan (EXPLAIN (FORMAT JSON), never ANALYZE) of a statement your policy "
      "accepts: scan types per table, estimated rows and cost, and whether the cost gate would pass it.",
      object({{"sql", sql}, {"conversation_id", conversationProperty()}}, {"sql"}),
      outputObject({{"allowed", {{"type", "boolean"}}},
                    {"cost_gate", {{"type", "object"}}},
                    {"total_cost", {{"type", "number"}}},
                    {"estimated_rows", {{"type", "number"}}},
                    {"scans", {{"type", "array"}}},
                    {"plan", {{"description", "the plan as PostgreSQL returned it"}}}})));
  tools.push_back(tool(
      "policy", "What you may do",
      "Describes your policy before you try: your group, its guards (guarded tables and their "
      "predicate requirements, row caps, denied functions and tables, cost limits), the timeouts, "
      "and your conversation's remaining budget.",
      object({{"conversation_id", conversationProperty()}}),
      outputObject({{"user", {{"type", "string"}}},
                    {"group", {{"type", "string"}}},
                    {"guards", {{"type", "array"}}},
                    {"limits", {{"type", "object"}}},
                    {"budget", {{"type", {"object", "null"}}}}})));
  tools.push_back(tool(
      "list_schemas", "List schemas",
      "Lists the schemas holding tables your group may read, with their table counts (from "
      "pgwarden's catalog snapshot; no query runs).",
      object(Json::object()),
      outputObject({{"schemas", {{"type", "array"}}}})));
  tools.push_back(tool(
      "list_tables", "List tables",
      "Lists tables, views and materialized views your group may read (each with its kind) with "
      "estimated row counts and, for big tables, "
      "whether a WHERE condition is required and on which indexed columns (from pgwarden's "
      "catalog snapshot; no query runs). At most 500 entries.",
      object({{"schema", {{"type", "string"}, {"maxLength", 256}}},
              {"name_like",
               {{"type", "string"},
                {"maxLength", 256},
                {"description", "SQL LIKE pattern on the table name (% and _)"}}}}),
      outputObject({{"tables", {{"type", "array"}}}, {"truncated", {{"type", "boolean"}}}})));
  tools.push_back(tool(
      "describe_table", "Describe a table",
      "Describes one table or view: columns with types, nullability and comments, indexes, "
      "foreign keys (both ways), a view's definition, estimated rows, "
      "the known values of low-cardinality columns (enum labels, CHECK IN-lists, dominant "
      "values), and a small sample read under your policy (default 3 rows, at most 20).",
      object({{"table",
               {{"type", "string"},
                {"minLength", 1},
                {"maxLength", 256},
                {"description", "table name, optionally schema-qualified"}}},
              {"sample_rows", {{"type", "integer"}, {"minimum", 0}, {"maximum", kMaxSampleRows}}},
              {"conversation_id", conversationProperty()}},
             {"table"}),
      outputObject({{"table", {{"type", "string"}}},
                    {"columns", {{"type", "array"}}},
                    {"indexes", {{"type", "array"}}},
                    {"estimated_rows", {{"type", "number"}}},
                    {"sample", {{"type", {"object", "null"}}}}})));
  tools.push_back(tool(
      "search", "Search tables and columns",
      "Finds tables, views and columns whose names or comments contain a text (case-insensitive), "
      "best first: an exact name, then a name starting with it, a name containing it, a comment "
      "containing it. detail: names (default), summary (adds column types and the start of "
      "comments), full (whole comments). Only what your group may read; at most " +
          std::to_string(kSearchMaxLimit) + " matches.",
      object({{"text", {{"type", "string"}, {"minLength", 1}, {"maxLength", 256}}},
              {"schema", {{"type", "string"}, {"maxLength", 256}}},
              {"detail", {{"type", "string"}, {"enum", {"names", "summary", "full"}}}},
              {"limit", {{"type", "integer"}, {"minimum", 1}, {"maximum", kSearchMaxLimit}}}},
             {"text"}),
      outputObject({{"matches", {{"type", "array"}}}, {"truncated", {{"type", "boolean"}}}})));
  if (caps.writes) addWriteTools(tools, caps);
  return tools;
}

void addHandleArgument(Json& tools) {
  const Json handle{{"type", "string"},
                    {"maxLength", 512},
                    {"description", "the transaction_handle begin returned"}};
  for (auto& t : tools) {
    const std::string name = t.value("name", std::string());
    const auto tool = toolByName(name);
    if (!tool || *tool == Tool::kBegin) {
      if (tool) {
        t["description"] = t["description"].get<std::string>() +
                           " Returns `transaction_handle`: pass it as `transaction_handle` to "
                           "every later call of this transaction.";
        t["outputSchema"]["properties"]["transaction_handle"] = {{"type", "string"}};
      }
      continue;
    }
    if (*tool != Tool::kQuery && *tool != Tool::kExplain && *tool != Tool::kDescribeTable &&
        !isWriteTool(*tool)) {
      continue;
    }
    t["inputSchema"]["properties"]["transaction_handle"] = handle;
    if (isWriteTool(*tool)) t["inputSchema"]["required"].push_back("transaction_handle");
  }
}

std::optional<std::string> checkArguments(Tool t, const Json& args, int64_t max_rows) {
  if (!args.is_null() && !args.is_object()) return std::string("arguments must be an object");
  const Json empty = Json::object();
  const Json& a = args.is_object() ? args : empty;
  auto allowOnly = [&](std::initializer_list<const char*> keys) -> std::optional<std::string> {
    for (auto it = a.begin(); it != a.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known = known || it.key() == k;
      if (!known) return "unknown argument \"" + it.key().substr(0, 64) + "\"";
    }
    return std::nullopt;
  };
  std::optional<std::string> e;
  switch (t) {
    case Tool::kQuery:
      if ((e = allowOnly({"sql", "max_rows", "conversation_id"}))) return e;
      if ((e = checkString(a, "sql", true, kMaxSqlBytes))) return e;
      if ((e = checkInteger(a, "max_rows", 1, max_rows))) return e;
      return checkString(a, "conversation_id", false, kMaxNameBytes);
    case Tool::kExplain:
      if ((e = allowOnly({"sql", "conversation_id"}))) return e;
      if ((e = checkString(a, "sql", true, kMaxSqlBytes))) return e;
      return checkString(a, "conversation_id", false, kMaxNameBytes);
    case Tool::kPolicy:
      if ((e = allowOnly({"conversation_id"}))) return e;
      return checkString(a, "conversation_id", false, kMaxNameBytes);
    case Tool::kListSchemas:
      return allowOnly({});
    case Tool::kListTables:
      if ((e = allowOnly({"schema", "name_like"}))) return e;
      if ((e = checkString(a, "schema", false, kMaxNameBytes))) return e;
      return checkString(a, "name_like", false, kMaxNameBytes);
    case Tool::kDescribeTable:
      if ((e = allowOnly({"table", "sample_rows", "conversation_id"}))) return e;
      if ((e = checkString(a, "table", true, kMaxNameBytes))) return e;
      if ((e = checkInteger(a, "sample_rows", 0, kMaxSampleRows))) return e;
      return checkString(a, "conversation_id", false, kMaxNameBytes);
    case Tool::kSearch:
      if ((e = allowOnly({"text", "schema", "detail", "limit"}))) return e;
      if ((e = checkString(a, "text", true, kMaxNameBytes))) return e;
      if ((e = checkString(a, "schema", false, kMaxNameBytes))) return e;
      if ((e = checkString(a, "detail", false, kMaxNameBytes))) return e;
      if (!parseSearchDetail(a.value("detail", std::string()))) {
        return std::string("argument \"detail\" must be names, summary or full");
      }
      return checkInteger(a, "limit", 1, kSearchMaxLimit);
    case Tool::kExecute:
      if ((e = allowOnly({"sql", "max_rows"}))) return e;
      if ((e = checkString(a, "sql", true, kMaxSqlBytes))) return e;
      return checkInteger(a, "max_rows", 1, max_rows);
    case Tool::kBegin:
    case Tool::kCommit:
    case Tool::kRollback:
      return allowOnly({});
  }
  return std::nullopt;
}

}  // namespace pgwarden::mcp
