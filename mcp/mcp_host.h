// What the MCP front end needs of the process, as one narrow interface the daemon implements (and
// a unit test can fake): who a configured user is, the statement gate's services, the one
// statement recorder, the pools, cancelling a server query, catalog statistics and the login
// limiter. The MCP code never sees the Daemon itself.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "guards/policy.h"
#include "pool/pooled_connection.h"
#include "session/auth_limiter.h"
#include "session/statement_gate.h"
#include "session/statement_recorder.h"

namespace pgwarden::pool {
class Pool;
class PoolManager;
}  // namespace pgwarden::pool

namespace pgwarden::daemon {}  // namespace pgwarden::daemon
namespace pgwarden::metrics {
struct Counters;
}

namespace pgwarden::mcp {

// A pgwarden user as the MCP endpoint runs statements for it, from the config in force when its
// MCP session began (`hold` keeps that config, and so `policy`, alive).
struct McpIdentity {
  std::string user;
  std::string group;
  const guards::PolicyGroup* policy = nullptr;
  std::string database;         // the client database name (mcp.database)
  std::string server_database;  // what upstream.databases maps it to
  int64_t statement_timeout_ms = 0;
  std::shared_ptr<const void> hold;
};

class McpHost {
 public:
  virtual ~McpHost() = default;
  // Null when `user` is not a configured user or the database map refuses mcp.database.
  virtual std::optional<McpIdentity> identify(const std::string& user) = 0;
  // The subject of an OAuth access token (no configured user) running in `group`, which its
  // scopes picked: null when the database map refuses mcp.database.
  virtual std::optional<McpIdentity> identifyInGroup(const std::string& user,
                                                     const std::string& group) {
    (void)user;
    (void)group;
    return std::nullopt;
  }
  // The gate's services for statements on `server_database` (its catalog statistics).
  virtual session::GateServices gateServices(const std::string& server_database) = 0;
  virtual session::StatementRecorder& recorder() = 0;
  // `replica_ok`: a read of a group with read_replicas: a replica's pool when one is in the
  // rotation (PoolManager::pool), else the primary's.
  virtual pool::Pool& pool(const std::string& server_database, bool replica_ok) = 0;
  // The write pool of a database (role upstream.write_user): guarded_writes groups' transactions.
  virtual pool::Pool& writePool(const std::string& server_database) = 0;
  // Guarded writes feed the counters the wire's do (docs/writes.md): a transaction ended `how`;
  // a kept write changed `rows_written` rows, or (`undone`) one over a row cap was undone.
  virtual void writeTransactionEnded(session::TxnEnd how) = 0;
  virtual void writeCounted(int64_t rows_written, bool undone) = 0;
  // Sends a CancelRequest for that server backend on a new upstream connection; the connection's
  // `fence` keeps it from being lent to anybody else until PostgreSQL has the request.
  virtual void cancelServerQuery(int32_t server_pid, int32_t server_key,
                                 std::shared_ptr<pool::CancelFence> fence) = 0;
  virtual std::shared_ptr<const analysis::TableStatsSnapshot> tableStats(
      const std::string& server_database) = 0;
  // How old that snapshot is, in seconds (-1: none, or unknown): provenance (docs/provenance.md).
  virtual int64_t statsAgeSeconds(const std::string& server_database) {
    (void)server_database;
    return -1;
  }
  virtual uv_loop_t* loop() = 0;
  // The loop's pools and counters for the result screens' probe (session/screen_probe.h); null:
  // this host runs no probe.
  virtual pool::PoolManager* probePools() { return nullptr; }
  virtual metrics::Counters* probeCounters() { return nullptr; }
  // The first catalog statistics load for the database is still running: statements wait for it
  // (bounded), so a size guard never judges a big table as unknown.
  virtual bool statsLoading(const std::string& server_database) = 0;
  // Keeps statistics for a database from now on (an MCP user will query it).
  virtual void watchDatabase(const std::string& server_database) = 0;
  virtual budgets::BudgetLedger* budgets() = 0;
  virtual guards::GuardObserver* guardObserver() = 0;
  // The failed-login limiter shared with SQL logins, by address and credential
  // (AuthLimiter::tokenCredential of a presented token's hash).
  virtual session::AuthLimiter::Block loginBlocked(const std::string& peer_host,
                                                   const std::string& credential) = 0;
  virtual void loginFailed(const std::string& peer_host, const std::string& credential) = 0;
  // A process-wide session id (history's session_id), shared with SQL sessions.
  virtual uint64_t nextSessionId() = 0;
  // The admin console's PAUSE or SUSPEND holds new statements on `database` (a client database
  // name) until RESUME: they wait, as a SQL client's do, rather than fail.
  virtual bool consoleHeld(const std::string& database) const {
    (void)database;
    return false;
  }
  // A statement past that hold started (+1) or ended (-1): PAUSE waits for the running ones.
  virtual void statementRunning(int delta) { (void)delta; }
};

}  // namespace pgwarden::mcp
