// The daemon as the MCP endpoint's host (mcp/mcp_host.h): the few process services the MCP front
// end uses, answered from the config in force and the daemon's own pools, gate services,
// recorder, login limiter and metrics.
#include "daemon/daemon.h"
#include "daemon/daemon_metrics.h"
#include "daemon/catalog_stats.h"

namespace pgwarden::daemon {

std::optional<mcp::McpIdentity> Daemon::identify(const std::string& user) {
  const UserConfig* u = config_->findUser(user);
  if (!u) return std::nullopt;
  const auto server_db = config_->upstream.mapDatabase(config_->mcp.database);
  if (!server_db) return std::nullopt;
  mcp::McpIdentity who;
  who.user = u->name;
  who.group = u->group;
  who.policy = config_->findGroup(u->group);
  who.database = config_->mcp.database;
  who.server_database = *server_db;
  who.statement_timeout_ms = config_->upstream.statement_timeout.count();
  who.hold = config_;
  return who;
}

GateServices Daemon::gateServices(const std::string& server_database) {
  GateServices services;
  services.policy = policy_.get();
  services.webhooks = webhooks_.get();
  services.budgets = budgets_.get();
  services.stats = [this, server_database] { return catalog_ ? tableStats(server_database) : nullptr; };
  return services;
}

void Daemon::writeTransactionEnded(TxnEnd how) {
  if (how == TxnEnd::kCommitted) {
    ++counters_.write_txn_committed;
  } else {
    ++counters_.write_txn_rolled_back[static_cast<size_t>(how)];
  }
}

void Daemon::writeCounted(int64_t rows_written, bool undone) {
  if (undone) {
    ++counters_.writes_undone;
  } else {
    counters_.rows_written += static_cast<uint64_t>(rows_written);
  }
}

bool Daemon::statsLoading(const std::string& server_database) {
  return catalog_ && catalog_->loading(server_database);
}

guards::GuardObserver* Daemon::guardObserver() { return metrics_.get(); }

bool Daemon::loginBlocked(const std::string& peer_host) {
  return auth_limiter_.blocked(peer_host, nowMs(), config_->auth.failed_attempts_per_minute);
}

void Daemon::loginFailed(const std::string& peer_host) { auth_limiter_.recordFailure(peer_host, nowMs()); }

}  // namespace pgwarden::daemon
