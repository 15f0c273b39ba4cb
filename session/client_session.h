// One client connection, from the first byte to the close callback: startup packet, password
// exchange, attaching a pooled server connection, then proxying every message both ways while
// tracking what the server still owes (so pgwarden's own answers, row caps and history records
// land at the right place in the stream). Every state change goes through setState().
#pragma once

#include <array>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "budgets/budget.h"
#include "common/ring_queue.h"
#include "config/config.h"
#include "guards/agent_context.h"
#include "history/record.h"
#include "net/stream.h"
#include "pool/pool.h"
#include "pool/server_conn.h"
#include "pool/server_statements.h"
#include "protocol/auth.h"
#include "protocol/messages.h"
#include "session/caller.h"
#include "session/client_auth.h"
#include "session/client_link.h"
#include "session/login.h"
#include "session/paused_message.h"
#include "session/pooled_server.h"
#include "session/prepared_registry.h"
#include "session/reply_queue.h"
#include "session/session_host.h"
#include "session/client_state.h"
#include "session/screen_probe.h"
#include "session/skipped_batch.h"
#include "session/startup_params.h"
#include "session/statement_execution.h"
#include "session/statement_gate.h"
#include "session/statement_policy.h"
#include "session/statement_recorder.h"
#include "session/write_hold.h"
#include "session/write_txn.h"
#include "guards/masking.h"

namespace pgwarden::daemon {
class AdminConsole;
}  // namespace pgwarden::daemon

namespace pgwarden::session {

// One line: the size check reads a class head from the line of its brace.
// clang-format off
class ClientSession final : public net::StreamEvents, public pool::ServerLink, public pool::ServerWaiter, public GateCaller, public RunSink {
  // clang-format on
 public:
  ClientSession(SessionHost& host, uint64_t id, bool via_unix);
  ~ClientSession();
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  // Accepts from `listener` and starts reading. Returns a libuv error if the accept failed.
  [[nodiscard]] int accept(uv_stream_t* listener);
  // The same for a socket another loop accepted and handed over (the session owns `fd`).
  [[nodiscard]] int adopt(int fd);

  uint64_t id() const { return id_; }
  ClientState state() const { return state_; }
  const std::string& user() const { return caller_.user; }
  const std::string& database() const { return caller_.database; }
  const std::string& peer() const { return client_.peer(); }
  const std::string& peerHost() const { return client_.peerHost(); }
  bool viaUnix() const { return client_.viaUnix(); }
  const std::string& agentId() const { return caller_.agentId(); }
  const std::string& conversationId() const { return caller_.conversationId(); }
  const std::string& applicationName() const { return caller_.application_name; }
  const std::string& group() const { return caller_.group; }
  uint64_t connectedAtMs() const { return client_.connectedAtMs(); }
  uint64_t statementsRun() const { return statement_count_; }
  bool busy() const { return !replies_.empty(); }
  // "transaction" or "session" (pool_mode), and the server connection it holds now (0: none).
  const char* poolModeName() const {
    return server_.transactionPooled() ? "transaction" : "session";
  }
  uint64_t serverId() const { return server_ ? server_->id() : 0; }
  // Inside a transaction block (what PAUSE waits for besides running statements).
  bool inTransaction() const { return !server_.idle(); }
  // A message of the client's waits for the admin console's RESUME (PAUSE, SUSPEND).
  bool heldByConsole() const { return pause_.reason() == PauseReason::kConsoleHold; }
  bool isConsole() const { return admin_ != nullptr; }
  // Bytes read from the client and not handled yet, and bytes for it not yet written.
  size_t clientInputBytes() const { return client_.inputBytes(); }
  size_t clientOutputBytes() const { return client_->pendingBytes(); }
  // The admin console's RESUME: a held message goes on.
  void consoleResumed();

  // A CancelRequest carrying our key arrived: cancel the server query, if any.
  void cancelFromClient();
  // Daemon shutdown: idle sessions end now; busy ones after their current statement.
  void beginShutdown();
  // Ends the session now with a FATAL error.
  void terminate(const std::string& sqlstate, const std::string& message);
  // Refuses the connection (counted as a rejection for `reason`).
  void reject(const std::string& sqlstate, const std::string& message, metrics::RejectReason reason) {
    fatal(sqlstate, message, reason);
  }
  // The same once the client's StartupMessage is in (as PostgreSQL does): an SSLRequest gets
  // its 'N' first, so the client reads the reason rather than a failed SSL exchange. A client
  // that sends no StartupMessage within a second gets the reason then, and is closed.
  void rejectAfterStartup(std::string sqlstate, std::string message, metrics::RejectReason reason);
  // The first catalog statistics load for our database ended: finish attaching.
  void onStatsReady();
  // Janitor: startup/idle deadlines.
  void tick(uint64_t now_ms);

  // StreamEvents (client socket)
  void onStreamData(net::Stream& s, const char* data, size_t len) override;
  void onStreamEnd(net::Stream& s, int status) override;
  void onStreamWritten(net::Stream& s, int status) override;
  void onStreamClosed(net::Stream& s) override;

  // ServerLink
  void onServerMessage(pool::ServerConnection& s, const protocol::Frame& frame) override;
  void onServerChunk(pool::ServerConnection& s, char type, std::string_view bytes, bool first,
                     bool last) override;
  void onServerReadDone(pool::ServerConnection& s) override;
  void onServerWritten(pool::ServerConnection& s) override;
  void onServerLost(pool::ServerConnection& s, const std::string& why) override;

  // ServerWaiter
  void onServerReady(pool::ServerConnection& c) override;
  void onServerFailed(const std::string& sqlstate, const std::string& message) override;
  void onWaitMoved(pool::Pool& to) override { pause_.serverWaitMoved(to); }

 private:
  // accept() and adopt() go on here once the socket is open (rc: how opening it went).
  [[nodiscard]] int started(int rc);
  // The reply queue's entries (session/reply_queue.h), by their short names.
  using Expect = ReplyQueue::Expect;
  using WriteStep = ReplyQueue::WriteStep;
  using Pending = ReplyQueue::Pending;

  void setState(ClientState to);
  void trimIdle();
  void closeSession(const std::string& reason);
  void fatal(const std::string& sqlstate, const std::string& message, metrics::RejectReason reason);
  void protocolViolation(const std::string& message);
  void flushClient();
  void flushServer();
  std::string logPrefix() const;

  // Startup and authentication.
  void processInput();
  bool handleStartupPacket();
  void beginAuth();
  bool handleAuthMessage(const protocol::Frame& f);
  void authFailed(const std::string& log_reason);
  void authenticated();
  void startAttach();
  void finishAttach();

  // Transaction pooling and the carried settings (client_session_pooling.cpp).
  bool transactionPooled() const override { return server_.transactionPooled(); }
  void choosePoolMode();
  // The SETs (and RESETs) that give the server connection the client's carried settings.
  std::string paramSyncSql();
  // A server connection for the next message: true when server_ is set now; false while the
  // session waits for one (the message stays in the input buffer).
  bool takeServer();
  void attachForTransaction(pool::ServerConnection& c);
  // The server is idle and owes nothing: its connection goes back to the pool.
  void returnServerIfIdle();
  bool needsServer(char type) const;
  // A Sync: forwarded, or answered here when no server connection is held.
  void sendSync(const protocol::Frame& f);
  void sendParse(std::string_view name, std::string_view sql, const std::vector<uint32_t>& types,
                 const protocol::Frame* raw);
  void forwardPooled(const protocol::Frame& f);
  void answerLastHere(char complete_type);
  void noteServerParameter(const protocol::Frame& f);
  void noteCarriedSet(const StatementRun& run);

  // Proxying.
  bool handleClientMessage(const protocol::Frame& f);
  bool handleQuery(const protocol::Frame& f);
  bool handleParse(const protocol::Frame& f);
  bool handleBind(const protocol::Frame& f);
  bool handleExecute(const protocol::Frame& f);
  // Masked columns (docs/masking.md): a RowDescription relayed (rewritten when the group masks;
  // `rows` when the DataRows that follow are described by it), and the Describe of the portal
  // pgwarden sends before an Execute so that it knows what the rows hold.
  void relayRowDescription(const protocol::Frame& f, bool rows, bool relay);
  void describeForMasking(std::string_view portal);
  bool handleClose(const protocol::Frame& f);
  void forward(const protocol::Frame& f);
  void queueLocal(std::string bytes, bool with_rfq);
  void emitLocalHeads();
  void popPending();
  void afterServerError(const std::string& sqlstate, const std::string& message);
  // A message from the server, handed to the handler of its type below; false when the session
  // ended. `head` is the entry the message answers (the front of replies_).
  bool handleServerMessage(const protocol::Frame& f);
  void handleServerNotice(const protocol::Frame& f);
  void handleServerParameterStatus(const protocol::Frame& f);
  // A message while the server owes nothing: a FATAL before it goes, else a protocol error.
  bool handleServerUnsolicited(const protocol::Frame& f);
  bool handleServerError(const protocol::Frame& f, Pending& head);
  // pgwarden's own statements (kInternal): the SETs on attach and the carried settings' sync
  // (their ReadyForQuery finishes the attach), or a step of the write mode.
  bool handleServerInternal(const protocol::Frame& f, Pending& head);
  bool handleServerParseBindCloseComplete(const protocol::Frame& f, Pending& head);
  // ParameterDescription, NoData and RowDescription (of a Describe, or of a Query's result).
  bool handleServerDescription(const protocol::Frame& f, Pending& head);
  bool handleServerDataRow(const protocol::Frame& f, Pending& head);
  bool handleServerCommandComplete(const protocol::Frame& f, Pending& head);
  bool handleServerEmptyQuery(const protocol::Frame& f, Pending& head);
  bool handleServerPortalSuspended(const protocol::Frame& f, Pending& head);
  // CopyOut streams through; CopyIn is refused with CopyFail; CopyBoth ends the session.
  bool handleServerCopy(const protocol::Frame& f, Pending& head);
  bool handleServerReadyForQuery(const protocol::Frame& f, Pending& head);
  // A message `head` does not expect: the session ends (returns false).
  bool serverOutOfOrder(const protocol::Frame& f, const Pending& head);
  // A ReadyForQuery: the transaction status noted here and on the connection; a malformed one
  // ends the session (nullopt).
  std::optional<protocol::ReadyForQueryMsg> takeReadyForQuery(const protocol::Frame& f);
  // The client's CommandComplete of `run` (recounted to `rows` under a row cap, or a screen's
  // denial instead, `last`: the last statement of a simple Query) and the run's record.
  void sendCommandComplete(const protocol::Frame& f, StatementRun* run, int64_t rows, bool last);
  // The entry is a simple Query at its text's last statement.
  static bool lastOfText(const Pending& head) {
    const auto* q = std::get_if<Pending::Query>(&head.data);
    return q && q->exec && q->exec->atLast();
  }
  void sendTruncationNotice(StatementRun& run);
  // Runs the result screens on a run that completes now and sends their warnings; returns the
  // denial to answer with instead of CommandComplete (only a simple Query's last statement).
  const guards::Verdict* sendScreenNotices(StatementRun& run, bool last);
  void writeDeny(std::string& out, const StatementPlan& plan);
  void writeDeny(std::string& out, const guards::Verdict& v);
  void writeWarnings(std::string& out, const StatementPlan& plan);
  void writeWarnings(std::string& out, const std::vector<guards::Verdict>& warnings);
  void finishRun(StatementRun& run, history::Outcome outcome, std::string_view sqlstate = {},
                 std::string_view message = {}) override;
  void recordDenied(const StatementPlan& plan, bool extended);
  // Records a denied Parse/Bind/Execute, queues its ErrorResponse and skips to Sync.
  void denyExtended(const StatementPlan& plan);
  std::optional<std::string> resetSql(const StatementPlan& plan, std::string_view sql) const;
  // A denial inside a transaction block leaves it aborted, as PostgreSQL's own refusal would
  // (client_session_client.cpp): whether this one must, and the statement that makes it so.
  bool denialAbortsTransaction() const;
  void sendTransactionAbort(bool sync_first);
  // Skips the client's messages up to Sync after pgwarden refused one (`denied`: a guard denied
  // it; otherwise pgwarden answered it with an error of `sqlstate`).
  void skipBatch(std::string_view sqlstate, bool denied);
  // A client message that arrived while the batch is skipped: the statements it would have run
  // get their "not executed" records.
  void noteSkipped(const protocol::Frame& f);
  void recordSkipped(const std::shared_ptr<const StatementPlan>& plan, size_t index, bool extended);
  void finishAllPending(history::Outcome outcome, std::string_view message,
                        std::string_view sqlstate = {});
  void finishPortals();
  void serverIdleCheck();
  void releaseServer(bool cancel_first);
  void updateBackpressure();
  // Janitor: a client that takes none of its results for limits.client_stall_timeout while
  // pgwarden holds the server back for it loses the connection.
  void checkStall(uint64_t now_ms);

  // Agent context, webhook pauses and budgets (see docs/agents.md).
  bool answerAgentCommand(const guards::AgentCommand& cmd);
  // Applies the command and writes its answer (CommandComplete; DataRow first for SHOW, and a
  // RowDescription too when `describe`), without ReadyForQuery.
  void applyAgentCommand(const guards::AgentCommand& cmd, bool describe, int16_t format, std::string& out);
  // One history record for a pgwarden.* command answered here (an error when sqlstate is set).
  void recordAgentCommand(const guards::AgentCommand& cmd, bool extended, int64_t started_us,
                          std::string_view sqlstate = {}, std::string_view message = {});
  // The extended-protocol forms: Parse, Bind, Describe, Execute and Close of such statements
  // are answered here, never sent to the server. False: not one of ours.
  bool handleAgentParse(const protocol::ParseMsg& m, const guards::AgentCommand& cmd);
  bool handleAgentMessage(const protocol::Frame& f);

  // The statement gate (session/statement_gate.h): a Query, Parse, Bind or Execute is judged
  // there, then acted on here with its verdict. A message whose verdict waits is kept in pause_
  // and goes on from act() when the verdict comes.
  bool judge(const protocol::Frame& f, GateRequest&& request);
  bool act(const protocol::Frame& f, GateVerdict&& v);
  bool actQuery(const protocol::Frame& f, GateVerdict&& v);
  bool actParse(const protocol::Frame& f, GateVerdict&& v);
  bool actBind(const protocol::Frame& f, GateVerdict&& v);
  bool actExecute(const protocol::Frame& f, GateVerdict&& v);
  void onGateVerdict(GateVerdict v);
  // Acts on the paused message with its verdict and reads on.
  void actOnVerdict(GateVerdict v);
  // Transaction pooling: the connection went back to the pool while the verdict waited on
  // something other than the server; a verdict that runs the statement (or an EXPLAIN) needs
  // one again. True: server_ is set now; false: the session waits for one (onServerReady).
  bool retakeServer();
  void resumeInput();
  // PAUSE holds a new statement (none running, no transaction open); SUSPEND any message.
  bool consoleHolds(const protocol::Frame& f) const;
  void cancelWaits();
  void recordExplainFailure(const std::shared_ptr<const StatementPlan>& plan, bool extended,
                            const std::string& error_response);
  void failExtendedExplain(const std::shared_ptr<const StatementPlan>& plan, std::string error);
  // GateCaller
  guards::RequestContext requestContext(bool extended, const guards::AgentOverrides& ov) const override;
  const guards::PolicyGroup* policyGroup() const override { return caller_.policy; }
  // cost_gate: runs the EXPLAIN on this session's server connection (a Query for a Query;
  // Parse/Bind/Execute with the statement's parameters otherwise); its answer goes to the gate.
  bool runExplain(const std::string& sql, bool extended, const ExplainArgs& args) override;
  void sendExplain(const std::string& sql, bool extended, const ExplainArgs& args);
  bool handleExplainMessage(const protocol::Frame& f, Pending& head);
  // The parse check: the server's parser on a text libpg_query could not parse, on this
  // session's server connection; its answer goes to the gate (handleExplainMessage).
  bool runParseCheck(const std::string& sql, bool extended,
                     const std::vector<uint32_t>& param_types) override;
  // The answer to the EXPLAIN or the parse check, to the gate.
  void answerGate(bool parse_check, std::string error, std::string json);

  // Guarded writes (client_session_writes.cpp, docs/writes.md).
  const WriteTransaction* writeTransaction() const override { return writes_.get(); }
  void writesSetUp();
  // A write the gate let through: SAVEPOINT first, and no more client input until it is released.
  // The write's Query (`query`, the bytes to send) is held (hold_) until the savepoint
  // succeeded.
  void writesBeforeQuery(Pending& p, const GateVerdict& v, std::string query);
  // Guarded writes judge a statement against the transaction state it will run in: a Query, or
  // an Execute of a write, that arrives while the server still owes answers waits for them (true:
  // the message stays in the input buffer; a Flush makes the server answer an unsynced batch).
  bool waitForTxnState(const protocol::Frame& f);
  // The savepoint before a held write answered: the write goes to the server, or, when the
  // savepoint failed, it never does and the client hears why.
  void writeAfterSavepoint(const protocol::ReadyForQueryMsg& z, bool failed);
  // CommandComplete of a Query or Execute. True: it was a write over its cap, answered here with
  // TOO_MANY_ROWS (the savepoint is rolled back at its ReadyForQuery).
  bool writesCommandComplete(const protocol::Frame& f, Pending& head);
  // ReadyForQuery of a Query or Sync. True: held for pgwarden's RELEASE / ROLLBACK TO.
  bool writesReadyForQuery(char status, Pending& head);
  bool handleWriteStep(const protocol::Frame& f, Pending& head);
  // The state machine follows the server's transaction status; notices go to the client.
  void writesAfterStatement(char status);
  // A denied Query: the state machine hears TRANSACTION_ROLLED_BACK was told; inside a
  // transaction the next moves follow the denial in `out`.
  void writesDenied(const StatementPlan& plan, std::string& out);
  void writesTick(uint64_t now_ms);
  void writesSessionEnd();
  void sendWriteStep(WriteStep step, std::string_view sql);
  // The same step inside an extended-protocol batch (a Query there would drop the client's
  // unnamed statement): Parse/Bind/Execute/Close of each text, then Flush.
  void sendExtendedWriteStep(WriteStep step, const std::vector<std::string>& sqls);
  // One of the savepoint steps (WriteTransaction::savepointStatements) in either form.
  void sendWriteStep(WriteStep step, WriteTransaction::Savepoint sp, bool extended);
  bool handleExtendedWriteStep(const protocol::Frame& f, Pending& head);
  // An Execute of a write prepared over the extended protocol: false when the write mode denies
  // it now (answered here; the batch is skipped to Sync).
  bool writesBeforeExecute(const std::shared_ptr<const StatementPlan>& plan);
  // Read-only groups: an Execute after an Execute of COMMIT or ROLLBACK in the same batch is
  // refused (answered here; the batch is skipped to Sync). False: refused.
  bool txnEndCheck(const std::shared_ptr<const StatementPlan>& plan);
  // The counters after a held write are in (or could not be read: `counted` false): its
  // CommandComplete or TOO_MANY_ROWS goes out, and its savepoint is released or rolled back to.
  void writesCounted(bool extended, bool counted);

  SessionHost& host_;
  uint64_t id_;
  std::shared_ptr<const config::Config> config_;
  ClientState state_ = ClientState::kStartup;
  // The client's socket, input, deadlines and backpressure (session/client_link.h).
  ClientLink client_;

  // Who is asking (session/caller.h).
  Caller caller_;
  guards::RowMask row_mask_;  // the masked columns of the rows being relayed
  // What only the login needs (a refusal waiting for the StartupMessage, the password exchange,
  // the first statistics wait): dropped when the session becomes ready (setState).
  std::unique_ptr<Login> login_ = std::make_unique<Login>();
  CancelKey cancel_key_;

  // The server side.
  // The connection held now, the server's transaction status, the carried settings the client
  // started with and, under transaction pooling, its statements carried between connections.
  PooledServer server_;
  // The client's prepared statements and portals, pgwarden's own among them.
  PreparedRegistry prepared_;
  // What the server owes, in order, and the batch those answers belong to (open, skipped).
  ReplyQueue replies_;
  bool shutting_down_ = false;
  std::shared_ptr<StatementRun> chunk_run_;
  uint64_t statement_count_ = 0;
  // Set when pgwarden itself ends the session (the FATAL it sends): a statement still running is
  // then recorded `aborted` with it, not `client_gone`.
  struct FatalSent {
    std::string sqlstate;
    std::string message;
  } ended_;
  std::unique_ptr<ConsoleSession> admin_;  // set: this is an admin console session

  // Guarded writes: the transaction state machine (null: a read-only group), and what a write
  // holds back while its savepoint and count are settled (session/write_hold.h).
  std::unique_ptr<WriteTransaction> writes_;
  WriteHold hold_;

  // The gate that judges this session's statements (made for the first one, and dropped again
  // by trimIdle()).
  std::unique_ptr<StatementGate> gate_;
  std::unique_ptr<ScreenProbe> probe_;  // the result screens' probe, made on its first use
  StatementGate& gate();
  // Why no further client message is read now, and what waits meanwhile (the message waiting for
  // its verdict; that verdict or the cost gate's EXPLAIN waiting for a server connection).
  PausedMessage pause_;
  guards::AgentOverrides overrides_;  // the comment overrides of the statement being handled
  // The Bind being handled, decoded into storage kept from one Bind to the next.
  protocol::BindMsg bind_;
};

}  // namespace pgwarden::session
