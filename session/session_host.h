// What a wire-protocol session needs of the process, and nothing more: the daemon implements it,
// a unit test can fake it. Sessions never see the daemon itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "metrics/counters.h"
#include "pool/pool.h"
#include "protocol/messages.h"
#include "session/statement_gate.h"

namespace pgwarden::budgets {
class BudgetLedger;
}  // namespace pgwarden::budgets

namespace pgwarden::analysis {
class TableStatsSnapshot;
}  // namespace pgwarden::analysis

namespace pgwarden::guards {
class GuardObserver;
}  // namespace pgwarden::guards

namespace pgwarden::pool {
struct CancelFence;
}  // namespace pgwarden::pool

namespace pgwarden::session {

class AuthLimiter;
class ClientSession;
class PolicyEngine;
class StatementRecorder;

// A console session (the admin console on the virtual database "pgwarden"): answers a client's
// messages itself and never reaches a server.
class ConsoleSession {
 public:
  // The database name that opens the console instead of a proxied session.
  static constexpr std::string_view kDatabase = "pgwarden";
  virtual ~ConsoleSession() = default;
  // What the client sees after AuthenticationOk: the ParameterStatus lines psql and drivers
  // expect, then ReadyForQuery.
  virtual void welcome(std::string& out) = 0;
  // One client message; appends the answer to `out`. False: the client sent Terminate.
  [[nodiscard]] virtual bool onMessage(const protocol::Frame& f, std::string& out) = 0;
  // Whether the answer to `f` needs what other loops hold first. True: `ready` runs on the loop
  // later (never inside this call), and the session then hands `f` to onMessage.
  [[nodiscard]] virtual bool gather(const protocol::Frame& /*f*/, std::function<void()> /*ready*/) {
    return false;
  }
};

// What the admin console asks of the sessions of one database (PAUSE, SUSPEND, DISABLE).
struct ConsoleHolds {
  bool paused = false;     // hold a new statement (not one inside a transaction) until RESUME
  bool suspended = false;  // hold every client message until RESUME
  bool disabled = false;   // refuse new logins
};

class SessionHost {
 public:
  virtual ~SessionHost() = default;

  virtual uv_loop_t* loop() = 0;
  virtual uint64_t nowMs() const = 0;
  virtual bool shuttingDown() const = 0;
  // The configuration a new session starts with (a reload swaps it; sessions keep theirs).
  virtual const std::shared_ptr<const config::Config>& config() const = 0;
  virtual metrics::Counters& counters() = 0;
  virtual pool::PoolManager& pools() = 0;
  virtual PolicyEngine& policy() = 0;
  virtual StatementRecorder& statementRecorder() = 0;
  virtual AuthLimiter& authLimiter() = 0;
  // The key unknown users' made-up salts are derived from.
  virtual const std::string& saltKey() const = 0;
  // Per-conversation budgets (null once the shutdown has released them).
  virtual budgets::BudgetLedger* budgets() = 0;
  virtual guards::GuardObserver* guardObserver() = 0;
  // What the statement gate runs on, for statements on `server_database`.
  virtual GateServices gateServices(const std::string& server_database) = 0;
  // A client waited for a server connection `waited` long, and got one or timed out.
  virtual void poolWaited(bool timed_out, std::chrono::nanoseconds waited) = 0;

  // Catalog statistics for a server database (null until the first refresh succeeds).
  virtual std::shared_ptr<const analysis::TableStatsSnapshot> tableStats(
      const std::string& server_db) = 0;
  // Keeps statistics for a server database from now on (a client logged in to it).
  virtual void watchDatabase(const std::string& server_db) = 0;
  // The first statistics load for `server_db` is under way; ClientSession::onStatsReady is
  // called for `session_id` when it ends.
  virtual bool waitForStats(const std::string& server_db, uint64_t session_id) = 0;

  // Cancel keys: each session gets a random (pid, key) pair of its own.
  virtual void registerCancelKey(ClientSession* s, int32_t& pid, int32_t& key) = 0;
  virtual void unregisterCancelKey(int32_t pid, int32_t key) = 0;
  // A client's CancelRequest (arriving on its own connection).
  virtual void handleCancelRequest(int32_t pid, int32_t key) = 0;
  // A CancelRequest for a server backend; `fence` keeps the connection from being lent meanwhile.
  virtual void cancelServerQuery(int32_t server_pid, int32_t server_key,
                                 std::shared_ptr<pool::CancelFence> fence) = 0;

  // The session logged in or is closing: it no longer counts as starting up.
  virtual void leftStartup(uint64_t id) = 0;
  // The session's close callback ran; the host frees it later, never inside its own callback.
  virtual void onSessionClosed(ClientSession* s) = 0;
  // The admin console for an admin user who logged in to ConsoleSession::kDatabase.
  // The admin console's holds on `database` (the name the client logged in with).
  virtual ConsoleHolds consoleHolds(const std::string& /*database*/) const { return {}; }
  virtual std::unique_ptr<ConsoleSession> openConsole(uint64_t session_id, const std::string& user,
                                                      const std::string& client_addr,
                                                      const std::string& application_name) = 0;
};

}  // namespace pgwarden::session
