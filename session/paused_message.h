// Why a client session reads no further message now, and what it keeps meanwhile: the message
// waiting for its verdict, the verdict or EXPLAIN waiting for a server connection, the pool it
// waits on. "Is the session paused?" has this one answer; every change goes through move(),
// which refuses an impossible one (as PgBouncer's change_client_state does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "session/statement_gate.h"

namespace pgwarden::pool {
class Pool;
}  // namespace pgwarden::pool

namespace pgwarden::session {

enum class PauseReason : uint8_t {
  kNone,
  kVerdict,        // a message waits for the gate's verdict (webhook, cost gate, budget store)
  kVerdictServer,  // ... whose verdict, or the cost gate's EXPLAIN, waits for a server connection
  kServer,         // the next message (or the login) waits for a server connection from the pool
  kWriteStep,      // guarded writes: a write's savepoint, count or release is being settled
  kTxnState,       // guarded writes: the next message waits for the server's earlier answers
  kConsoleGather,  // admin console: the message waits while the other loops are asked
  kConsoleHold,    // PAUSE or SUSPEND: the next message waits for RESUME
};

const char* pauseReasonName(PauseReason r);

// True when `from` -> `to` is a move a session may make. Staying is not a move.
bool legalPause(PauseReason from, PauseReason to);

class PausedMessage {
 public:
  // The cost gate's EXPLAIN, asked for while no server connection was held.
  struct DeferredExplain {
    std::string sql;
    bool extended = false;
    ExplainArgs args;
  };

  explicit PausedMessage(uint64_t session_id) : session_id_(session_id) {}

  PauseReason reason() const { return reason_; }
  bool paused() const { return reason_ != PauseReason::kNone; }
  // A message waits for its verdict (kept here; the input buffer has moved past it).
  bool holdsMessage() const {
    return reason_ == PauseReason::kVerdict || reason_ == PauseReason::kVerdictServer;
  }
  const std::string& message() const { return message_; }
  // The pool waited on (kServer, kVerdictServer); null otherwise.
  pool::Pool* pool() const { return pool_; }

  // Every change goes through this: false, and nothing changes, for an impossible move (logged).
  bool move(PauseReason to);

  // kNone -> kVerdict, keeping the message's bytes.
  bool keep(std::string_view raw);
  // The verdict came: the message, and kNone (empty when no message was kept).
  std::string takeMessage();
  // The wait for a server connection from `pool` begins: kNone -> kServer, kVerdict ->
  // kVerdictServer.
  bool waitForServer(pool::Pool& pool);
  // The wait goes on in another pool (a replica's waiters handed to the primary): same state.
  void serverWaitMoved(pool::Pool& to) {
    if (pool_) pool_ = &to;
  }
  // ... and ends (a connection came, none will, or the wait was cancelled): back to kVerdict
  // with what waits for it (takeVerdict, takeExplain), or kNone.
  void serverWaitOver();
  // kVerdictServer: what goes on once a connection is lent.
  void holdVerdict(GateVerdict v) { verdict_ = std::move(v); }
  void deferExplain(DeferredExplain x) { explain_ = std::move(x); }
  std::optional<GateVerdict> takeVerdict();
  std::optional<DeferredExplain> takeExplain();
  // The kept message is dropped (the gate was cancelled): its held verdict, if any, is handed
  // back for the gate to discard; a wait for a server goes on as a plain kServer.
  std::optional<GateVerdict> dropMessage();
  // Holds that end inside a server callback: kWriteStep (or kTxnState) becomes kNone, and the
  // session reads on once that callback is done (takeResume). Another reason stays as it is.
  void endWriteStep();
  void endTxnStateWait();
  bool takeResume() {
    const bool r = resume_;
    resume_ = false;
    return r;
  }
  // kTxnState: the server was asked to answer an unsynced batch (a Flush), once per hold.
  bool flushSent() const { return flush_sent_; }
  void setFlushSent() { flush_sent_ = true; }
  // The session ends: kNone, everything dropped (a held verdict is returned to be discarded).
  std::optional<GateVerdict> reset();

 private:
  uint64_t session_id_;
  PauseReason reason_ = PauseReason::kNone;
  std::string message_;
  pool::Pool* pool_ = nullptr;
  std::optional<GateVerdict> verdict_;
  std::optional<DeferredExplain> explain_;
  bool resume_ = false;
  bool flush_sent_ = false;
};

}  // namespace pgwarden::session
