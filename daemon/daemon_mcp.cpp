// The daemon as the MCP endpoint's host (mcp/mcp_host.h): the few process services the MCP front
// end uses, answered from the config in force and loop 0's pools, gate services and recorder
// (the endpoint runs on loop 0), the login limiter and metrics.
#include "daemon/daemon.h"
#include "daemon/daemon_metrics.h"
#include "daemon/catalog_stats.h"

namespace pgwarden::daemon {

std::optional<mcp::McpIdentity> Daemon::identify(const std::string& user) {
  const config::UserConfig* u = config_->findUser(user);
  if (!u) return std::nullopt;
  return identifyInGroup(u->name, u->group);
}

std::optional<mcp::McpIdentity> Daemon::identifyInGroup(const std::string& user,
                                                        const std::string& group) {
  const auto server_db = config_->upstream.mapDatabase(config_->mcp.database);
  if (!server_db) return std::nullopt;
  mcp::McpIdentity who;
  who.user = user;
  who.group = group;
  who.policy = config_->findGroup(group);
  who.database = config_->mcp.database;
  who.server_database = *server_db;
  who.statement_timeout_ms = config_->upstream.statement_timeout.count();
  who.hold = config_;
  return who;
}

session::GateServices Daemon::gateServices(const std::string& server_database) {
  return primary().gateServices(server_database);
}

session::StatementRecorder& Daemon::recorder() { return primary().statementRecorder(); }

pool::Pool& Daemon::pool(const std::string& server_database, bool replica_ok) {
  return pools().pool(server_database, false, false, replica_ok);
}

pool::Pool& Daemon::writePool(const std::string& server_database) {
  return pools().pool(server_database, false, true);
}

void Daemon::cancelServerQuery(int32_t server_pid, int32_t server_key,
                               std::shared_ptr<pool::CancelFence> fence) {
  primary().cancelServerQuery(server_pid, server_key, std::move(fence));
}

void Daemon::writeTransactionEnded(session::TxnEnd how) {
  metrics::Counters& c = counters();
  if (how == session::TxnEnd::kCommitted) {
    ++c.write_txn_committed;
  } else {
    ++c.write_txn_rolled_back[static_cast<size_t>(how)];
  }
}

void Daemon::writeCounted(int64_t rows_written, bool undone) {
  metrics::Counters& c = counters();
  if (undone) {
    ++c.writes_undone;
  } else {
    c.rows_written += static_cast<uint64_t>(rows_written);
  }
}

bool Daemon::statsLoading(const std::string& server_database) {
  return catalog_ && catalog_->loading(server_database);
}

guards::GuardObserver* Daemon::guardObserver() { return metrics_.get(); }

session::AuthLimiter::Block Daemon::loginBlocked(const std::string& peer_host,
                                                 const std::string& credential) {
  const config::AuthConfig& a = config_->auth;
  return auth_limiter_.blocked(peer_host, credential, nowMs(),
                               {a.failed_attempts_per_minute, a.failed_attempts_per_address});
}

void Daemon::loginFailed(const std::string& peer_host, const std::string& credential) {
  (void)auth_limiter_.recordFailure(peer_host, credential, nowMs());
}

}  // namespace pgwarden::daemon
