// Guarded writes over MCP (docs/writes.md): the tools begin, execute, commit and rollback of a
// `mode: guarded_writes` group. One WriteConversation per MCP session holds at most one open
// transaction on one connection of the group's write pool, judged by the same WriteTransaction
// the wire protocol's sessions use; every answer names the valid next moves, and a call out of
// order is refused with INVALID_STATE listing them. A session that ends rolls back, never commits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcp/mcp_host.h"
#include "mcp/statement_runner.h"
#include "mcp/tool_calls.h"
#include "session/write_txn.h"

namespace pgwarden::mcp {

class WriteConversation final : public TxnLink, public pool::ServerLink, public pool::ServerWaiter {
 public:
  // `session_id`: the MCP session's history id, for the log.
  WriteConversation(McpHost& host, McpIdentity who, uint64_t session_id);
  ~WriteConversation();
  WriteConversation(const WriteConversation&) = delete;
  WriteConversation& operator=(const WriteConversation&) = delete;

  session::TxnState state() const { return txn_.state(); }
  // The tools that may come next: begin; execute, commit, rollback; or rollback alone.
  std::vector<std::string> nextMoves() const;
  // Whether `tool` is a valid move now. After pgwarden rolled the transaction back every
  // transaction tool is, once: its statement is told TRANSACTION_ROLLED_BACK by the gate.
  bool allows(Tool tool) const;

  // One transaction tool call at a time: `claim` false while another runs; `release` when it
  // ended, which hands the connection back to the pool once no transaction is open.
  bool claim();
  void release();
  // begin: a connection of the write pool, held until the transaction ends; `done` later.
  using Acquired =
      std::function<void(bool ok, const std::string& sqlstate, const std::string& message)>;
  void acquire(Acquired done);
  void cancelAcquire();
  // A call's statement ended: the state moves as the server's transaction status says, and the
  // notice the agent hears (TRANSACTION_OPEN, COMMITTED, DISCARDED) comes back.
  std::optional<guards::Verdict> afterRun(const RunResult& r);

  // Reads outside the transaction (query, describe_table) count as looks at their tables.
  void noteRead(const analysis::StatementInfo& st) { txn_.noteRead(st); }
  void noteLooked(std::string_view qualified_table);

  // The idle and age limits: an expired transaction is rolled back (its connection reset).
  void tick(uint64_t now_ms);
  // The MCP session ended (DELETE, expiry, eviction, shutdown): an open transaction is rolled back.
  void end(const char* why);

  // TxnLink
  session::WriteTransaction& transaction() override { return txn_; }
  pool::ServerConnection* lend(pool::ServerLink& to) override;
  void takeBack(pool::ServerConnection* c, int rfq_owed) override;
  guards::Verdict undone(guards::GuardResult over) override;
  void written(int64_t rows) override { host_.writeCounted(rows, false); }
  // ServerLink (while no statement runs on the held connection)
  void onServerMessage(pool::ServerConnection& s, const protocol::Frame& frame) override;
  void onServerChunk(pool::ServerConnection&, char, std::string_view, bool, bool) override {}
  void onServerReadDone(pool::ServerConnection&) override {}
  void onServerWritten(pool::ServerConnection&) override {}
  void onServerLost(pool::ServerConnection& s, const std::string& why) override;
  // ServerWaiter
  void onServerReady(pool::ServerConnection& c) override;
  void onServerFailed(const std::string& sqlstate, const std::string& message) override;
  void onWaitMoved(pool::Pool& to) override { waiting_pool_ = &to; }

 private:
  uint64_t now() const;
  // An open transaction is gone with its connection or its session (`why`, for the log):
  // counted as a disconnect, its tallies cleared, the state back to none.
  void forget(const char* why);
  // The connection back to its pool (its reset rolls back an open transaction, forgotten).
  void dropConnection(const char* why);

  McpHost& host_;
  McpIdentity who_;  // holds the config, and so the group's WriteMode, alive
  uint64_t session_id_;
  session::WriteTransaction txn_;
  pool::ServerConnection* server_ = nullptr;
  pool::Pool* waiting_pool_ = nullptr;
  Acquired acquired_;
  bool busy_ = false;
  bool ended_ = false;
};

// What initialize tells a guarded_writes group's client, after the read-only instructions.
inline constexpr const char* kWriteInstructions =
    " To change data: `begin`, look at the table (`describe_table`, or a SELECT), `execute` each "
    "write with a WHERE naming the rows you mean, `execute` a SELECT to see what changed, then "
    "`commit` or `rollback`. Every answer lists your valid `next_moves`.";

// A tools/call of begin, execute, commit or rollback (ctx.writes is the session's conversation).
std::unique_ptr<RunningCall> makeWriteCall(McpHost& host, CallContext ctx, Tool tool, Json args,
                                           RunningCall::Done done);

}  // namespace pgwarden::mcp
