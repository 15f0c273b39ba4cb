// Daemon: loop 0's setup, listeners and the acceptor, the workers, janitor, signals, graceful
// shutdown, and the services the loops share: the startup limiter, cancel-key routing, catalog
// statistics for the other loops, history submission, and reload.
#include "daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/log_text.h"
#include "budgets/budget_store_pg.h"
#include "daemon/admin_console.h"
#include "daemon/catalog_stats.h"
#include "pool/server_conn.h"
#include "session/client_session.h"
#include "daemon/daemon_metrics.h"
#include "mcp/mcp_server.h"
#include "pgwarden_version.h"
#include "daemon/systemd_notify.h"
#include "protocol/auth.h"

namespace pgwarden::daemon {

namespace {

constexpr uint64_t kJanitorMs = 100;
constexpr uint64_t kSigintShutdownMs = 3000;
constexpr int kBacklog = 512;

// The loop the calling thread runs (the shared budget stores are made on it).
thread_local uv_loop_t* t_loop = nullptr;

uv_loop_t* currentWorkerLoop() { return t_loop; }

uint64_t cancelMapKey(int32_t pid, int32_t key) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pid)) << 32) | static_cast<uint32_t>(key);
}

}  // namespace

Daemon::Daemon(std::shared_ptr<const config::Config> config) : config_(std::move(config)) {
  uv_loop_init(&loop_);
  loop_.data = this;
  catalog_ = std::make_unique<CatalogRefresher>(*this);
  metrics_ = std::make_unique<DaemonMetrics>(*this);
  budgets_ = std::make_unique<budgets::BudgetLedger>();
  // A shared budget store runs on the loop that first needs it: one libpq connection per loop.
  budgets_->setStoreFactory([](const budgets::BudgetStoreConfig& cfg) {
    return std::make_unique<budgets::BudgetStorePg>(currentWorkerLoop(), cfg);
  });
  std::memset(&janitor_, 0, sizeof(janitor_));
  std::memset(&check_, 0, sizeof(check_));
  if (!config_->upstream.replicas.empty()) {
    host_health_ = std::make_unique<pool::HostHealth>(config_->upstream);
  }
  const int n = std::max(1, config_->daemon.workers);
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>(*this, i, config_, ""));
  enterWorkerThread(primary());
  metrics_->setThreaded(n > 1);
}

Daemon::~Daemon() {
  // run() returns only once every handle is closed; a Daemon that never ran has its timers and
  // signals uninitialized. Give libuv a last chance to finish close callbacks either way.
  mcp_.reset();
  // After run() every loop has finished; otherwise (start() failed) the started ones end now.
  for (size_t i = 1; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    (void)w->post([w] { w->shutdownNow(); });
    w->join();
  }
  workers_running_ = 0;
  primary().shutdownNow();
  metrics_->close();
  mailbox_.close();
  // The janitor is unreferenced during shutdown: when every other handle closes before its
  // grace period ends, uv_run returns with it still open, and the loop could not be closed.
  auto* janitor = reinterpret_cast<uv_handle_t*>(&janitor_);
  if (janitor_.loop == &loop_ && !uv_is_closing(janitor)) uv_close(janitor, &Daemon::onHandleClosed);
  uv_run(&loop_, UV_RUN_NOWAIT);
  workers_.clear();
  budgets_.reset();
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_loop_close(&loop_);
}

bool Daemon::start() {
  const auto& cfg = *config_;
  salt_key_ = loadSaltKey(cfg.auth);
  if (!salt_key_.warning.empty()) spdlog::warn("{}", salt_key_.warning);
  if (const std::string e = giveMaskKey(cfg, true); !e.empty()) {
    spdlog::error("{}", e);
    return false;
  }
  for (auto& w : workers_) w->applyConfig(config_, salt_key_.key);
  try {
    if (cfg.history.store != "off") recorder_ = history::makeRecorder(cfg.history);
    metrics_->setRecorder(recorder_.get(), cfg.history.store);
  } catch (const std::exception& e) {
    spdlog::error("cannot open the history store ({}): {}", cfg.history.store, e.what());
    return false;
  }

  if (!startListeners(cfg.listen, cfg.metrics.listen)) return false;

  if (!metrics_->start()) return false;
  if (host_health_) host_health_->start();
  if (cfg.mcp.enabled()) {
    mcp_ = std::make_unique<mcp::McpServer>(&loop_, *this, cfg.mcp, kVersion,
                                            cfg.mcp.tls ? cfg.tls.context : nullptr);
    if (auto st = mcp_->start(); !st.ok()) {
      spdlog::error("cannot start the MCP endpoint: {}", st.error());
      mcp_.reset();
      return false;
    }
  }
  uv_timer_init(&loop_, &janitor_);
  janitor_.data = this;
  uv_timer_start(&janitor_, &Daemon::onJanitor, kJanitorMs, kJanitorMs);
  uv_check_init(&loop_, &check_);
  check_.data = this;
  uv_check_start(&check_, &Daemon::onCheck);
  uv_signal_init(&loop_, &sig_term_);
  uv_signal_init(&loop_, &sig_int_);
  uv_signal_init(&loop_, &sig_hup_);
  sig_term_.data = sig_int_.data = sig_hup_.data = this;
  uv_signal_start(&sig_term_, &Daemon::onSignal, SIGTERM);
  uv_signal_start(&sig_int_, &Daemon::onSignal, SIGINT);
  uv_signal_start(&sig_hup_, &Daemon::onSignal, SIGHUP);
  handles_open_ = 5;
  if (const int rc = mailbox_.open(&loop_); rc != 0) {
    spdlog::error("cannot open loop 0's mailbox: {}", uv_strerror(rc));
    return false;
  }
  for (auto& w : workers_) {
    if (!w->start()) return false;
    if (w->index() > 0) workers_running_.fetch_add(1);
  }
  if (threaded()) spdlog::info("{} worker loops serve client connections", workers_.size());

  // Statistics for the databases the config names are loaded before the first client asks.
  for (const auto& [client_db, server_db] : cfg.upstream.databases) {
    if (server_db != "*") catalog_->watch(server_db);
  }
  return true;
}

bool Daemon::startListeners(const net::ListenConfig& listen, const std::string& metrics_listen) {
  // Socket activation (pgwarden.socket): systemd's sockets replace binding; configured
  // addresses it did not pass are bound here as usual. See docs/operations.md.
  auto inherited = listenFds();
  if (!inherited) {
    spdlog::error("socket activation: {}", inherited.error());
    return false;
  }
  if (listen.so_reuseport && !listen.addresses.empty()) net::noteReuseportMigration();
  std::vector<std::string> configured;
  for (const auto& addr : listen.addresses) {
    configured.push_back(socketAddressText(addr.host, addr.port));
  }
  std::string unix_path;
  if (!listen.unix_socket_dir.empty()) {
    std::string dir = listen.unix_socket_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    unix_path = dir + "/.s.PGSQL." + std::to_string(listen.unix_socket_port);
    configured.push_back(unix_path);
  }
  std::vector<std::string> refused;
  if (auto m = parseListenAddress(metrics_listen); m.ok()) {
    for (const auto& a : *m) refused.push_back(socketAddressText(a.host, a.port));
  }
  auto plan = planListeners(*inherited, configured, refused);
  if (!plan) {
    spdlog::error("socket activation: {}", plan.error());
    return false;
  }
  const auto add = [this](std::unique_ptr<net::Listener> l, int rc, const std::string& err) {
    const bool ok = rc == 0;
    if (ok) {
      spdlog::info("listening on {}", l->name());
    } else {
      spdlog::error("{}", err);
      l->close();
    }
    listeners_.push_back(std::move(l));
    return ok;
  };
  std::string passed;
  for (const auto& a : plan->adopt) {
    auto l = std::make_unique<net::Listener>(&loop_, [this](net::Listener& x) { onConnection(x); });
    std::string err;
    const int rc = l->listenFd(a.socket.fd, a.socket.family == AF_UNIX, kBacklog,
                               a.socket.localAddress, err);
    if (!add(std::move(l), rc, err)) return false;
    spdlog::info("{} is socket {} ({}) from the service manager", a.socket.localAddress,
                 a.socket.fd, a.socket.name);
    if (!a.configured) {
      spdlog::warn("inherited socket {} ({}) is not in the config's listen section; serving it "
                   "anyway", a.socket.localAddress, a.socket.name);
    }
    passed += (passed.empty() ? "" : ", ") + a.socket.localAddress;
  }
  // A configured address the socket unit left out is bound here; when it collides with one the
  // unit did pass (a dual-stack "[::]:6432" covers "0.0.0.0:6432"), the error says so.
  const auto hint = [&passed](int rc) {
    if (passed.empty() || rc != UV_EADDRINUSE) return std::string();
    return " (the socket unit passed " + passed + "; list this address in it or remove it from "
           "listen)";
  };
  for (size_t i = 0; i < listen.addresses.size(); ++i) {
    if (!plan->bind[i]) continue;
    auto l = std::make_unique<net::Listener>(&loop_, [this](net::Listener& x) { onConnection(x); });
    std::string err;
    const int rc = l->listenTcp(listen.addresses[i], kBacklog, err, listen.so_reuseport);
    if (!add(std::move(l), rc, err + hint(rc))) return false;
  }
  if (!unix_path.empty() && plan->bind.back()) {
    auto l = std::make_unique<net::Listener>(&loop_, [this](net::Listener& x) { onConnection(x); });
    std::string err;
    const int rc = l->listenUnix(unix_path, kBacklog, listen.unix_socket_mode,
                                 listen.unix_socket_group, err);
    if (!add(std::move(l), rc, err + hint(rc))) return false;
  }
  return true;
}

int Daemon::run() {
  uv_run(&loop_, UV_RUN_DEFAULT);
  for (auto& w : workers_) w->join();
  if (recorder_) {
    // Whatever the shutdown left queued is written before the process exits.
    recorder_->shutdown(std::chrono::milliseconds(5000));
    const auto st = recorder_->stats();
    spdlog::info("history: {} records written, {} dropped", st.written, st.dropped);
  }
  spdlog::info("pgwarden stopped");
  return 0;
}

Worker& Daemon::leastLoaded() {
  // Ties go round: a burst of connections on an idle process spreads over every loop.
  const size_t n = workers_.size();
  const size_t first = next_worker_.fetch_add(1, std::memory_order_relaxed) % n;
  Worker* best = workers_[first].get();
  for (size_t k = 1; k < n; ++k) {
    Worker* w = workers_[(first + k) % n].get();
    if (w->load() < best->load()) best = w;
  }
  return *best;
}

void Daemon::onConnection(net::Listener& l) {
  Worker& to = threaded() ? leastLoaded() : primary();
  if (to.index() == 0) {
    to.acceptFrom(l);
    return;
  }
  handOver(l, to);
}

void Daemon::handOver(net::Listener& l, Worker& to) {
  // The connection is accepted here into a handle of loop 0's and its descriptor duplicated for
  // the worker, which opens a stream of its own loop over it; loop 0's handle then closes.
  struct Accepted {
    union {
      uv_tcp_t tcp;
      uv_pipe_t pipe;
    } h;
  };
  auto* a = new Accepted{};
  const bool via_unix = l.isUnix();
  int rc = via_unix ? uv_pipe_init(&loop_, &a->h.pipe, 0) : uv_tcp_init(&loop_, &a->h.tcp);
  if (rc != 0) {
    delete a;
    spdlog::warn("accept on {} failed: {}", l.name(), uv_strerror(rc));
    return;
  }
  auto* handle = reinterpret_cast<uv_handle_t*>(&a->h);
  const auto release = [](uv_handle_t* h) { delete reinterpret_cast<Accepted*>(h); };
  rc = uv_accept(l.handle(), reinterpret_cast<uv_stream_t*>(handle));
  uv_os_fd_t fd = -1;
  if (rc == 0) rc = uv_fileno(handle, &fd);
  const int dup_fd = rc == 0 ? ::dup(fd) : -1;
  uv_close(handle, release);
  if (dup_fd < 0) {
    spdlog::warn("accept on {} failed: {}", l.name(), rc != 0 ? uv_strerror(rc) : std::strerror(errno));
    return;
  }
  to.assigned();
  if (!to.post([&to, dup_fd, via_unix] { to.adopt(dup_fd, via_unix); })) ::close(dup_fd);
}

void Daemon::admitStartup(Worker& w, session::ClientSession& s) {
  // Every new connection has yet to log in. Those that have not are capped in total and per
  // address, and never take the slots reserved for logged-in sessions; when room is needed,
  // the oldest of them that has had a second to log in is closed (see docs/reliability.md).
  // One limiter for every loop; the sessions are refused or closed after its lock is let go.
  const config::LimitsConfig& limits = w.config()->limits;
  session::StartupLimiter::Limits l;
  l.max_total = static_cast<size_t>(limits.startupCap());
  l.max_per_address = static_cast<size_t>(limits.max_startup_per_address);
  const std::string address = s.viaUnix() ? "" : session::StartupLimiter::addressKey(s.peerHost());
  const uint64_t now = w.nowMs();
  const bool clients_full = sessionCount() > static_cast<size_t>(limits.max_client_connections);
  bool log_evict = false;
  std::string evict_note;
  std::string refusal;
  metrics::RejectReason reason = metrics::RejectReason::kStartupLimit;
  session::StartupLimiter::Decision d;
  {
    std::lock_guard lock(startup_mu_);
    d = startup_limiter_.admit(s.id(), address, now, l, clients_full);
    // A flood would write a line per connection: one line a second per kind, with the count.
    uint64_t left_out = 0;
    const auto more = [&left_out] {
      return left_out == 0 ? std::string() : fmt::format(" ({} more like it in the last second)",
                                                         left_out);
    };
    if (d.evict != 0 && startup_log_[0].allow(now, left_out)) {
      log_evict = true;
      evict_note = more();
    }
    switch (d.verdict) {
      case session::StartupLimiter::Verdict::kAdmit:
        break;
      case session::StartupLimiter::Verdict::kAddressFull:
        if (startup_log_[1].allow(now, left_out)) {
          spdlog::warn("s{} peer={}: refused: {} connections from {} are still starting up "
                       "(limits.max_startup_per_address){}", s.id(), s.peer(),
                       startup_limiter_.countFor(address), address, more());
        }
        refusal = "too many connections still starting up from " + address;
        break;
      case session::StartupLimiter::Verdict::kStartupFull:
        if (startup_log_[2].allow(now, left_out)) {
          spdlog::warn("s{} peer={}: refused: {} connections are still starting up, none for a "
                       "second yet (limits.max_startup_connections){}", s.id(), s.peer(),
                       startup_limiter_.size(), more());
        }
        refusal = "too many connections still starting up";
        break;
      case session::StartupLimiter::Verdict::kClientsFull:
        if (startup_log_[3].allow(now, left_out)) {
          spdlog::warn("s{} peer={}: refused: max_client_connections ({}) reached{}", s.id(),
                       s.peer(), limits.max_client_connections, more());
        }
        refusal = "sorry, too many clients already";
        reason = metrics::RejectReason::kMaxConnections;
        break;
    }
  }
  if (d.evict != 0) {
    const size_t max_total = l.max_total;
    // The connection to close may be another loop's: it is closed there.
    withSession(d.evict, [log_evict, note = std::move(evict_note), max_total,
                          now](session::ClientSession& old) {
      if (log_evict) {
        const uint64_t since = old.connectedAtMs();
        spdlog::warn("s{} peer={}: closed after {} ms without logging in, to make room for a "
                     "new connection (limits.max_startup_connections {}){}", old.id(),
                     old.peer(), now > since ? now - since : 0, max_total, note);
      }
      old.reject("53300", "too many connections still starting up; this one did not log in in "
                 "time", metrics::RejectReason::kStartupLimit);
    });
  }
  if (!refusal.empty()) s.rejectAfterStartup("53300", refusal, reason);
}

void Daemon::leftStartup(uint64_t id) {
  std::lock_guard lock(startup_mu_);
  startup_limiter_.leave(id);
}

void Daemon::withSession(uint64_t id, std::function<void(session::ClientSession&)> fn) {
  for (auto& w : workers_) {
    Worker* wp = w.get();
    if (t_loop == wp->loop()) {
      if (session::ClientSession* s = wp->findSession(id)) fn(*s);
      continue;
    }
    (void)wp->post([wp, id, fn] {
      if (session::ClientSession* s = wp->findSession(id)) fn(*s);
    });
  }
}

void Daemon::enterWorkerThread(Worker& w) { t_loop = w.loop(); }

void Daemon::releaseBudgetStores(Worker& w) {
  (void)w;
  if (budgets_) budgets_->releaseStoresOfThisThread();
}

size_t Daemon::sessionCount() const {
  int64_t n = 0;
  for (const auto& w : workers_) n += w->load();
  return n > 0 ? static_cast<size_t>(n) : 0;
}

std::vector<WorkerSummary> Daemon::summaries() const {
  std::vector<WorkerSummary> out;
  out.reserve(workers_.size());
  for (const auto& w : workers_) out.push_back(w->index() == 0 ? w->liveSummary() : w->summary());
  return out;
}

void Daemon::refreshSummaries(std::function<void()> done) {
  if (!threaded()) {
    done();
    return;
  }
  // Only loop 0 touches the count: every answer comes back through its mailbox.
  auto round = std::make_shared<std::pair<size_t, std::function<void()>>>(workers_.size() - 1,
                                                                          std::move(done));
  const auto answered = [round] {
    if (--round->first == 0) round->second();
  };
  for (size_t i = 1; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    const bool posted = w->post([this, w, answered] {
      w->publish();
      if (!mailbox_.post(answered)) return;  // loop 0 has finished: nobody waits
    });
    if (!posted) (void)mailbox_.post(answered);  // a finished loop's last summary stands
  }
}

int64_t Daemon::statsAgeSeconds(const std::string& server_db) {
  if (t_loop != &loop_) return -1;  // the refresher's clock is loop 0's (the MCP endpoint's)
  int64_t age = -1;
  catalog_->forEachAge([&](const std::string& db, uint64_t age_ms) {
    if (db == server_db) age = static_cast<int64_t>(age_ms / 1000);
  });
  return age;
}

std::shared_ptr<const analysis::TableStatsSnapshot> Daemon::tableStats(
    const std::string& server_db) {
  if (t_loop == &loop_) return catalog_->get(server_db);
  std::lock_guard lock(stats_mu_);
  auto it = stats_board_.snapshots.find(server_db);
  return it == stats_board_.snapshots.end() ? nullptr : it->second;
}

void Daemon::watchDatabase(const std::string& server_db) {
  if (t_loop == &loop_) {
    if (!shutting_down_) catalog_->watch(server_db);
    return;
  }
  {
    // Until loop 0 has started the load, the database counts as loading for the other loops,
    // so their first session on it waits for the statistics as loop 0's would.
    std::lock_guard lock(stats_mu_);
    if (!stats_board_.snapshots.count(server_db) &&
        stats_board_.loading.size() < CatalogRefresher::kMaxDatabases) {
      (void)stats_board_.loading[server_db];
    }
  }
  (void)mailbox_.post([this, server_db] {
    if (!shutting_down_) catalog_->watch(server_db);
    publishStats();
  });
}

bool Daemon::waitForStats(Worker& w, const std::string& server_db, uint64_t session_id) {
  if (t_loop == &loop_) {
    if (!catalog_->loading(server_db)) return false;
    catalog_->notifyWhenLoaded(server_db, session_id);
    return true;
  }
  std::lock_guard lock(stats_mu_);
  auto it = stats_board_.loading.find(server_db);
  if (it == stats_board_.loading.end()) return false;
  it->second.emplace_back(&w, session_id);
  return true;
}

void Daemon::publishStats() {
  if (!threaded()) return;
  std::vector<std::pair<Worker*, uint64_t>> ready;
  {
    std::lock_guard lock(stats_mu_);
    auto& board = stats_board_;
    board.snapshots.clear();
    for (const auto& db : catalog_->databases()) {
      if (auto snap = catalog_->get(db)) board.snapshots.emplace(db, std::move(snap));
      if (catalog_->loading(db)) (void)board.loading[db];
    }
    for (auto it = board.loading.begin(); it != board.loading.end();) {
      // Done (or never started: the refresher keeps no more databases): the waiters go on.
      if (catalog_->loading(it->first)) {
        ++it;
        continue;
      }
      for (auto& wait : it->second) ready.push_back(wait);
      it = board.loading.erase(it);
    }
  }
  for (auto [w, id] : ready) {
    (void)w->post([w, id] {
      if (session::ClientSession* s = w->findSession(id)) s->onStatsReady();
    });
  }
}

void Daemon::registerCancelKey(Worker& w, uint64_t session_id, int32_t& pid, int32_t& key) {
  for (;;) {
    const std::string r = protocol::randomBytes(8);
    uint32_t a = 0;
    uint32_t b = 0;
    std::memcpy(&a, r.data(), 4);
    std::memcpy(&b, r.data() + 4, 4);
    pid = static_cast<int32_t>(a & 0x7fffffffu);
    key = static_cast<int32_t>(b);
    if (pid == 0) continue;
    std::lock_guard lock(cancel_mu_);
    if (cancel_keys_.emplace(cancelMapKey(pid, key), CancelOwner{&w, session_id}).second) return;
  }
}

void Daemon::unregisterCancelKey(int32_t pid, int32_t key) {
  std::lock_guard lock(cancel_mu_);
  cancel_keys_.erase(cancelMapKey(pid, key));
}

void Daemon::routeCancel(Worker& from, int32_t pid, int32_t key) {
  CancelOwner owner{};
  {
    std::lock_guard lock(cancel_mu_);
    auto it = cancel_keys_.find(cancelMapKey(pid, key));
    if (it == cancel_keys_.end()) {
      spdlog::debug("cancel request with an unknown key ignored");
      return;
    }
    owner = it->second;
  }
  const auto cancel = [owner] {
    if (session::ClientSession* s = owner.worker->findSession(owner.session_id))
      s->cancelFromClient();
  };
  if (owner.worker == &from) {
    cancel();
    return;
  }
  spdlog::debug("cancel request for s{} routed from loop {} to loop {}", owner.session_id,
                from.index(), owner.worker->index());
  if (!owner.worker->post(cancel)) spdlog::debug("cancel request for a loop that has finished ignored");
}

void Daemon::submitRecord(history::RecordView& record, metrics::Counters& counters) {
  if (!recorder_) return;
  ++counters.history_submitted;
  bool queued = false;
  {
    std::unique_lock lock(recorder_mu_, std::defer_lock);
    if (threaded()) lock.lock();
    queued = recorder_->submit(record);
  }
  if (!queued) ++counters.history_dropped;
}

bool Daemon::workerMayFinish(const Worker& w) const {
  if (w.index() != 0) return true;
  // Loop 0 goes last: the MCP calls still running use its pools, and the other loops' news
  // (finished, statistics) come through its mailbox.
  if (mcp_ && mcp_->callsInFlight() > 0) return false;
  return workers_running_.load() == 0;
}

void Daemon::workerFinished(Worker& w) {
  if (w.index() == 0) {
    finishShutdownIfDone();
    return;
  }
  // Loop 0's check handle looks again after this whether its own share may go.
  (void)mailbox_.post([this] { workers_running_.fetch_sub(1); });
}

void Daemon::requestShutdown(bool fast) {
  const uint64_t now = nowMs();
  bool wait_for_clients = false;
  const uint64_t timeout = fast ? std::min<uint64_t>(kSigintShutdownMs,
                                                     config_->limits.shutdown_timeout.count())
                                : static_cast<uint64_t>(config_->limits.shutdown_timeout.count());
  if (shutting_down_) {
    // A second signal: stop waiting.
    spdlog::info("second shutdown signal: closing every session now");
    shutdown_deadline_ms_ = now;
  } else {
    shutting_down_ = true;
    shutdown_deadline_ms_ = now + timeout;
    // With so_reuseport the other processes on the port take the new connections: the clients
    // connected here go on until they leave (or the timeout), as with SHUTDOWN WAIT_FOR_CLIENTS.
    wait_for_clients = !fast && config_->listen.so_reuseport;
    if (notifier_) (void)notifier_->stopping();
    const size_t n = sessionCount();
    spdlog::info("shutting down ({}): no new connections; {} session{} get up to {} ms to {}",
                 fast ? "SIGINT" : "SIGTERM", n, n == 1 ? "" : "s", timeout,
                 wait_for_clients ? "disconnect" : "finish");
    if (wait_for_clients) drainListeners();
    for (auto& l : listeners_) l->close();
    // MCP calls in flight get the same time as SQL statements; new MCP requests are refused (503).
    if (mcp_) mcp_->beginDrain();
    catalog_->stop();
  }
  const uint64_t deadline = shutdown_deadline_ms_;
  for (size_t i = 1; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    (void)w->post(
        [w, deadline, wait_for_clients] { w->beginShutdown(deadline, wait_for_clients); });
  }
  primary().beginShutdown(deadline, wait_for_clients);
  tick();
}

void Daemon::finishShutdownIfDone() {
  if (!shutting_down_ || stopping_loop_ || !primary().finished()) return;
  stopping_loop_ = true;
  mcp_.reset();
  metrics_->close();
  mailbox_.close();
  // Whatever still holds the loop open after this (a server login in flight, a late close) must
  // not keep the process alive: a short grace for close callbacks, then the loop is stopped. The
  // timer is unreferenced so a loop that empties first ends at once.
  uv_timer_stop(&janitor_);
  uv_timer_start(&janitor_, &Daemon::onShutdownGrace, kShutdownGraceMs, 0);
  uv_unref(reinterpret_cast<uv_handle_t*>(&janitor_));
  uv_close(reinterpret_cast<uv_handle_t*>(&sig_term_), &Daemon::onHandleClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(&sig_int_), &Daemon::onHandleClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(&sig_hup_), &Daemon::onHandleClosed);
  // The check handle goes too: an active check handle with nothing left to poll would block the
  // loop forever. Whatever closes after this is freed by ~Daemon once uv_run has returned.
  uv_check_stop(&check_);
  uv_close(reinterpret_cast<uv_handle_t*>(&check_), &Daemon::onHandleClosed);
}

bool Daemon::reload() {
  if (notifier_) (void)notifier_->reloading();
  std::shared_ptr<const config::Config> next;
  try {
    next = loadConfig(config_->path);
  } catch (const std::exception& e) {
    spdlog::error("reload rejected, keeping the running configuration: {}", e.what());
    metrics_->metrics().config_last_reload_successful.set(0);
    if (notifier_) (void)notifier_->ready();
    return false;
  }
  if (const std::string e = giveMaskKey(*next, true); !e.empty()) {
    spdlog::error("reload rejected, keeping the running configuration: {}", e);
    if (notifier_) (void)notifier_->ready();
    return false;
  }
  // Settings applied only when the listeners are made: each changed one is named.
  const auto sameAddresses = [](const net::ListenConfig& a, const net::ListenConfig& b) {
    if (a.addresses.size() != b.addresses.size()) return false;
    for (size_t i = 0; i < a.addresses.size(); ++i) {
      if (a.addresses[i].host != b.addresses[i].host || a.addresses[i].port != b.addresses[i].port) {
        return false;
      }
    }
    return true;
  };
  const net::ListenConfig& was = config_->listen;
  const net::ListenConfig& now = next->listen;
  std::string restart_keys;
  const auto changed = [&restart_keys](bool differs, const char* key) {
    if (differs) restart_keys += (restart_keys.empty() ? "" : ", ") + std::string(key);
  };
  changed(!sameAddresses(was, now), "listen.addresses");
  changed(was.unix_socket_dir != now.unix_socket_dir, "listen.unix_socket_dir");
  changed(was.unix_socket_port != now.unix_socket_port, "listen.unix_socket_port");
  changed(was.unix_socket_mode != now.unix_socket_mode, "listen.unix_socket_mode");
  changed(was.unix_socket_group != now.unix_socket_group, "listen.unix_socket_group");
  changed(config_->metrics.listen != next->metrics.listen, "metrics.listen");
  changed(config_->mcp.listen != next->mcp.listen || config_->mcp.path != next->mcp.path, "mcp.listen/mcp.path");
  if (mcp_) mcp_->setConfig(next->mcp);
  if (!restart_keys.empty()) {
    spdlog::warn("reload: {} changed; the listeners keep their old settings until a restart",
                 restart_keys);
  }
  const auto& h_was = config_->history;
  const auto& h_now = next->history;
  if (h_now.store != h_was.store || h_now.path != h_was.path ||
      h_now.durability != h_was.durability || h_now.spool_path != h_was.spool_path ||
      h_now.spool_size != h_was.spool_size) {
    spdlog::warn("reload: history store or spool settings changed; they take effect after a "
                 "restart");
  }
  if (next->auth.salt_key != config_->auth.salt_key ||
      next->auth.salt_key_file != config_->auth.salt_key_file) {
    SaltKey key = loadSaltKey(next->auth);
    if (!key.warning.empty()) spdlog::warn("reload: {}", key.warning);
    // A key of this process's own would change every unknown user's salt for nothing.
    if (key.persistent || !salt_key_.persistent) salt_key_ = std::move(key);
  }
  if (host_health_) host_health_->setUpstream(next->upstream);
  const auto hostNames = [](const net::UpstreamConfig& u) {
    std::string names = u.host + ":" + std::to_string(u.port);
    for (const auto& r : u.replicas) names += "," + r.name();
    return names;
  };
  if (hostNames(next->upstream) != hostNames(config_->upstream)) {
    spdlog::warn(
        "reload: upstream.host, port or replicas changed; the hosts stay as they were "
        "until a restart");
  }
  if (next->daemon.workers != config_->daemon.workers) {
    spdlog::warn("reload: daemon.workers changed; the number of loops stays {} until a restart",
                 workers_.size());
  }
  config_ = std::move(next);
  metrics_->metrics().config_last_reload_successful.set(1);
  metrics_->metrics().config_last_reload_success_timestamp.set(
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  // Every loop takes the new configuration for its new sessions; loop 0's at once.
  for (size_t i = 1; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    (void)w->post([w, cfg = config_, key = salt_key_.key] { w->applyConfig(cfg, key); });
  }
  primary().applyConfig(config_, salt_key_.key);
  spdlog::set_level(spdlog::level::from_str(
      log_level_override_.empty() ? config_->logging.level : log_level_override_));
  spdlog::info("configuration reloaded from {}; new sessions use it", config_->path);
  if (notifier_) (void)notifier_->ready();
  return true;
}

void Daemon::tick() {
  const uint64_t now = nowMs();
  if (shutting_down_ && now >= shutdown_deadline_ms_) {
    // MCP calls still running are cancelled; their statements are recorded as they end.
    if (mcp_) mcp_->close();
  }
  catalog_->tick(now);
  publishStats();
  auth_limiter_.expire(now);
  if (notifier_ && notifier_->watchdogPingPeriod().count() > 0 &&
      now - last_watchdog_ms_ >= static_cast<uint64_t>(notifier_->watchdogPingPeriod().count())) {
    last_watchdog_ms_ = now;
    (void)notifier_->watchdogPing();
  }
  // `systemctl status` shows the connection counts, refreshed at most once a second.
  if (notifier_ && notifier_->enabled() && !shutting_down_ && now - last_status_ms_ >= 1000) {
    last_status_ms_ = now;
    size_t servers = 0;
    for (const auto& s : summaries()) servers += s.server_connections;
    std::string text = "accepting connections: " + std::to_string(sessionCount()) +
                       " clients, " + std::to_string(servers) + " server connections";
    if (text != last_status_) {
      last_status_ = std::move(text);
      (void)notifier_->status(last_status_);
    }
  }
}

void Daemon::sweep() { finishShutdownIfDone(); }

void Daemon::onJanitor(uv_timer_t* t) { static_cast<Daemon*>(t->data)->tick(); }

void Daemon::onCheck(uv_check_t* c) {
  auto* self = static_cast<Daemon*>(c->data);
  self->sweep();
}

void Daemon::refreshCatalog() {
  if (catalog_) catalog_->refreshNow();
}

void Daemon::onSignal(uv_signal_t* s, int signum) {
  auto* self = static_cast<Daemon*>(s->data);
  switch (signum) {
    case SIGTERM: self->requestShutdown(false); break;
    case SIGINT: self->requestShutdown(true); break;
    case SIGHUP:
      (void)self->reload();
      self->refreshCatalog();  // a new table or view is known without waiting for the timer
      break;
    default: break;
  }
}

void Daemon::onShutdownGrace(uv_timer_t* t) {
  auto* self = static_cast<Daemon*>(t->data);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->janitor_), &Daemon::onHandleClosed);
  uv_stop(&self->loop_);
}

void Daemon::onHandleClosed(uv_handle_t* h) {
  auto* self = static_cast<Daemon*>(h->data);
  --self->handles_open_;
}

}  // namespace pgwarden::daemon
