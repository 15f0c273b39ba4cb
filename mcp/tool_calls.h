// One tools/call: the arguments already checked against the tool's schema, the work (a statement
// through the StatementRunner, or an answer from the catalog snapshot and the policy group), and
// the MCP tool result {content, structuredContent, isError} it ends with.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "mcp/jsonrpc.h"
#include "config/mcp_section.h"
#include "mcp/mcp_host.h"
#include "mcp/statement_runner.h"
#include "mcp/tools.h"

namespace pgwarden::mcp {

class WriteConversation;

// Who calls, for the statements a tool runs.
struct CallContext {
  McpIdentity who;
  std::string agent_id;
  std::string conversation_id;  // the MCP session's, unless the call names another
  std::string client_addr;
  uint64_t session_id = 0;      // history's session id of the MCP session
  int64_t max_rows = 1000;
  uint64_t max_result_bytes = 1u << 20;
  // A guarded_writes group's MCP session: its transaction (mcp/write_tools.h); null otherwise.
  std::shared_ptr<WriteConversation> writes;
  // The request (history's request_id and traceparent), and the record_uid of each history record
  // the call's statements made, filled as they are recorded (the result's history_ids).
  std::string request_id;
  std::string traceparent;
  std::shared_ptr<std::vector<std::string>> history_ids =
      std::make_shared<std::vector<std::string>>();
  // A sessionless caller's write transaction (mcp/txn_handle.h): its handle, named in each result.
  std::string transaction_handle;
};

// `structured` (a tool result's object) with what the call's caller links it by: history_ids
// (the records its statements made) and its transaction_handle.
void addCallFacts(Json& structured, const CallContext& ctx);

// The RunSpec of a statement the tool `tool` runs for `ctx` (history's mcp:<tool>).
RunSpec runSpec(const CallContext& ctx, std::string_view tool, std::string sql, int64_t max_rows);

// A tools/call in flight, built-in or operator-defined, as the server holds it.
class RunningCall {
 public:
  // `result` is the tools/call result object; `outcome` a short word for logs and metrics
  // ("ok", "denied", "error", "cancelled").
  using Done = std::function<void(Json result, const char* outcome)>;
  virtual ~RunningCall() = default;
  // `done` runs exactly once: inside start() for the tools that answer from memory, later for
  // those that run statements. Free the call only after it, outside it.
  virtual void start() = 0;
  virtual void cancel() = 0;
  virtual bool finished() const = 0;
};

class ToolCall final : public RunningCall {
 public:
  ToolCall(McpHost& host, CallContext ctx, Tool tool, Json args, Done done);
  ~ToolCall() override;
  ToolCall(const ToolCall&) = delete;
  ToolCall& operator=(const ToolCall&) = delete;

  void start() override;
  void cancel() override;
  bool finished() const override { return finished_; }
  Tool tool() const { return tool_; }

 private:
  void runStatement(std::string sql, int64_t max_rows, bool explain_only, bool internal,
                    StatementRunner::Done done);
  void finishQuery(RunResult&& r);
  void finishExplain(RunResult&& r);
  void answerPolicy();
  void answerListSchemas();
  void answerListTables();
  void startDescribe();
  void startSearch();
  void describeGotCatalog(RunResult&& r);
  void describeGotSample(RunResult&& r);
  void finish(Json structured, bool is_error, const char* outcome, std::string_view heading);
  // isError results for a refusal or a failure, shared by every tool that runs SQL.
  bool finishedByFailure(const RunResult& r);

  McpHost& host_;
  CallContext ctx_;
  Tool tool_;
  Json args_;
  Done done_;
  std::unique_ptr<StatementRunner> runner_;
  std::vector<std::unique_ptr<StatementRunner>> spent_;  // ended runners, freed with the call
  Json describe_;  // describe_table: what the catalog said, before the sample
  bool finished_ = false;
  bool cancelled_ = false;
  bool txn_claimed_ = false;  // its statements run in the session's open write transaction
};

}  // namespace pgwarden::mcp
