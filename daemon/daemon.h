// The process: the listeners, the signals, the worker loops that own the sessions and pools
// (daemon/worker.h), and what those loops share behind locks.
#pragma once

#include <uv.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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
#include "daemon/console_control.h"
#include "daemon/loop_mailbox.h"
#include "daemon/worker.h"
#include "metrics/counters.h"
#include "net/listener.h"
#include "pool/connection_slots.h"
#include "pool/host_health.h"
#include "pool/pool.h"
#include "net/upstream.h"
#include "net/webhook_client.h"
#include "budgets/budget.h"
#include "guards/policy.h"
#include "guards/untrusted.h"
#include "history/recorder.h"
#include "mcp/mcp_host.h"

namespace pgwarden::session {
class ClientSession;
}  // namespace pgwarden::session

namespace pgwarden::daemon {

class CatalogRefresher;
class DaemonMetrics;
class SystemdNotifier;
}  // namespace pgwarden::daemon
namespace pgwarden::mcp {
class McpServer;
}  // namespace pgwarden::mcp
namespace pgwarden::daemon {

// The process: the listeners and the acceptor, the signals, the worker loops (worker 0 on this
// loop), what the loops share (budgets, the login and startup limiters, cancel keys, catalog
// statistics, the history recorder, metrics), and the MCP endpoint (McpHost), which runs on
// loop 0 over worker 0's pools and recorder.
class Daemon final : public mcp::McpHost {
 public:
  explicit Daemon(std::shared_ptr<const config::Config> config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The service manager to tell about readiness, reloads and shutdown (optional).
  void setNotifier(SystemdNotifier* notifier) { notifier_ = notifier; }
  // `pgwarden --config FILE --log-level LEVEL`: kept over logging.level across reloads.
  void setLogLevelOverride(std::string level) { log_level_override_ = std::move(level); }
  // Binds the listeners and starts the workers; returns false (after logging why) on failure.
  bool start();
  // Runs the loop until shutdown has finished. Returns the process exit code.
  int run();

  uv_loop_t* loop() override { return &loop_; }
  const std::shared_ptr<const config::Config>& config() const { return config_; }
  uint64_t nowMs() const { return uv_now(const_cast<uv_loop_t*>(&loop_)); }
  bool shuttingDown() const { return shutting_down_; }
  const std::string& instanceId() const { return config_->instance_id; }

  // Loop 0's own share (the catalog's pools, its counters, the MCP endpoint's pools).
  Worker& primary() { return *workers_.front(); }
  const Worker& primary() const { return *workers_.front(); }
  const std::vector<std::unique_ptr<Worker>>& workers() const { return workers_; }
  metrics::Counters& counters() { return primary().counters(); }
  pool::PoolManager& pools() { return primary().pools(); }
  // Every loop's summary: loop 0's live, the others' as last published (at most 100 ms old).
  std::vector<WorkerSummary> summaries() const;
  // On loop 0: has every other loop publish its summary, then runs `done` on loop 0 (at once
  // with one loop). A scrape and a readiness check read figures this fresh.
  void refreshSummaries(std::function<void()> done);
  size_t sessionCount() const;

  // Shared by the loops (any thread).
  session::AuthLimiter& authLimiter() { return auth_limiter_; }
  // pool.max_size over every loop's pools (null with one loop, whose pools cap themselves).
  pool::ConnectionSlots* connectionSlots() { return threaded() ? &slots_ : nullptr; }
  // The upstream hosts' health (null without upstream.replicas).
  pool::HostHealth* hostHealth() { return host_health_.get(); }
  budgets::BudgetLedger* budgets() override { return budgets_.get(); }
  guards::ConversationMarks& conversationMarks() { return conversation_marks_; }
  guards::GuardObserver* guardObserver() override;
  DaemonMetrics& metrics() { return *metrics_; }
  uint64_t nextSessionId() override { return next_session_id_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // Catalog statistics for a server database (null until the first refresh succeeds).
  std::shared_ptr<const analysis::TableStatsSnapshot> tableStats(
      const std::string& server_db) override;
  int64_t statsAgeSeconds(const std::string& server_db) override;
  pool::PoolManager* probePools() override { return &pools(); }
  metrics::Counters* probeCounters() override { return &counters(); }
  const CatalogRefresher& catalog() const { return *catalog_; }
  void watchDatabase(const std::string& server_db) override;
  // The first statistics load for `server_db` is under way; the session `session_id` of `w` is
  // told (ClientSession::onStatsReady, on its loop) when it ends.
  bool waitForStats(Worker& w, const std::string& server_db, uint64_t session_id);
  // Cancel keys: a random (pid, key) per session, mapped to its loop and id.
  void registerCancelKey(Worker& w, uint64_t session_id, int32_t& pid, int32_t& key);
  void unregisterCancelKey(int32_t pid, int32_t key);
  // A client's CancelRequest, arriving on loop `from`: run on the loop owning the session.
  void routeCancel(Worker& from, int32_t pid, int32_t key);
  // The limits on connections that have not logged in, applied to a new session of `w`.
  void admitStartup(Worker& w, session::ClientSession& s);
  void leftStartup(uint64_t id);
  // History: never blocks; a record refused by a full queue is counted in `counters`.
  void submitRecord(history::RecordView& record, metrics::Counters& counters);
  // The thread of worker `w` starts; the loops' budget stores are told apart by it.
  void enterWorkerThread(Worker& w);
  void releaseBudgetStores(Worker& w);
  // Shutdown: whether `w` may let go of its share now (loop 0 waits for the MCP calls), and
  // that it has.
  bool workerMayFinish(const Worker& w) const;
  void workerFinished(Worker& w);

  // The session with this id on whichever loop (the admin console's KILL): runs `fn` there.
  void withSession(uint64_t id, std::function<void(session::ClientSession&)> fn);

  // McpHost (daemon/daemon_mcp.cpp)
  std::optional<mcp::McpIdentity> identify(const std::string& user) override;
  std::optional<mcp::McpIdentity> identifyInGroup(const std::string& user,
                                                  const std::string& group) override;
  session::GateServices gateServices(const std::string& server_database) override;
  session::StatementRecorder& recorder() override;
  pool::Pool& pool(const std::string& server_database, bool replica_ok) override;
  pool::Pool& writePool(const std::string& server_database) override;
  void writeTransactionEnded(session::TxnEnd how) override;
  void writeCounted(int64_t rows_written, bool undone) override;
  bool statsLoading(const std::string& server_database) override;
  session::AuthLimiter::Block loginBlocked(const std::string& peer_host,
                                           const std::string& credential) override;
  void loginFailed(const std::string& peer_host, const std::string& credential) override;
  void cancelServerQuery(int32_t server_pid, int32_t server_key,
                         std::shared_ptr<pool::CancelFence> fence) override;
  // The MCP endpoint (null when mcp.listen is not set).
  const mcp::McpServer* mcpServer() const { return mcp_.get(); }
  // Starts a graceful shutdown (SIGTERM: shutdown_timeout; fast, SIGINT: a shorter one).
  void requestShutdown(bool fast);
  // SHUTDOWN WAIT_FOR_CLIENTS: no new connections; the clients connected now go on until they
  // disconnect (no deadline; a signal after it ends them as usual), then the process exits.
  void requestShutdownWaitForClients();
  // The admin console's holds (PAUSE, SUSPEND, DISABLE), read by every loop.
  ConsoleControl& control() { return control_; }
  bool consoleHeld(const std::string& database) const override {
    const session::ConsoleHolds h = control_.holds(database);
    return h.paused || h.suspended;
  }
  void statementRunning(int delta) override { mcp_running_.fetch_add(delta); }
  // MCP statements running now (past PAUSE's hold): PAUSE waits for them to finish.
  int mcpRunning() const { return mcp_running_.load(); }
  // Any thread: runs `fn` on every loop, each on its own thread (loops that finished are skipped).
  void onEveryLoop(const std::function<void(Worker&)>& fn);
  // Re-reads the config file; on success new sessions on every loop use the new config (SIGHUP).
  // False: the file was rejected and the running configuration is kept.
  bool reload();
  // Any thread: runs `task` on loop 0 (false once loop 0 has finished).
  bool postToLoop0(LoopMailbox::Task task) { return mailbox_.post(std::move(task)); }
  // Loop 0: the catalog snapshots read again now (SIGHUP, the console's REFRESH CATALOG).
  void refreshCatalog();

 private:
  // Adopts sockets inherited from systemd and binds the configured addresses they leave out.
  bool startListeners(const net::ListenConfig& listen, const std::string& metrics_listen);
  void onConnection(net::Listener& l);
  // The loop a new connection goes to: the one with the fewest sessions.
  Worker& leastLoaded();
  void handOver(net::Listener& l, Worker& to);
  // Shutdown with so_reuseport or WAIT_FOR_CLIENTS: serves the connections still queued on the
  // TCP listeners before they close.
  void drainListeners();
  void tick();
  void sweep();
  void finishShutdownIfDone();
  void publishStats();
  bool threaded() const { return workers_.size() > 1; }

  static void onJanitor(uv_timer_t* t);
  static void onCheck(uv_check_t* c);
  static void onSignal(uv_signal_t* s, int signum);
  static void onShutdownGrace(uv_timer_t* t);
  static void onHandleClosed(uv_handle_t* h);
  static constexpr uint64_t kShutdownGraceMs = 500;

  uv_loop_t loop_;
  std::shared_ptr<const config::Config> config_;
  ConsoleControl control_;
  session::AuthLimiter auth_limiter_;
  std::mutex startup_mu_;  // the startup limiter and its log throttles
  session::StartupLimiter startup_limiter_;
  std::array<LogThrottle, 4> startup_log_;  // admitStartup's lines: evicted, and each refusal
  SaltKey salt_key_;
  std::mutex recorder_mu_;  // the recorder's queue takes one producer at a time
  std::unique_ptr<history::Recorder> recorder_;
  std::vector<std::unique_ptr<net::Listener>> listeners_;
  struct CancelOwner {
    Worker* worker;
    uint64_t session_id;
  };
  std::mutex cancel_mu_;
  std::unordered_map<uint64_t, CancelOwner> cancel_keys_;
  std::unique_ptr<CatalogRefresher> catalog_;
  // What the other loops read of the catalog (loop 0 reads the refresher itself): the snapshots,
  // the databases still loading and who waits for them, published by loop 0's janitor.
  struct StatsBoard {
    std::map<std::string, std::shared_ptr<const analysis::TableStatsSnapshot>, std::less<>>
        snapshots;
    std::map<std::string, std::vector<std::pair<Worker*, uint64_t>>, std::less<>> loading;
  };
  mutable std::mutex stats_mu_;
  StatsBoard stats_board_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<budgets::BudgetLedger> budgets_;
  // The conversations that have read untrusted content: the process's, so a reload keeps them.
  guards::ConversationMarks conversation_marks_;
  std::unique_ptr<mcp::McpServer> mcp_;
  pool::ConnectionSlots slots_;                    // outlives the workers' pools
  std::unique_ptr<pool::HostHealth> host_health_;  // with upstream.replicas; outlives the pools
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<size_t> next_worker_{0};
  std::atomic<uint64_t> next_session_id_{0};
  std::atomic<int> mcp_running_{0};  // loop 0's MCP statements past the console's hold
  std::atomic<int> workers_running_{0};
  LoopMailbox mailbox_;  // loop 0's, for the workers' news
  uv_timer_t janitor_;
  uv_check_t check_;
  uv_signal_t sig_term_;
  uv_signal_t sig_int_;
  uv_signal_t sig_hup_;
  int handles_open_ = 0;
  bool shutting_down_ = false;
  bool stopping_loop_ = false;
  uint64_t shutdown_deadline_ms_ = 0;
  SystemdNotifier* notifier_ = nullptr;
  std::string log_level_override_;
  uint64_t last_watchdog_ms_ = 0;
  uint64_t last_status_ms_ = 0;
  std::string last_status_;  // the STATUS= text systemd last got, sent again only on change
};

// Caps on concurrent cancel forwarding connections.
inline constexpr size_t kMaxCancelsInFlight = 256;

}  // namespace pgwarden::daemon
