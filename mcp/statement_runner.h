// One SQL text of an MCP tool call on its way through the same path a wire-protocol Query takes:
// the StatementGate judges it (chain, webhooks, the cost gate's EXPLAIN, budget admission), a
// pooled server connection runs it as a simple Query, the rows come back capped, and every
// statement of the text ends in the StatementRecorder exactly once. It is the MCP front end's
// GateCaller (who is asking; EXPLAIN on its connection) and ServerLink (the server's answers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "guards/agent_context.h"
#include "mcp/mcp_host.h"
#include "pool/server_conn.h"
#include "session/statement_gate.h"
#include "session/statement_recorder.h"

namespace pgwarden::mcp {

// Who runs the text and how; the strings are copied into the runner.
struct RunSpec {
  McpIdentity who;
  std::string sql;
  std::string agent_id;
  std::string conversation_id;
  std::string query_intent;
  std::string application_name;  // history's application_name: "mcp:<tool>"
  std::string tool;               // history's tool_name
  std::string tool_args;          // history's tool_args (an operator tool's arguments, JSON)
  std::string client_addr;
  uint64_t session_id = 0;
  int64_t max_rows = 1000;          // the tool's cap (the group's own cap applies too)
  uint64_t max_result_bytes = 1u << 20;
  // explain: judge the text (no budget admission) and run EXPLAIN (FORMAT JSON) of it instead.
  bool explain_only = false;
  // Pgwarden's own catalog reads (describe_table's metadata): no gate, no history record.
  bool internal = false;
  // An operator tool's statement: `sql` holds $1..$n, run as an unnamed prepared statement
  // (Parse/Bind/Execute) with these text-format values (nullopt: NULL), never spliced into it.
  bool bind = false;
  std::vector<std::optional<std::string>> params;
  daemon::PlanCheck plan_check;  // the tool's plan_check, run on the gate's EXPLAIN
  // The call was refused before its statement could run (its arguments): recorded as a denial.
  std::optional<guards::GuardResult> refusal;
};

struct ResultColumn {
  std::string name;
  uint32_t type_oid = 0;
};

struct ResultSet {
  std::vector<ResultColumn> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::string command;  // the CommandComplete tag
  bool truncated = false;
  int64_t cap = -1;     // the row cap that applied (-1: none)
};

struct ResultNotice {
  std::string severity;
  std::string code;     // SQLSTATE, or pgwarden's code for its own warnings
  std::string message;
  std::string detail;
  std::string hint;
};

struct RunResult {
  enum class Kind : uint8_t { kOk, kDenied, kError };
  Kind kind = Kind::kOk;
  std::shared_ptr<const daemon::StatementPlan> plan;  // the gate's plan (denial: its verdict)
  // kError: the server's (or pgwarden's) error.
  std::string sqlstate;
  std::string message;
  std::string detail;
  std::string hint;
  std::vector<ResultSet> sets;
  std::vector<ResultNotice> notices;
  std::string explain_json;  // explain_only, or the cost gate's EXPLAIN when it ran
  int64_t elapsed_us = 0;
  bool cancelled = false;
};

class StatementRunner final : public daemon::GateCaller,
                              public daemon::ServerLink,
                              public daemon::ServerWaiter {
 public:
  using Done = std::function<void(RunResult&&)>;
  StatementRunner(McpHost& host, RunSpec spec, Done done);
  ~StatementRunner() override;
  StatementRunner(const StatementRunner&) = delete;
  StatementRunner& operator=(const StatementRunner&) = delete;

  // Starts; `done` runs exactly once, on a later loop turn or from inside start() for an answer
  // known at once (a denial). The owner frees the runner only after `done`, outside it.
  void start();
  // The caller no longer wants the answer (notifications/cancelled, the session or its HTTP
  // client went away): the server query is cancelled; bookkeeping still ends cleanly and `done`
  // still runs (with cancelled set).
  void cancel();
  bool finished() const { return done_called_; }

  // GateCaller
  guards::RequestContext requestContext(bool extended, const guards::AgentOverrides& ov) const override;
  const guards::PolicyGroup* policyGroup() const override { return spec_.who.policy; }
  bool runExplain(const std::string& sql, bool extended, const daemon::ExplainArgs& args) override;
  // ServerLink
  void onServerMessage(daemon::ServerConnection& s, const protocol::Frame& frame) override;
  void onServerChunk(daemon::ServerConnection& s, char type, std::string_view bytes, bool first,
                     bool last) override;
  void onServerReadDone(daemon::ServerConnection&) override {}
  void onServerWritten(daemon::ServerConnection&) override {}
  void onServerLost(daemon::ServerConnection& s, const std::string& why) override;
  // ServerWaiter
  void onServerReady(daemon::ServerConnection& c) override;
  void onServerFailed(const std::string& sqlstate, const std::string& message) override;

 private:
  enum class Step : uint8_t { kStats, kJudging, kAcquiring, kExplaining, kRunning, kDone };
  void judge();
  static void onStatsTimer(uv_timer_t* t);
  void stopStatsTimer();
  void onVerdict(daemon::GateVerdict v);
  void act(daemon::GateVerdict v);
  void acquire();
  void sendWork();
  // Parse/Bind/Describe/Execute/Sync of `sql` with the spec's bind values.
  void writeBound(const std::string& sql, bool describe);
  void handleMessage(const protocol::Frame& f);
  void onRowDescription(const protocol::Frame& f);
  void onDataRow(const protocol::Frame& f);
  void screenResult(daemon::StatementRun& run);
  void onCommandComplete(const protocol::Frame& f);
  void onError(const protocol::Frame& f);
  void onReady();
  void finishRun(daemon::StatementRun& run, history::Outcome outcome, std::string_view sqlstate = {},
                 std::string_view message = {});
  // Ends every statement of the text not recorded yet with `outcome`.
  void finishRest(history::Outcome outcome, std::string_view sqlstate, std::string_view message);
  void releaseServer(int rfq_owed);
  void fail(std::string sqlstate, std::string message);
  void complete();

  McpHost& host_;
  RunSpec spec_;
  uv_timer_t* stats_timer_ = nullptr;  // polls while the first statistics load runs
  uint64_t stats_deadline_ms_ = 0;
  Done done_;
  std::unique_ptr<daemon::StatementGate> gate_;
  Step step_ = Step::kJudging;
  daemon::ServerConnection* server_ = nullptr;
  daemon::Pool* waiting_pool_ = nullptr;
  std::shared_ptr<const daemon::StatementPlan> plan_;
  std::shared_ptr<const guards::BudgetKey> budget_key_;
  guards::AgentOverrides overrides_;
  std::string explain_sql_;  // the cost gate's EXPLAIN, waiting for a connection
  bool explain_bound_ = false;  // ... run with the statement's bind values
  std::string work_sql_;     // the text the server runs
  std::shared_ptr<daemon::StatementRun> run_;
  size_t next_statement_ = 0;
  bool explain_reply_ = false;  // the server's answers belong to the cost gate's EXPLAIN
  std::string explain_error_;
  uint64_t result_bytes_ = 0;
  int64_t started_us_ = 0;
  bool cancelled_ = false;
  bool done_called_ = false;
  bool huge_row_ = false;  // a row streamed in pieces: dropped, the result marked truncated
  RunResult result_;
};

}  // namespace pgwarden::mcp
