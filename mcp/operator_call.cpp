#include "mcp/operator_call.h"

#include "guards/codes.h"
#include "mcp/result_json.h"

namespace pgwarden::mcp {

namespace {

// History keeps the arguments; a call's body is capped already, this keeps one record small.
constexpr size_t kMaxRecordedArgs = 16 * 1024;

// The JSON type a column's cells take in structuredContent (result_json.h's cellJson).
Json columnSchema(uint32_t oid) {
  switch (oid) {
    case 16: return {{"type", {"boolean", "null"}}};
    case 21:
    case 23:
    case 26: return {{"type", {"integer", "null"}}};
    case 20: return {{"type", {"integer", "string", "null"}}};  // beyond 2^53: text
    case 700:
    case 701: return {{"type", {"number", "string", "null"}}};  // NaN, Infinity: text
    case 114:
    case 3802: return Json::object();                           // any JSON document
    default: return {{"type", {"string", "null"}}};
  }
}

Json rowObject(const ResultSet& set, const std::vector<std::optional<std::string>>& row) {
  Json o = Json::object();
  for (size_t i = 0; i < set.columns.size() && i < row.size(); ++i) {
    o[set.columns[i].name] = cellJson(set.columns[i].type_oid, row[i]);
  }
  return o;
}

Json warningsOf(const RunResult& r) {
  Json out = Json::array();
  for (const auto& n : noticesJson(r)) {
    if (n["severity"] == "WARNING") out.push_back(n);
  }
  return out;
}

}  // namespace

Json operatorOutputSchema(const OperatorTool& tool, const std::vector<ResultColumn>* columns) {
  Json row{{"type", "object"}};
  if (columns) {
    Json props = Json::object();
    for (const auto& c : *columns) props[c.name] = columnSchema(c.type_oid);
    row["properties"] = std::move(props);
  }
  Json props{{"warnings", {{"type", "array"}, {"description", "read these before you believe the answer"}}},
             {"denial", {{"type", "object"}, {"description", "present when the call was refused"}}},
             {"error", {{"type", "object"}, {"description", "the database's error, when it failed"}}}};
  switch (tool.result) {
    case ToolResultShape::kRows:
      props["rows"] = {{"type", "array"}, {"items", row}};
      props["row_count"] = {{"type", "integer"}};
      props["truncated"] = {{"type", "boolean"}, {"description", "more rows exist than max_rows: narrow the call"}};
      props["max_rows"] = {{"type", "integer"}};
      props["window"] = {{"type", "object"}, {"description", "the range the rows cover"}};
      break;
    case ToolResultShape::kScalar:
      props["value"] = columns && !columns->empty() ? columnSchema(columns->front().type_oid) : Json::object();
      break;
    case ToolResultShape::kSingleRow:
      props["row"] = {{"anyOf", {row, {{"type", "null"}}}}};
      break;
  }
  return {{"type", "object"}, {"properties", std::move(props)}};
}

Json operatorToolJson(const OperatorTool& tool, const std::vector<ResultColumn>* columns) {
  const std::string title = tool.title.empty() ? tool.name : tool.title;
  return Json{{"name", tool.name},
              {"title", title},
              {"description", tool.description},
              {"inputSchema", tool.parameters.source()},
              {"outputSchema", operatorOutputSchema(tool, columns)},
              {"annotations",
               {{"title", title}, {"readOnlyHint", true}, {"destructiveHint", false},
                {"idempotentHint", true}, {"openWorldHint", false}}}};
}

OperatorToolCall::OperatorToolCall(McpHost& host, CallContext ctx, std::shared_ptr<const OperatorTool> tool,
                                   Json args, Done done, ColumnsSeen seen)
    : host_(host),
      ctx_(std::move(ctx)),
      tool_(std::move(tool)),
      args_(args.is_null() ? Json::object() : std::move(args)),
      done_(std::move(done)),
      seen_(std::move(seen)) {}

OperatorToolCall::~OperatorToolCall() = default;

void OperatorToolCall::start() {
  RunSpec spec;
  spec.who = ctx_.who;
  spec.sql = tool_->bound_sql;
  spec.agent_id = ctx_.agent_id;
  spec.conversation_id = ctx_.conversation_id;
  spec.application_name = "mcp:" + tool_->name;
  spec.tool = tool_->name;
  spec.client_addr = ctx_.client_addr;
  spec.session_id = ctx_.session_id;
  spec.max_rows = tool_->max_rows;
  spec.max_result_bytes = ctx_.max_result_bytes;
  spec.bind = true;

  const auto violations = tool_->parameters.validate(args_);
  if (!violations.empty()) {
    Json list = Json::array();
    for (const auto& v : violations) {
      Json j{{"argument", v.path.empty() ? std::string() : v.path.substr(1)}, {"rule", v.keyword},
             {"message", v.message}};
      if (!v.expected.is_null()) j["expected"] = v.expected;
      list.push_back(std::move(j));
    }
    const std::string next = "call " + tool_->name + " again with arguments that match its inputSchema";
    std::string message = "tool " + tool_->name + ": " + violations.front().message;
    if (violations.size() > 1) message += " (and " + std::to_string(violations.size() - 1) + " more)";
    refusal_ = Json{{"code", guards::codes::kInvalidArguments}, {"message", message}, {"violations", list},
                    {"next_step", next}};
    guards::GuardResult g;
    g.action = guards::Action::kDeny;
    g.code = std::string(guards::codes::kInvalidArguments);
    g.message = std::move(message);
    g.facts.add("tool", tool_->name).add("next_step", next);
    spec.refusal = std::move(g);
  } else {
    args_ = tool_->parameters.withDefaults(args_);
    if (auto r = checkRangeCaps(*tool_, args_)) {
      guards::GuardResult g;
      g.action = guards::Action::kDeny;
      g.code = (*r)["code"].get<std::string>();
      g.message = "tool " + tool_->name + ": " + (*r)["message"].get<std::string>();
      g.facts.add("tool", tool_->name);
      if (r->contains("max_days")) g.facts.add("max_days", (*r)["max_days"].get<int64_t>());
      if (r->contains("got_days")) g.facts.add("got_days", (*r)["got_days"].get<int64_t>());
      g.facts.add("next_step", (*r)["next_step"].get<std::string>());
      (*r)["message"] = g.message;
      refusal_ = std::move(*r);
      spec.refusal = std::move(g);
    }
  }
  spec.tool_args = args_.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (spec.tool_args.size() > kMaxRecordedArgs) spec.tool_args = R"({"pgwarden":"arguments too long to record"})";
  if (!spec.refusal) {
    for (const auto& name : tool_->param_names) {
      const auto it = args_.find(name);
      spec.params.push_back(it == args_.end() ? std::nullopt : bindValue(*it));
    }
    if (!tool_->deny_seq_scan_on.empty()) {
      const std::shared_ptr<const OperatorTool> tool = tool_;
      McpHost* host = &host_;
      const std::string db = ctx_.who.server_database;
      spec.plan_check = [tool, host, db](const analysis::PlanSummary& plan) {
        const auto stats = host->tableStats(db);
        return checkToolPlan(*tool, plan, stats.get());
      };
    }
  }
  runner_ = std::make_unique<StatementRunner>(host_, std::move(spec), [this](RunResult&& r) { onResult(std::move(r)); });
  runner_->start();
}

void OperatorToolCall::cancel() {
  if (finished_) return;
  if (runner_) runner_->cancel();
}

void OperatorToolCall::onResult(RunResult&& r) {
  if (r.kind == RunResult::Kind::kDenied) {
    Json d;
    if (refusal_) {
      d = std::move(*refusal_);
    } else if (r.plan) {
      d = denialJson(r.plan->decision.deny);
    }
    finish(Json{{"denial", std::move(d)}}, true, "denied", "pgwarden refused the call:");
    return;
  }
  if (r.screen_denial) {
    // A result screen set to deny (ASSERTION_FAILED of the tool's own rows assertion): the
    // rows are not the caller's.
    finish(Json{{"denial", denialJson(*r.screen_denial)}}, true, "denied",
           "pgwarden refused the result:");
    return;
  }
  if (r.kind == RunResult::Kind::kError || r.cancelled) {
    Json e = runErrorJson(r, "the tool's statement failed on the server; report it to the operator "
                             "if different arguments fail the same way");
    finish(Json{{"error", std::move(e)}}, true, runCancelled(r) ? "cancelled" : "error", "The call failed:");
    return;
  }
  const ResultSet* set = nullptr;
  for (const auto& s : r.sets) {
    if (!s.columns.empty()) set = &s;
  }
  if (set && seen_) seen_(tool_->name, set->columns);
  Json out = Json::object();
  std::string heading;
  switch (tool_->result) {
    case ToolResultShape::kRows: {
      Json rows = Json::array();
      if (set) {
        for (const auto& row : set->rows) rows.push_back(rowObject(*set, row));
      }
      const bool truncated = set && set->truncated;
      out["row_count"] = rows.size();
      out["rows"] = std::move(rows);
      out["truncated"] = truncated;
      // The cap that applied: the tool's, or the group's when that is smaller.
      out["max_rows"] = set && set->cap >= 0 ? set->cap : tool_->max_rows;
      if (!tool_->range_caps.empty()) {
        Json window = Json::object();
        for (const auto& c : tool_->range_caps) {
          window[c.from] = args_.value(c.from, Json());
          window[c.to] = args_.value(c.to, Json());
        }
        out["window"] = std::move(window);
      }
      heading = "The call returned " + std::to_string(out["row_count"].get<size_t>()) + " row(s)";
      if (truncated) {
        heading += " (truncated at max_rows " + out["max_rows"].dump() +
                   ": more rows exist; call again with a narrower range)";
      }
      heading += ":";
      break;
    }
    case ToolResultShape::kScalar:
      out["value"] = set && !set->rows.empty() && !set->rows[0].empty()
                         ? cellJson(set->columns[0].type_oid, set->rows[0][0])
                         : Json(nullptr);
      heading = "The call returned:";
      break;
    case ToolResultShape::kSingleRow:
      out["row"] = set && !set->rows.empty() ? rowObject(*set, set->rows[0]) : Json(nullptr);
      heading = set && !set->rows.empty() ? "The call returned one row:" : "The call found no row:";
      break;
  }
  out["warnings"] = warningsOf(r);
  finish(std::move(out), false, "ok", heading);
}

void OperatorToolCall::finish(Json structured, bool is_error, const char* outcome, std::string_view heading) {
  if (finished_) return;
  finished_ = true;
  addCallFacts(structured, ctx_);
  Json result = toolResult(std::move(structured), is_error, heading);
  Done done = std::move(done_);
  if (done) done(std::move(result), outcome);
}

}  // namespace pgwarden::mcp
