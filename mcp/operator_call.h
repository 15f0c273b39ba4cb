// One call of an operator-defined tool: the arguments checked against the tool's JSON Schema and
// range caps, bound as the values of its prepared statement, run through the StatementRunner
// (the same gate, plan check, pool, row cap and recorder as every statement), and the rows
// shaped as the tool declares. A refused call is recorded as a denial like any other.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "mcp/operator_tools.h"
#include "mcp/statement_runner.h"
#include "mcp/tool_calls.h"

namespace pgwarden::mcp {

// What the first successful call learnt about a tool's result columns (its outputSchema).
using ColumnsSeen = std::function<void(const std::string& tool, const std::vector<ResultColumn>& columns)>;

class OperatorToolCall final : public RunningCall {
 public:
  OperatorToolCall(McpHost& host, CallContext ctx, std::shared_ptr<const OperatorTool> tool, Json args,
                   Done done, ColumnsSeen seen = {});
  ~OperatorToolCall() override;
  OperatorToolCall(const OperatorToolCall&) = delete;
  OperatorToolCall& operator=(const OperatorToolCall&) = delete;

  void start() override;
  void cancel() override;
  bool finished() const override { return finished_; }

 private:
  void onResult(RunResult&& r);
  void finish(Json structured, bool is_error, const char* outcome, std::string_view heading);

  McpHost& host_;
  CallContext ctx_;
  std::shared_ptr<const OperatorTool> tool_;
  Json args_;
  Done done_;
  ColumnsSeen seen_;
  std::optional<Json> refusal_;  // the structured answer to arguments refused before running
  std::unique_ptr<StatementRunner> runner_;
  bool finished_ = false;
};

// The generic outputSchema of a tool whose columns are not known yet, or the one its columns give.
Json operatorOutputSchema(const OperatorTool& tool, const std::vector<ResultColumn>* columns);
// tools/list's entry for an operator tool.
Json operatorToolJson(const OperatorTool& tool, const std::vector<ResultColumn>* columns);

}  // namespace pgwarden::mcp
