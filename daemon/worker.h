// One event loop of the process and everything it owns: its client sessions, its server pools,
// its analyzer and statement recorder, its webhook client and cancel forwarders, its janitor.
// Worker 0 runs on the daemon's own loop (with the listeners, the MCP and metrics endpoints);
// with `daemon.workers` above 1 the others run a loop each on a thread of their own, and the
// acceptor hands them connections through their mailbox. What loops share (the configuration
// in force, budgets, the login and startup limiters, cancel keys, catalog statistics, history,
// metrics) the daemon keeps behind locks; nothing a loop owns is touched by another thread.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/console_rows.h"
#include "daemon/loop_mailbox.h"
#include "metrics/counters.h"
#include "net/upstream.h"
#include "net/webhook_client.h"
#include "pool/pool.h"
#include "session/session_host.h"
#include "session/statement_policy.h"
#include "session/statement_recorder.h"

namespace pgwarden::mcp {
class McpServer;
}  // namespace pgwarden::mcp

namespace pgwarden::net {
class Listener;
}  // namespace pgwarden::net

namespace pgwarden::session {
class ClientSession;
}  // namespace pgwarden::session

namespace pgwarden::daemon {

class Daemon;

// What a loop shows the others: refreshed by its janitor (every 100 ms) and read under a lock by
// the metrics endpoint and the admin console, which live on loop 0.
struct WorkerSummary {
  metrics::Counters counters;
  std::vector<pool::PoolStats> pools;
  std::string pool_refusal;
  // Client sessions by state, indexed as kClientStateLabels (daemon/daemon_metrics.h).
  std::array<uint64_t, 5> client_states{};
  size_t sessions = 0;
  size_t server_connections = 0;
};

class Worker final : public session::StatementSink, public session::SessionHost {
 public:
  // `index` 0 runs on `daemon`'s loop; any other makes a loop of its own, run by start().
  Worker(Daemon& daemon, int index, std::shared_ptr<const config::Config> config,
         std::string salt_key);
  ~Worker() override;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int index() const { return index_; }
  // Opens the loop's handles; a worker of its own loop also starts its thread.
  bool start();
  // Waits for the thread of a worker with a loop of its own (after its shutdown finished).
  void join();
  // Any thread: runs `task` on this loop. False once the loop has finished.
  bool post(LoopMailbox::Task task) { return mailbox_.post(std::move(task)); }

  // The acceptor (loop 0): a connection `listener` has pending, taken on this loop directly
  // (worker 0), or a descriptor accepted there and handed over (any other worker).
  void acceptFrom(net::Listener& listener);
  void adopt(int fd, bool via_unix);
  // Sessions on this loop, counted by the acceptor as it assigns them (least-loaded first).
  int64_t load() const { return load_.load(std::memory_order_relaxed); }
  void assigned() { load_.fetch_add(1, std::memory_order_relaxed); }

  // On this loop.
  // `wait_for_clients`: sessions are not asked to end (SHUTDOWN WAIT_FOR_CLIENTS); only the
  // admin consoles are.
  void beginShutdown(uint64_t deadline_ms, bool wait_for_clients = false);
  void shutdownNow();
  // Lets go of the loop's share once its sessions have ended and the daemon allows it.
  void finishIfDone();
  void applyConfig(std::shared_ptr<const config::Config> config, std::string salt_key);
  session::ClientSession* findSession(uint64_t id);
  void forEachSession(const std::function<void(const session::ClientSession&)>& fn) const;
  size_t sessionCount() const { return sessions_.size(); }
  const metrics::Counters& counters() const { return counters_; }
  // The counters with the figures other parts of the loop keep themselves (the policy engine's
  // kept plans): what the loop publishes and the console shows.
  metrics::Counters countersNow() const;
  // Whether the loop has let go of everything (its sessions ended and its pools closed).
  bool finished() const { return finished_; }
  // On this loop: publishes its summary now (a scrape is about to read it).
  void publish();
  // Any thread: the last summary this loop published.
  WorkerSummary summary() const;
  // Loop 0 reads its own worker live; this is what it gives the metrics then.
  WorkerSummary liveSummary() const;

  // SessionHost
  uv_loop_t* loop() override { return loop_; }
  uint64_t nowMs() const override { return uv_now(loop_); }
  // While the clients are waited for (SHUTDOWN WAIT_FOR_CLIENTS) a session runs as usual: one
  // accepted just before the listeners closed still logs in.
  bool shuttingDown() const override { return shutting_down_ && !wait_for_clients_; }
  const std::shared_ptr<const config::Config>& config() const override { return config_; }
  metrics::Counters& counters() override { return counters_; }
  pool::PoolManager& pools() override { return pools_; }
  session::PolicyEngine& policy() override { return *policy_; }
  session::StatementRecorder& statementRecorder() override { return *statements_; }
  session::AuthLimiter& authLimiter() override;
  const std::string& saltKey() const override { return salt_key_; }
  budgets::BudgetLedger* budgets() override { return budgets_; }
  guards::GuardObserver* guardObserver() override;
  session::GateServices gateServices(const std::string& server_database) override;
  void poolWaited(bool timed_out, std::chrono::nanoseconds waited) override;
  std::shared_ptr<const analysis::TableStatsSnapshot> tableStats(
      const std::string& server_db) override;
  void watchDatabase(const std::string& server_db) override;
  bool waitForStats(const std::string& server_db, uint64_t session_id) override;
  void registerCancelKey(session::ClientSession* s, int32_t& pid, int32_t& key) override;
  void unregisterCancelKey(int32_t pid, int32_t key) override;
  void handleCancelRequest(int32_t pid, int32_t key) override;
  void cancelServerQuery(int32_t server_pid, int32_t server_key,
                         std::shared_ptr<pool::CancelFence> fence) override;
  void leftStartup(uint64_t id) override;
  void onSessionClosed(session::ClientSession* s) override;
  std::unique_ptr<session::ConsoleSession> openConsole(
      uint64_t session_id, const std::string& user, const std::string& client_addr,
      const std::string& application_name) override;
  // StatementSink: this loop's counters, then the process's metrics and history queue.
  void onStatement(history::RecordView& record, const session::StatementPlan* plan) override;

  net::WebhookClient* webhooks() { return webhooks_.get(); }

  // The admin console's control commands, on this loop (daemon/console_commands.cpp).
  session::ConsoleHolds consoleHolds(const std::string& database) const override;
  // RESUME: the messages PAUSE or SUSPEND held go on.
  void consoleResumed();
  // KILL db: the database's client sessions end and its server connections close.
  void killDatabase(const std::string& database);
  // RECONNECT: the server connections of `database` (a client-side name; empty: every
  // database) close once their clients let go.
  void reconnect(const std::string& database);
  // Runs `task` on this loop at the janitor's next tick (at most 100 ms on).
  void runAtNextTick(LoopMailbox::Task task) { next_tick_.push_back(std::move(task)); }
  const std::map<std::string, DatabaseStats, std::less<>>& databaseStats() const { return database_stats_; }
  uint64_t uptimeMs() const { return nowMs() - started_ms_; }
  // Loop 0: the MCP endpoint (null elsewhere, or when it is off).
  const mcp::McpServer* mcpServer() const;

 private:
  session::ClientSession& newSession(bool via_unix);
  void started(session::ClientSession& s, int rc, int fd, const std::string& listener_name);
  void tick();
  void sweep();
  // SHOW STATS: the record's statement counted under its database.
  void countDatabase(const history::RecordView& r);
  void runThread();
  void detachSlots();

  static void onJanitor(uv_timer_t* t);
  static void onShutdownGrace(uv_timer_t* t);
  static void onCheck(uv_check_t* c);

  Daemon& daemon_;
  const int index_;
  std::unique_ptr<uv_loop_t> own_loop_;  // workers other than 0
  uv_loop_t* loop_;
  std::thread thread_;
  std::shared_ptr<const config::Config> config_;
  std::string salt_key_;
  metrics::Counters counters_;
  pool::PoolManager pools_;
  std::unique_ptr<session::PolicyEngine> policy_;
  budgets::BudgetLedger* budgets_;
  std::unique_ptr<session::StatementRecorder> statements_;
  std::unique_ptr<net::WebhookClient> webhooks_;
  std::unordered_map<uint64_t, std::unique_ptr<session::ClientSession>> sessions_;
  std::vector<std::unique_ptr<session::ClientSession>> session_graveyard_;
  std::vector<std::unique_ptr<net::CancelForwarder>> cancels_;
  std::vector<std::unique_ptr<net::CancelForwarder>> cancel_graveyard_;
  LoopMailbox mailbox_;
  uv_timer_t janitor_{};
  uv_check_t check_{};
  std::atomic<int64_t> load_{0};
  bool shutting_down_ = false;
  bool wait_for_clients_ = false;
  uint64_t shutdown_deadline_ms_ = 0;
  bool finished_ = false;
  bool started_ = false;
  int slot_loop_ = -1;  // this loop's index in the daemon's ConnectionSlots (several loops)
  mutable std::mutex summary_mu_;
  WorkerSummary summary_;
  std::vector<LoopMailbox::Task> next_tick_;  // runAtNextTick (one per waiting console at most)
  std::map<std::string, DatabaseStats, std::less<>> database_stats_;
  uint64_t started_ms_ = 0;
};

}  // namespace pgwarden::daemon
