// The process: one libuv loop with the listeners, the client sessions, the server pools, the
// janitor timer, signal handling, cancel-key routing, catalog statistics and the history
// recorder. Owns every session; frees closed ones once per loop iteration, outside callbacks.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/log_throttle.h"
#include "daemon/salt_key.h"
#include "session/auth_limiter.h"
#include "session/session_host.h"
#include "session/startup_limiter.h"
#include "daemon/config.h"
#include "metrics/counters.h"
#include "net/listener.h"
#include "pool/pool.h"
#include "session/statement_policy.h"
#include "session/statement_recorder.h"
#include "net/upstream.h"
#include "net/webhook_client.h"
#include "budgets/budget.h"
#include "guards/policy.h"
#include "history/recorder.h"
#include "mcp/mcp_host.h"

namespace pgwarden::daemon {

class ClientSession;
class CatalogRefresher;
class DaemonMetrics;
class SystemdNotifier;
}  // namespace pgwarden::daemon
namespace pgwarden::mcp {
class McpServer;
}  // namespace pgwarden::mcp
namespace pgwarden::daemon {

// The process is where finished statements end up (StatementSink): counted, exported as
// metrics and queued for history. It is also what the MCP endpoint runs on (McpHost).
class Daemon final : public StatementSink, public SessionHost, public mcp::McpHost {
 public:
  explicit Daemon(std::shared_ptr<const Config> config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The service manager to tell about readiness, reloads and shutdown (optional).
  void setNotifier(SystemdNotifier* notifier) { notifier_ = notifier; }
  // Binds the listeners; returns false (after logging why) when one cannot be bound.
  bool start();
  // Runs the loop until shutdown has finished. Returns the process exit code.
  int run();

  uv_loop_t* loop() override { return &loop_; }
  const std::shared_ptr<const Config>& config() const override { return config_; }
  Counters& counters() override { return counters_; }
  const Counters& counters() const { return counters_; }
  PoolManager& pools() override { return pools_; }
  PolicyEngine& policy() override { return *policy_; }
  AuthLimiter& authLimiter() override { return auth_limiter_; }
  // The key unknown users' made-up salts are derived from (daemon/salt_key.h).
  const std::string& saltKey() const override { return salt_key_.key; }
  // Agent features: per-conversation budgets and the HTTP client of webhook guards (null once
  // the shutdown has released them).
  guards::BudgetLedger* budgets() override { return budgets_.get(); }
  WebhookClient* webhooks() { return webhooks_.get(); }
  uint64_t nowMs() const override { return uv_now(const_cast<uv_loop_t*>(&loop_)); }
  bool shuttingDown() const override { return shutting_down_; }
  const std::string& instanceId() const { return config_->instance_id; }

  // Catalog statistics for a server database (null until the first refresh succeeds).
  std::shared_ptr<const guards::TableStatsSnapshot> tableStats(const std::string& server_db) const;
  const CatalogRefresher& catalog() const { return *catalog_; }
  // Keeps statistics for a server database from now on (a client logged in to it).
  void watchDatabase(const std::string& server_db) override;
  // The first statistics load for `server_db` is under way; `session_id` is told when it ends.
  bool waitForStats(const std::string& server_db, uint64_t session_id) override;

  // Cancel keys: each session gets a random (pid, key) pair of its own.
  void registerCancelKey(ClientSession* s, int32_t& pid, int32_t& key) override;
  void unregisterCancelKey(int32_t pid, int32_t key) override;
  // A client's CancelRequest (arriving on its own connection).
  void handleCancelRequest(int32_t pid, int32_t key) override;
  // Sends a CancelRequest for a server backend on a new upstream connection. `fence` (the server
  // connection's, or null): counts the request until PostgreSQL has it, and the connection is not
  // lent to anybody else meanwhile.
  void cancelServerQuery(int32_t server_pid, int32_t server_key, std::shared_ptr<CancelFence> fence) override;

  // History: never blocks; a record refused by a full queue is counted.
  void submitRecord(history::Record&& record);
  // Every front end's finished statements go through this one recorder.
  StatementRecorder& statementRecorder() override { return *statements_; }
  // StatementSink: counters, metrics, then the history queue.
  void onStatement(history::Record&& record, const StatementPlan* plan) override;

  // Session bookkeeping.
  void onSessionClosed(ClientSession* s) override;
  // The session logged in or is closing: it no longer counts as starting up.
  void leftStartup(uint64_t id) override;
  void poolWaited(bool timed_out, std::chrono::nanoseconds waited) override;
  std::unique_ptr<ConsoleSession> openConsole(uint64_t session_id, const std::string& user,
                                              const std::string& client_addr,
                                              const std::string& application_name) override;
  size_t sessionCount() const { return sessions_.size(); }
  void forEachSession(const std::function<void(const ClientSession&)>& fn) const;
  ClientSession* findSession(uint64_t id);  // null when no such live session
  // Metrics catalogue and endpoint (daemon/daemon_metrics.h).
  DaemonMetrics& metrics() { return *metrics_; }

  // McpHost (daemon/daemon_mcp.cpp)
  std::optional<mcp::McpIdentity> identify(const std::string& user) override;
  GateServices gateServices(const std::string& server_database) override;
  StatementRecorder& recorder() override { return *statements_; }
  Pool& pool(const std::string& server_database) override { return pools_.pool(server_database); }
  Pool& writePool(const std::string& server_database) override {
    return pools_.pool(server_database, false, true);
  }
  void writeTransactionEnded(TxnEnd how) override;
  void writeCounted(int64_t rows_written, bool undone) override;
  std::shared_ptr<const guards::TableStatsSnapshot> tableStats(const std::string& server_db) override {
    return static_cast<const Daemon*>(this)->tableStats(server_db);
  }
  guards::GuardObserver* guardObserver() override;
  bool statsLoading(const std::string& server_database) override;
  bool loginBlocked(const std::string& peer_host) override;
  void loginFailed(const std::string& peer_host) override;
  uint64_t nextSessionId() override { return ++next_session_id_; }
  // The MCP endpoint (null when mcp.listen is not set).
  const mcp::McpServer* mcpServer() const { return mcp_.get(); }
  // Starts a graceful shutdown (SIGTERM: shutdown_timeout; fast, SIGINT: a shorter one).
  void requestShutdown(bool fast);
  // Re-reads the config file; on success new sessions use the new config (SIGHUP).
  void reload();

 private:
  // Adopts sockets inherited from systemd and binds the configured addresses they leave out.
  bool startListeners(const ListenConfig& listen, const std::string& metrics_listen);
  void onConnection(Listener& l);
  // Applies the limits on connections that have not logged in to a new session.
  void admitStartup(ClientSession& s);
  void tick();
  void sweep();
  void finishShutdownIfDone();
  void refreshStats();

  static void onJanitor(uv_timer_t* t);
  static void onCheck(uv_check_t* c);
  static void onSignal(uv_signal_t* s, int signum);
  static void onShutdownGrace(uv_timer_t* t);
  static void onHandleClosed(uv_handle_t* h);
  static constexpr uint64_t kShutdownGraceMs = 500;

  uv_loop_t loop_;
  std::shared_ptr<const Config> config_;
  Counters counters_;
  PoolManager pools_;
  std::unique_ptr<PolicyEngine> policy_;
  AuthLimiter auth_limiter_;
  StartupLimiter startup_limiter_;
  std::array<LogThrottle, 4> startup_log_;  // admitStartup's lines: evicted, and each refusal
  SaltKey salt_key_;
  std::unique_ptr<history::Recorder> recorder_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::unordered_map<uint64_t, std::unique_ptr<ClientSession>> sessions_;
  std::vector<std::unique_ptr<ClientSession>> session_graveyard_;
  std::unordered_map<uint64_t, ClientSession*> cancel_keys_;
  std::vector<std::unique_ptr<CancelForwarder>> cancels_;
  std::vector<std::unique_ptr<CancelForwarder>> cancel_graveyard_;
  std::unique_ptr<CatalogRefresher> catalog_;
  std::unique_ptr<DaemonMetrics> metrics_;
  // Both own loop handles: released before the loop stops (finishShutdownIfDone, ~Daemon).
  std::unique_ptr<guards::BudgetLedger> budgets_;
  std::unique_ptr<StatementRecorder> statements_;
  std::unique_ptr<WebhookClient> webhooks_;
  std::unique_ptr<mcp::McpServer> mcp_;
  uv_timer_t janitor_;
  uv_check_t check_;
  uv_signal_t sig_term_;
  uv_signal_t sig_int_;
  uv_signal_t sig_hup_;
  int handles_open_ = 0;
  uint64_t next_session_id_ = 0;
  bool shutting_down_ = false;
  bool stopping_loop_ = false;
  uint64_t shutdown_deadline_ms_ = 0;
  SystemdNotifier* notifier_ = nullptr;
  uint64_t last_watchdog_ms_ = 0;
  uint64_t last_status_ms_ = 0;
  std::string last_status_;  // the STATUS= text systemd last got, sent again only on change
};

// Caps on concurrent cancel forwarding connections.
inline constexpr size_t kMaxCancelsInFlight = 256;

}  // namespace pgwarden::daemon
