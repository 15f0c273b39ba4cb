// Worker: one loop's sessions and pools. Accept (directly or from a handed-over descriptor), the
// janitor (session deadlines, pool idle timeouts, cancel deadlines, the published summary), the
// shutdown of the loop's share, and the SessionHost calls, answered from what the loop owns or
// from the daemon's shared services.
#include "daemon/worker.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "budgets/budget.h"
#include "budgets/budget_store_pg.h"
#include "common/log_text.h"
#include "daemon/admin_console.h"
#include "daemon/daemon.h"
#include "daemon/daemon_metrics.h"
#include "net/listener.h"
#include "pool/server_conn.h"
#include "session/client_session.h"

namespace pgwarden::daemon {

namespace {

constexpr uint64_t kLoopJanitorMs = 100;
constexpr uint64_t kCancelTimeoutMs = 5000;
constexpr uint64_t kLoopGraceMs = 500;

}  // namespace

Worker::Worker(Daemon& daemon, int index, std::shared_ptr<const config::Config> config,
               std::string salt_key)
    : daemon_(daemon),
      index_(index),
      own_loop_(index == 0 ? nullptr : std::make_unique<uv_loop_t>()),
      loop_(index == 0 ? daemon.loop() : own_loop_.get()),
      config_(std::move(config)),
      salt_key_(std::move(salt_key)),
      pools_(loop_, counters_, std::make_unique<pool::ServerConnectionFactory>()),
      budgets_(daemon.budgets()) {
  if (own_loop_) uv_loop_init(loop_);
  pools_.setHealth(daemon.hostHealth());
  pools_.setConfig(config::poolSettings(*config_));
  // With redact_literals the history writer normalizes a statement before it cuts it, so it gets
  // the whole text (and bounds it itself); otherwise records keep history.max_sql_bytes of it.
  policy_ = std::make_unique<session::PolicyEngine>(
      4096, config_->history.redact_literals ? 0 : config_->history.max_sql_bytes);
  webhooks_ = std::make_unique<net::WebhookClient>(loop_, net::WebhookClient::Options{});
  statements_ = std::make_unique<session::StatementRecorder>(*this, budgets_, config_->instance_id);
}

Worker::~Worker() {
  webhooks_.reset();
  statements_->setBudgets(nullptr);
  pools_.close();
  detachSlots();
  mailbox_.close();
  auto* janitor = reinterpret_cast<uv_handle_t*>(&janitor_);
  if (janitor_.loop == loop_ && !uv_is_closing(janitor)) uv_close(janitor, nullptr);
  auto* check = reinterpret_cast<uv_handle_t*>(&check_);
  if (check_.loop == loop_ && !uv_is_closing(check)) uv_close(check, nullptr);
  uv_run(loop_, UV_RUN_NOWAIT);
  sessions_.clear();
  session_graveyard_.clear();
  cancels_.clear();
  cancel_graveyard_.clear();
  pools_.sweep();
  if (own_loop_) {
    uv_run(loop_, UV_RUN_NOWAIT);
    uv_loop_close(loop_);
  }
}

bool Worker::start() {
  if (const int rc = mailbox_.open(loop_); rc != 0) {
    spdlog::error("worker {}: cannot open its mailbox: {}", index_, uv_strerror(rc));
    return false;
  }
  // With several loops pool.max_size caps every loop's pools together: a slot one loop frees is
  // offered to the loop that waits for it, woken through its mailbox.
  if (pool::ConnectionSlots* slots = daemon_.connectionSlots()) {
    slot_loop_ = slots->attach([this] {
      (void)mailbox_.post([this] { pools_.onSlotFreed(); });
    });
    pools_.setSlots(slots, slot_loop_);
  }
  uv_timer_init(loop_, &janitor_);
  janitor_.data = this;
  uv_timer_start(&janitor_, &Worker::onJanitor, kLoopJanitorMs, kLoopJanitorMs);
  uv_check_init(loop_, &check_);
  check_.data = this;
  uv_check_start(&check_, &Worker::onCheck);
  publish();
  started_ = true;
  started_ms_ = nowMs();
  if (own_loop_) thread_ = std::thread([this] { runThread(); });
  return true;
}

void Worker::detachSlots() {
  if (slot_loop_ < 0) return;
  daemon_.connectionSlots()->detach(slot_loop_);
  slot_loop_ = -1;
}

void Worker::runThread() {
  // The shared budget stores this loop opens are this loop's (budgets/budget_store_pg.h).
  daemon_.enterWorkerThread(*this);
  uv_run(loop_, UV_RUN_DEFAULT);
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

session::ClientSession& Worker::newSession(bool via_unix) {
  const uint64_t id = daemon_.nextSessionId();
  auto s = std::make_unique<session::ClientSession>(*this, id, via_unix);
  session::ClientSession* raw = s.get();
  sessions_.emplace(id, std::move(s));
  ++counters_.clients_accepted;
  return *raw;
}

void Worker::acceptFrom(net::Listener& l) {
  assigned();
  const int fd = l.acceptedFd();
  session::ClientSession& s = newSession(l.isUnix());
  started(s, s.accept(l.handle()), fd, l.name());
}

void Worker::adopt(int fd, bool via_unix) {
  session::ClientSession& s = newSession(via_unix);
  started(s, s.adopt(fd), fd, "a handed-over connection");
}

void Worker::started(session::ClientSession& s, int rc, int fd, const std::string& listener_name) {
  if (rc != 0) {
    spdlog::warn("accept on {} failed: {}", listener_name, uv_strerror(rc));
    if (s.state() == session::ClientState::kStartup) {  // no handle was opened
      sessions_.erase(s.id());
      load_.fetch_sub(1, std::memory_order_relaxed);
    }
    return;
  }
  // Near RLIMIT_NOFILE, refuse new clients while descriptors remain for the server connections,
  // history and metrics of the sessions already in; otherwise libuv would close connections
  // silently once accept() fails with EMFILE.
  rlimit lim{};
  if (fd >= 0 && getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const rlim_t reserve = std::max<rlim_t>(16, lim.rlim_cur / 32);
    if (static_cast<rlim_t>(fd) + reserve >= lim.rlim_cur) {
      spdlog::warn(
          "s{} peer={}: refused: out of file descriptors (descriptor {} of a limit of {}, "
          "{} kept for open sessions); raise LimitNOFILE",
          s.id(), logsafe(s.peer()), fd, static_cast<uint64_t>(lim.rlim_cur),
          static_cast<uint64_t>(reserve));
      s.rejectAfterStartup("53300", "sorry, too many clients already: pgwarden is out of file "
                           "descriptors", metrics::RejectReason::kMaxConnections);
      return;
    }
  }
  daemon_.admitStartup(*this, s);
}

session::ClientSession* Worker::findSession(uint64_t id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void Worker::forEachSession(const std::function<void(const session::ClientSession&)>& fn) const {
  for (const auto& [id, s] : sessions_) fn(*s);
}

void Worker::onSessionClosed(session::ClientSession* s) {
  auto it = sessions_.find(s->id());
  if (it == sessions_.end()) return;
  session_graveyard_.push_back(std::move(it->second));
  sessions_.erase(it);
  load_.fetch_sub(1, std::memory_order_relaxed);
}

void Worker::leftStartup(uint64_t id) { daemon_.leftStartup(id); }

session::AuthLimiter& Worker::authLimiter() { return daemon_.authLimiter(); }

guards::GuardObserver* Worker::guardObserver() { return daemon_.guardObserver(); }

void Worker::poolWaited(bool timed_out, std::chrono::nanoseconds waited) {
  daemon_.metrics().poolWait(timed_out, waited);
}

session::GateServices Worker::gateServices(const std::string& server_database) {
  session::GateServices services;
  services.policy = policy_.get();
  services.webhooks = webhooks_.get();
  services.budgets = budgets_;
  services.stats = [this, server_database] { return tableStats(server_database); };
  services.marks = &daemon_.conversationMarks();
  return services;
}

std::shared_ptr<const analysis::TableStatsSnapshot> Worker::tableStats(
    const std::string& server_db) {
  return daemon_.tableStats(server_db);
}

void Worker::watchDatabase(const std::string& server_db) {
  if (!shutting_down_) daemon_.watchDatabase(server_db);
}

bool Worker::waitForStats(const std::string& server_db, uint64_t session_id) {
  return daemon_.waitForStats(*this, server_db, session_id);
}

void Worker::registerCancelKey(session::ClientSession* s, int32_t& pid, int32_t& key) {
  daemon_.registerCancelKey(*this, s->id(), pid, key);
}

void Worker::unregisterCancelKey(int32_t pid, int32_t key) { daemon_.unregisterCancelKey(pid, key); }

void Worker::handleCancelRequest(int32_t pid, int32_t key) { daemon_.routeCancel(*this, pid, key); }

void Worker::cancelServerQuery(int32_t server_pid, int32_t server_key,
                               std::shared_ptr<pool::CancelFence> fence) {
  if (cancels_.size() >= kMaxCancelsInFlight) {
    spdlog::warn("cancel request dropped: {} already in flight", cancels_.size());
    return;
  }
  ++counters_.cancel_requests_forwarded;
  auto f = std::make_unique<net::CancelForwarder>(
      loop_, config_->upstream, server_pid, server_key, [this, fence](net::CancelForwarder* done) {
        if (fence) fence->done();
        for (auto it = cancels_.begin(); it != cancels_.end(); ++it) {
          if (it->get() == done) {
            cancel_graveyard_.push_back(std::move(*it));
            cancels_.erase(it);
            return;
          }
        }
      });
  if (fence) fence->sent();
  net::CancelForwarder* raw = f.get();
  raw->setDeadline(nowMs() + kCancelTimeoutMs);
  cancels_.push_back(std::move(f));
  raw->start();
}

std::unique_ptr<session::ConsoleSession> Worker::openConsole(uint64_t session_id,
                                                             const std::string& user,
                                                             const std::string& client_addr,
                                                             const std::string& application_name) {
  auto console = std::make_unique<AdminConsole>(daemon_, *this, session_id, user);
  console->setClient(client_addr, application_name);
  return console;
}

void Worker::onStatement(history::RecordView& record, const session::StatementPlan* plan) {
  countDatabase(record);
  counters_.statement(record.outcome);
  if (record.truncated) ++counters_.statements_truncated;
  daemon_.metrics().onStatement(record, plan);
  daemon_.submitRecord(record, counters_);
}

void Worker::applyConfig(std::shared_ptr<const config::Config> config, std::string salt_key) {
  config_ = std::move(config);
  salt_key_ = std::move(salt_key);
  pools_.setConfig(config::poolSettings(*config_));
}

void Worker::beginShutdown(uint64_t deadline_ms, bool wait_for_clients) {
  if (!started_) return;
  std::vector<session::ClientSession*> to_end;
  if (shutting_down_) {
    if (!wait_for_clients && wait_for_clients_) {
      // A signal after SHUTDOWN WAIT_FOR_CLIENTS: the usual shutdown from here on.
      wait_for_clients_ = false;
      for (auto& [id, s] : sessions_) to_end.push_back(s.get());
    }
    shutdown_deadline_ms_ = std::min(shutdown_deadline_ms_, deadline_ms);
    for (session::ClientSession* s : to_end) s->beginShutdown();
    tick();
    return;
  }
  shutting_down_ = true;
  wait_for_clients_ = wait_for_clients;
  shutdown_deadline_ms_ = deadline_ms;
  std::vector<session::ClientSession*> all;
  for (auto& [id, s] : sessions_) all.push_back(s.get());
  for (session::ClientSession* s : all) {
    if (!wait_for_clients || s->isConsole()) s->beginShutdown();
  }
  finishIfDone();
}

void Worker::shutdownNow() { beginShutdown(nowMs()); }

void Worker::finishIfDone() {
  if (!shutting_down_ || finished_ || !sessions_.empty() || !daemon_.workerMayFinish(*this)) return;
  finished_ = true;
  pools_.closeAll("pgwarden is shutting down");
  webhooks_.reset();
  statements_->setBudgets(nullptr);
  budgets_ = nullptr;
  daemon_.releaseBudgetStores(*this);
  for (auto& c : cancels_) c->close();
  publish();
  uv_check_stop(&check_);
  uv_close(reinterpret_cast<uv_handle_t*>(&check_), nullptr);
  pools_.close();
  detachSlots();
  mailbox_.close();
  uv_timer_stop(&janitor_);
  if (own_loop_) {
    // A loop of its own ends when its last handle closes; whatever still holds it after a short
    // grace (a server login in flight, a late close) does not keep the thread alive.
    uv_timer_start(&janitor_, &Worker::onShutdownGrace, kLoopGraceMs, 0);
    uv_unref(reinterpret_cast<uv_handle_t*>(&janitor_));
  } else {
    uv_close(reinterpret_cast<uv_handle_t*>(&janitor_), nullptr);
  }
  daemon_.workerFinished(*this);
}

void Worker::onShutdownGrace(uv_timer_t* t) {
  auto* self = static_cast<Worker*>(t->data);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->janitor_), nullptr);
  uv_stop(self->loop_);
}

void Worker::tick() {
  const uint64_t now = nowMs();
  if (!next_tick_.empty()) {
    auto tasks = std::move(next_tick_);
    next_tick_.clear();
    for (auto& t : tasks) t();
  }
  std::vector<session::ClientSession*> all;
  all.reserve(sessions_.size());
  for (auto& [id, s] : sessions_) all.push_back(s.get());
  const bool overdue = shutting_down_ && now >= shutdown_deadline_ms_;
  for (session::ClientSession* s : all) {
    if (overdue && s->state() != session::ClientState::kClosing &&
        s->state() != session::ClientState::kClosed) {
      // The client (and the statement's history record) learn why the statement never finished.
      s->terminate("57P01",
                   "terminating connection: pgwarden is shutting down and the statement did not "
                   "finish within limits.shutdown_timeout");
    }
    s->tick(now);
  }
  if (overdue) pools_.closeAll("pgwarden is shutting down");
  pools_.tick(now);
  std::vector<net::CancelForwarder*> cancels;
  for (auto& c : cancels_) cancels.push_back(c.get());
  for (net::CancelForwarder* c : cancels) {
    if (now >= c->deadlineMs()) c->close();
  }
  if (index_ != 0) publish();
}

metrics::Counters Worker::countersNow() const {
  metrics::Counters c = counters_;
  c.plan_cache_hits = policy_->planCacheHits();
  c.plan_cache_misses = policy_->planCacheMisses();
  c.plan_shape_hits = policy_->planShapeHits();
  return c;
}

WorkerSummary Worker::liveSummary() const {
  WorkerSummary s;
  s.counters = countersNow();
  s.pools = pools_.stats();
  s.pool_refusal = pools_.refusal();
  s.sessions = sessions_.size();
  s.server_connections = pools_.openConnections();
  for (const auto& [id, session] : sessions_) ++s.client_states[clientStateIndex(*session)];
  return s;
}

void Worker::publish() {
  WorkerSummary s = liveSummary();
  std::lock_guard lock(summary_mu_);
  summary_ = std::move(s);
}

WorkerSummary Worker::summary() const {
  std::lock_guard lock(summary_mu_);
  return summary_;
}

void Worker::sweep() {
  session_graveyard_.clear();
  cancel_graveyard_.clear();
  pools_.sweep();
  finishIfDone();
}

void Worker::onJanitor(uv_timer_t* t) { static_cast<Worker*>(t->data)->tick(); }

void Worker::onCheck(uv_check_t* c) { static_cast<Worker*>(c->data)->sweep(); }

}  // namespace pgwarden::daemon
