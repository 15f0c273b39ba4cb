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
#include "guards/masking.h"
#include "mcp/mcp_host.h"
#include "pool/server_conn.h"
#include "session/screen_probe.h"
#include "session/statement_execution.h"
#include "session/statement_gate.h"
#include "session/statement_recorder.h"

namespace pgwarden::mcp {

// A guarded-writes transaction an MCP session holds open (mcp/write_tools.h): its statements are
// judged by its WriteTransaction and run on the one connection it holds for the transaction's life.
class TxnLink {
 public:
  virtual session::WriteTransaction& transaction() = 0;
  // Lends the held connection to `to` (attached to it); null when there is none.
  virtual pool::ServerConnection* lend(pool::ServerLink& to) = 0;
  // The runner is done with it: `c` null when it was lost; `rfq_owed` ReadyForQuery messages
  // are still due for work sent on it (only when the runner is destroyed mid-statement).
  virtual void takeBack(pool::ServerConnection* c, int rfq_owed) = 0;
  // A wrapped write's CommandComplete went over a row cap: the denial it is answered with (the
  // write is undone), counted.
  virtual guards::Verdict undone(guards::GuardResult over) = 0;
  // A wrapped write's rows were kept, counted.
  virtual void written(int64_t rows) = 0;

 protected:
  ~TxnLink() = default;
};

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
  std::string request_id;         // history's request_id and traceparent
  std::string traceparent;
  // Where the records' record_uids go (the tool result's history_ids); may be null.
  std::shared_ptr<std::vector<std::string>> history_ids;
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
  session::PlanCheck plan_check;  // the tool's plan_check, run on the gate's EXPLAIN
  // The call was refused before its statement could run (its arguments): recorded as a denial.
  std::optional<guards::GuardResult> refusal;
  // A statement of this guarded-writes transaction (not owned): no pool, its state machine
  // judges, and a write runs between pgwarden's SAVEPOINT and its RELEASE (or ROLLBACK TO).
  TxnLink* txn = nullptr;
  // A read tool's statement (query, explain, describe_table) on that transaction's connection,
  // so it sees the transaction's own changes: judged as such a read is outside the transaction
  // (the write mode's read checks), never run as a write.
  bool read_only = false;
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
  std::shared_ptr<const session::StatementPlan> plan;  // the gate's plan (denial: its verdict)
  // kError: the server's (or pgwarden's) error.
  std::string sqlstate;
  std::string message;
  std::string detail;
  std::string hint;
  std::vector<ResultSet> sets;
  std::vector<ResultNotice> notices;
  std::string explain_json;  // explain_only, or the cost gate's EXPLAIN when it ran
  // A transaction's statement (RunSpec::txn): the server's transaction status at its end ('\0':
  // it did not run), the write's TOO_MANY_ROWS when it was undone, the last command tag's word.
  char txn_status = '\0';
  std::optional<guards::Verdict> undone;
  // A result screen set to deny found the result unfit (the rows are dropped; as on the wire).
  std::optional<guards::Verdict> screen_denial;
  std::string last_tag;
  int64_t elapsed_us = 0;
  bool cancelled = false;
  // Provenance (docs/provenance.md): the text sent to the server after pgwarden's rewrites, and
  // how old the catalog statistics the guards and screens read were (-1: none yet).
  std::string executed_sql;
  bool rewritten = false;  // executed_sql differs from the text the caller sent
  int64_t stats_age_s = -1;
};

class StatementRunner final : public session::GateCaller,
                              public pool::ServerLink,
                              public pool::ServerWaiter,
                              public session::RunSink {
 public:
  using Done = std::function<void(RunResult&&)>;
  StatementRunner(McpHost& host, RunSpec spec, Done done);
  ~StatementRunner() override;
  StatementRunner(const StatementRunner&) = delete;
  StatementRunner& operator=(const StatementRunner&) = delete;

  // Starts; `done` runs exactly once, on a later loop turn, never inside start() (an answer known
  // at once, a denial, comes on the next turn). The owner frees the runner only after `done`,
  // outside it.
  void start();
  // The caller no longer wants the answer (notifications/cancelled, the session or its HTTP
  // client went away): the server query is cancelled; bookkeeping still ends cleanly and `done`
  // still runs (with cancelled set), as after start(), never inside this call.
  void cancel();
  bool finished() const { return done_called_; }

  // GateCaller
  guards::RequestContext requestContext(bool extended, const guards::AgentOverrides& ov) const override;
  const guards::PolicyGroup* policyGroup() const override { return spec_.who.policy; }
  bool runExplain(const std::string& sql, bool extended, const session::ExplainArgs& args) override;
  bool runParseCheck(const std::string& sql, bool extended,
                     const std::vector<uint32_t>& param_types) override;
  const session::WriteTransaction* writeTransaction() const override {
    return spec_.txn && !spec_.read_only ? &spec_.txn->transaction() : nullptr;
  }
  // ServerLink
  void onServerMessage(pool::ServerConnection& s, const protocol::Frame& frame) override;
  void onServerChunk(pool::ServerConnection& s, char type, std::string_view bytes, bool first,
                     bool last) override;
  void onServerReadDone(pool::ServerConnection&) override {}
  void onServerWritten(pool::ServerConnection&) override {}
  void onServerLost(pool::ServerConnection& s, const std::string& why) override;
  // ServerWaiter
  void onServerReady(pool::ServerConnection& c) override;
  void onServerFailed(const std::string& sqlstate, const std::string& message) override;
  void onWaitMoved(pool::Pool& to) override { waiting_pool_ = &to; }

 private:
  enum class Step : uint8_t { kStats, kJudging, kAcquiring, kExplaining, kRunning, kDone };
  void startWork();
  void cancelStep();
  void judge();
  static void onStatsTimer(uv_timer_t* t);
  static void closeTimer(uv_timer_t*& t);
  void stopStatsTimer();
  static void onAnswerTimer(uv_timer_t* t);
  void deliver();
  void onVerdict(session::GateVerdict v);
  void act(session::GateVerdict v);
  void acquire();
  void sendWork();
  // Parse/Bind/Describe/Execute/Sync of `sql` with the spec's bind values.
  void writeBound(const std::string& sql, bool describe);
  void handleMessage(const protocol::Frame& f);
  void onRowDescription(const protocol::Frame& f);
  void onDataRow(const protocol::Frame& f);
  void screenResult(session::StatementRun& run);
  void onCommandComplete(const protocol::Frame& f);
  // Holds the server's CommandComplete while the screens' probe runs (statement_execution.h).
  bool holdForProbe();
  // A transaction's CommandComplete through its state machine; false: the write went over a
  // cap and is answered with TOO_MANY_ROWS instead.
  bool txnCommandComplete(std::string_view tag);
  // The counters after a write are in: the write is kept or answered with TOO_MANY_ROWS, and
  // its savepoint settled.
  void txnCounted(char status);
  void sendSettle();
  void onError(const protocol::Frame& f);
  void onReady(const protocol::Frame& f);
  // pgwarden's own statement around a transaction's write (SAVEPOINT, RELEASE, ROLLBACK TO): its
  // answers are not the caller's; at its ReadyForQuery the run goes on.
  // kParamSync: the carried settings of a pooled connection brought back to its login values
  // (a transaction-pooled client may have left its own DateStyle there).
  // kCount: the transaction's per-table counters after a write (WriteTransaction::onCounted).
  enum class TxnStep : uint8_t { kNone, kParamSync, kSavepoint, kCount, kSettle };
  void sendTxnStep(TxnStep step, const std::string& sql);
  // Cancelled before the work was sent: the connection goes back and the call ends with 57014.
  void abandonCancelled();
  void onTxnStepDone(char status);
  // RunSink: the recorder, with this call's context.
  void finishRun(session::StatementRun& run, history::Outcome outcome, std::string_view sqlstate,
                 std::string_view message) override;
  // Ends every statement of the text not recorded yet with `outcome`.
  void finishRest(history::Outcome outcome, std::string_view sqlstate, std::string_view message);
  void releaseServer(int rfq_owed);
  void fail(std::string sqlstate, std::string message);
  void complete();

  McpHost& host_;
  RunSpec spec_;
  uv_timer_t* stats_timer_ = nullptr;  // polls while the first statistics load runs
  uv_timer_t* answer_timer_ = nullptr;  // an answer reached inside a call, delivered next turn
  bool in_call_ = false;                // inside start() or cancel()
  session::StatsWait stats_wait_;
  Done done_;
  std::unique_ptr<session::StatementGate> gate_;
  std::unique_ptr<session::ScreenProbe> probe_;  // the result screens' probe, made on first use
  Step step_ = Step::kJudging;
  pool::ServerConnection* server_ = nullptr;
  pool::Pool* waiting_pool_ = nullptr;
  std::string explain_sql_;  // the cost gate's EXPLAIN, waiting for a connection
  bool explain_bound_ = false;  // ... run with the statement's bind values
  std::string work_sql_;     // the text the server runs
  session::TextExecution exec_{*this};  // the text's statements as the server answers them
  bool explain_reply_ = false;  // the server's answers belong to the cost gate's EXPLAIN
  bool parse_check_ = false;    // ... or to the gate's parse check (explain_sql_ is its text)
  std::string explain_error_;
  uint64_t result_bytes_ = 0;
  guards::RowMask row_mask_;  // the masked columns of the current result set
  int64_t started_us_ = 0;
  bool cancelled_ = false;
  bool counted_running_ = false;  // past the console's hold: counted in statementRunning
  bool done_called_ = false;
  bool huge_row_ = false;  // a row streamed in pieces: dropped, the result marked truncated
  session::GateVerdict::Write write_;  // a transaction's write, to run under the savepoint
  TxnStep txn_step_ = TxnStep::kNone;
  bool savepoint_set_ = false;
  // A write within its caps by its tag, recorded once its count is in (txnCounted).
  std::shared_ptr<session::StatementRun> counting_run_;
  bool counting_ = false;
  RunResult result_;
};

}  // namespace pgwarden::mcp
