// Daemon: loop setup, listeners, accept, janitor, signals, graceful shutdown, cancel routing,
// history submission and reload. Everything runs on the one loop thread.
#include "daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>

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
constexpr uint64_t kCancelTimeoutMs = 5000;
constexpr uint64_t kSigintShutdownMs = 3000;
constexpr int kBacklog = 512;

uint64_t cancelMapKey(int32_t pid, int32_t key) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pid)) << 32) | static_cast<uint32_t>(key);
}

}  // namespace

Daemon::Daemon(std::shared_ptr<const Config> config)
    : config_(std::move(config)),
      pools_(&loop_, counters_, std::make_unique<ServerConnectionFactory>()) {
  uv_loop_init(&loop_);
  loop_.data = this;
  pools_.setConfig(poolSettings(*config_));
  // With redact_literals the history writer normalizes a statement before it cuts it, so it gets
  // the whole text (and bounds it itself); otherwise records keep history.max_sql_bytes of it.
  policy_ = std::make_unique<PolicyEngine>(
      4096, config_->history.redact_literals ? 0 : config_->history.max_sql_bytes);
  catalog_ = std::make_unique<CatalogRefresher>(*this);
  metrics_ = std::make_unique<DaemonMetrics>(*this);
  budgets_ = std::make_unique<guards::BudgetLedger>();
  budgets_->setStoreFactory([this](const guards::BudgetStoreConfig& cfg) {
    return std::make_unique<BudgetStorePg>(&loop_, cfg);
  });
  webhooks_ = std::make_unique<WebhookClient>(&loop_, WebhookClient::Options{});
  statements_ = std::make_unique<StatementRecorder>(*this, budgets_.get(), config_->instance_id);
  std::memset(&janitor_, 0, sizeof(janitor_));
  std::memset(&check_, 0, sizeof(check_));
}

Daemon::~Daemon() {
  // run() returns only once every handle is closed; a Daemon that never ran has its timers and
  // signals uninitialized. Give libuv a last chance to finish close callbacks either way.
  mcp_.reset();
  webhooks_.reset();
  statements_->setBudgets(nullptr);
  budgets_.reset();
  metrics_->close();
  pools_.close();
  // The janitor is unreferenced during shutdown: when every other handle closes before its
  // grace period ends, uv_run returns with it still open, and the loop could not be closed.
  auto* janitor = reinterpret_cast<uv_handle_t*>(&janitor_);
  if (janitor_.loop == &loop_ && !uv_is_closing(janitor)) uv_close(janitor, &Daemon::onHandleClosed);
  uv_run(&loop_, UV_RUN_NOWAIT);
  sessions_.clear();
  session_graveyard_.clear();
  cancels_.clear();
  cancel_graveyard_.clear();
  pools_.sweep();
  uv_loop_close(&loop_);
}

bool Daemon::start() {
  const auto& cfg = *config_;
  salt_key_ = loadSaltKey(cfg.auth);
  if (!salt_key_.warning.empty()) spdlog::warn("{}", salt_key_.warning);
  try {
    if (cfg.history.store != "off") recorder_ = history::makeRecorder(cfg.history);
    metrics_->setRecorder(recorder_.get(), cfg.history.store);
  } catch (const std::exception& e) {
    spdlog::error("cannot open the history store ({}): {}", cfg.history.store, e.what());
    return false;
  }

  if (!startListeners(cfg.listen, cfg.metrics.listen)) return false;

  if (!metrics_->start()) return false;
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

  // Statistics for the databases the config names are loaded before the first client asks.
  for (const auto& [client_db, server_db] : cfg.upstream.databases) {
    if (server_db != "*") catalog_->watch(server_db);
  }
  return true;
}

bool Daemon::startListeners(const ListenConfig& listen, const std::string& metrics_listen) {
  // Socket activation (pgwarden.socket): systemd's sockets replace binding; configured
  // addresses it did not pass are bound here as usual. See docs/operations.md.
  auto inherited = listenFds();
  if (!inherited) {
    spdlog::error("socket activation: {}", inherited.error());
    return false;
  }
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
  const auto add = [this](std::unique_ptr<Listener> l, int rc, const std::string& err) {
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
    auto l = std::make_unique<Listener>(&loop_, [this](Listener& x) { onConnection(x); });
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
    auto l = std::make_unique<Listener>(&loop_, [this](Listener& x) { onConnection(x); });
    std::string err;
    const int rc = l->listenTcp(listen.addresses[i], kBacklog, err);
    if (!add(std::move(l), rc, err + hint(rc))) return false;
  }
  if (!unix_path.empty() && plan->bind.back()) {
    auto l = std::make_unique<Listener>(&loop_, [this](Listener& x) { onConnection(x); });
    std::string err;
    const int rc = l->listenUnix(unix_path, kBacklog, listen.unix_socket_mode,
                                 listen.unix_socket_group, err);
    if (!add(std::move(l), rc, err + hint(rc))) return false;
  }
  return true;
}

int Daemon::run() {
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (recorder_) {
    // Whatever the shutdown left queued is written before the process exits.
    recorder_->shutdown(std::chrono::milliseconds(5000));
    const auto st = recorder_->stats();
    spdlog::info("history: {} records written, {} dropped", st.written, st.dropped);
  }
  spdlog::info("pgwarden stopped");
  return 0;
}

void Daemon::onConnection(Listener& l) {
  const int fd = l.acceptedFd();
  const uint64_t id = ++next_session_id_;
  auto s = std::make_unique<ClientSession>(*this, id, l.isUnix());
  ClientSession* raw = s.get();
  sessions_.emplace(id, std::move(s));
  ++counters_.clients_accepted;
  const int rc = raw->accept(l.handle());
  if (rc != 0) {
    spdlog::warn("accept on {} failed: {}", l.name(), uv_strerror(rc));
    if (raw->state() == ClientState::kStartup) sessions_.erase(id);  // no handle was opened
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
          id, logsafe(raw->peer()), fd, static_cast<uint64_t>(lim.rlim_cur),
          static_cast<uint64_t>(reserve));
      raw->rejectAfterStartup("53300", "sorry, too many clients already: pgwarden is out of file "
                              "descriptors", RejectReason::kMaxConnections);
      return;
    }
  }
  admitStartup(*raw);
}

void Daemon::admitStartup(ClientSession& s) {
  // Every new connection has yet to log in. Those that have not are capped in total and per
  // address, and never take the slots reserved for logged-in sessions; when room is needed,
  // the oldest of them that has had a second to log in is closed (see docs/reliability.md).
  const LimitsConfig& limits = config_->limits;
  StartupLimiter::Limits l;
  l.max_total = static_cast<size_t>(limits.startupCap());
  l.max_per_address = static_cast<size_t>(limits.max_startup_per_address);
  const std::string address = s.viaUnix() ? std::string() : StartupLimiter::addressKey(s.peerHost());
  const uint64_t now = nowMs();
  const bool clients_full = sessions_.size() > static_cast<size_t>(limits.max_client_connections);
  const auto d = startup_limiter_.admit(s.id(), address, now, l, clients_full);
  // A flood would write a line per connection: one line a second per kind, with the count.
  uint64_t left_out = 0;
  const auto more = [&left_out] {
    return left_out == 0 ? std::string() : fmt::format(" ({} more like it in the last second)",
                                                       left_out);
  };
  if (d.evict != 0) {
    if (ClientSession* old = findSession(d.evict)) {
      if (startup_log_[0].allow(now, left_out)) {
        spdlog::warn("s{} peer={}: closed after {} ms without logging in, to make room for a "
                     "new connection (limits.max_startup_connections {}){}", old->id(),
                     old->peer(), now - old->connectedAtMs(), l.max_total, more());
      }
      old->reject("53300", "too many connections still starting up; this one did not log in in "
                  "time", RejectReason::kStartupLimit);
    }
  }
  switch (d.verdict) {
    case StartupLimiter::Verdict::kAdmit:
      return;
    case StartupLimiter::Verdict::kAddressFull:
      if (startup_log_[1].allow(now, left_out)) {
        spdlog::warn("s{} peer={}: refused: {} connections from {} are still starting up "
                     "(limits.max_startup_per_address){}", s.id(), s.peer(),
                     startup_limiter_.countFor(address), address, more());
      }
      s.rejectAfterStartup("53300", "too many connections still starting up from " + address,
                           RejectReason::kStartupLimit);
      return;
    case StartupLimiter::Verdict::kStartupFull:
      if (startup_log_[2].allow(now, left_out)) {
        spdlog::warn("s{} peer={}: refused: {} connections are still starting up, none for a "
                     "second yet (limits.max_startup_connections){}", s.id(), s.peer(),
                     startup_limiter_.size(), more());
      }
      s.rejectAfterStartup("53300", "too many connections still starting up",
                           RejectReason::kStartupLimit);
      return;
    case StartupLimiter::Verdict::kClientsFull:
      if (startup_log_[3].allow(now, left_out)) {
        spdlog::warn("s{} peer={}: refused: max_client_connections ({}) reached{}", s.id(),
                     s.peer(), limits.max_client_connections, more());
      }
      s.rejectAfterStartup("53300", "sorry, too many clients already",
                           RejectReason::kMaxConnections);
      return;
  }
}

void Daemon::leftStartup(uint64_t id) { startup_limiter_.leave(id); }

void Daemon::poolWaited(bool timed_out, std::chrono::nanoseconds waited) {
  metrics_->poolWait(timed_out, waited);
}

std::unique_ptr<ConsoleSession> Daemon::openConsole(uint64_t session_id, const std::string& user,
                                                    const std::string& client_addr,
                                                    const std::string& application_name) {
  auto console = std::make_unique<AdminConsole>(*this, session_id, user);
  console->setClient(client_addr, application_name);
  return console;
}

void Daemon::onSessionClosed(ClientSession* s) {
  auto it = sessions_.find(s->id());
  if (it == sessions_.end()) return;
  session_graveyard_.push_back(std::move(it->second));
  sessions_.erase(it);
}

ClientSession* Daemon::findSession(uint64_t id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void Daemon::forEachSession(const std::function<void(const ClientSession&)>& fn) const {
  for (const auto& [id, s] : sessions_) fn(*s);
}

std::shared_ptr<const guards::TableStatsSnapshot> Daemon::tableStats(
    const std::string& server_db) const {
  return catalog_->get(server_db);
}

void Daemon::watchDatabase(const std::string& server_db) {
  if (!shutting_down_) catalog_->watch(server_db);
}

bool Daemon::waitForStats(const std::string& server_db, uint64_t session_id) {
  if (!catalog_->loading(server_db)) return false;
  catalog_->notifyWhenLoaded(server_db, session_id);
  return true;
}

void Daemon::registerCancelKey(ClientSession* s, int32_t& pid, int32_t& key) {
  for (;;) {
    const std::string r = protocol::randomBytes(8);
    uint32_t a = 0;
    uint32_t b = 0;
    std::memcpy(&a, r.data(), 4);
    std::memcpy(&b, r.data() + 4, 4);
    pid = static_cast<int32_t>(a & 0x7fffffffu);
    key = static_cast<int32_t>(b);
    if (pid == 0) continue;
    if (cancel_keys_.emplace(cancelMapKey(pid, key), s).second) return;
  }
}

void Daemon::unregisterCancelKey(int32_t pid, int32_t key) {
  cancel_keys_.erase(cancelMapKey(pid, key));
}

void Daemon::handleCancelRequest(int32_t pid, int32_t key) {
  auto it = cancel_keys_.find(cancelMapKey(pid, key));
  if (it == cancel_keys_.end()) {
    spdlog::debug("cancel request with an unknown key ignored");
    return;
  }
  it->second->cancelFromClient();
}

void Daemon::cancelServerQuery(int32_t server_pid, int32_t server_key,
                               std::shared_ptr<CancelFence> fence) {
  if (cancels_.size() >= kMaxCancelsInFlight) {
    spdlog::warn("cancel request dropped: {} already in flight", cancels_.size());
    return;
  }
  ++counters_.cancel_requests_forwarded;
  auto f = std::make_unique<CancelForwarder>(
      &loop_, config_->upstream, server_pid, server_key, [this, fence](CancelForwarder* done) {
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
  CancelForwarder* raw = f.get();
  raw->setDeadline(nowMs() + kCancelTimeoutMs);
  cancels_.push_back(std::move(f));
  raw->start();
}

void Daemon::submitRecord(history::Record&& record) {
  if (!recorder_) return;
  ++counters_.history_submitted;
  if (!recorder_->submit(std::move(record))) ++counters_.history_dropped;
}

void Daemon::onStatement(history::Record&& record, const StatementPlan* plan) {
  counters_.statement(record.outcome);
  if (record.truncated) ++counters_.statements_truncated;
  metrics_->onStatement(record, plan);
  submitRecord(std::move(record));
}

void Daemon::requestShutdown(bool fast) {
  const uint64_t now = nowMs();
  const uint64_t timeout = fast ? std::min<uint64_t>(kSigintShutdownMs,
                                                     config_->limits.shutdown_timeout.count())
                                : static_cast<uint64_t>(config_->limits.shutdown_timeout.count());
  if (shutting_down_) {
    // A second signal: stop waiting.
    spdlog::info("second shutdown signal: closing every session now");
    shutdown_deadline_ms_ = now;
    tick();
    return;
  }
  shutting_down_ = true;
  shutdown_deadline_ms_ = now + timeout;
  if (notifier_) (void)notifier_->stopping();
  spdlog::info("shutting down ({}): no new connections; {} session{} get up to {} ms to finish",
               fast ? "SIGINT" : "SIGTERM", sessions_.size(), sessions_.size() == 1 ? "" : "s",
               timeout);
  for (auto& l : listeners_) l->close();
  // MCP calls in flight get the same time as SQL statements; new MCP requests are refused (503).
  if (mcp_) mcp_->beginDrain();
  catalog_->stop();
  std::vector<ClientSession*> all;
  for (auto& [id, s] : sessions_) all.push_back(s.get());
  for (ClientSession* s : all) s->beginShutdown();
  finishShutdownIfDone();
}

void Daemon::finishShutdownIfDone() {
  if (!shutting_down_ || stopping_loop_ || !sessions_.empty()) return;
  if (mcp_ && mcp_->callsInFlight() > 0) return;
  stopping_loop_ = true;
  mcp_.reset();
  pools_.closeAll("pgwarden is shutting down");
  metrics_->close();
  webhooks_.reset();
  statements_->setBudgets(nullptr);
  budgets_.reset();
  for (auto& c : cancels_) c->close();
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

void Daemon::reload() {
  if (notifier_) (void)notifier_->reloading();
  std::shared_ptr<const Config> next;
  try {
    next = loadConfig(config_->path);
  } catch (const std::exception& e) {
    spdlog::error("reload rejected, keeping the running configuration: {}", e.what());
    if (notifier_) (void)notifier_->ready();
    return;
  }
  // Settings applied only when the listeners are made: each changed one is named.
  const auto sameAddresses = [](const ListenConfig& a, const ListenConfig& b) {
    if (a.addresses.size() != b.addresses.size()) return false;
    for (size_t i = 0; i < a.addresses.size(); ++i) {
      if (a.addresses[i].host != b.addresses[i].host || a.addresses[i].port != b.addresses[i].port) {
        return false;
      }
    }
    return true;
  };
  const ListenConfig& was = config_->listen;
  const ListenConfig& now = next->listen;
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
  config_ = std::move(next);
  pools_.setConfig(poolSettings(*config_));
  spdlog::level::level_enum level = spdlog::level::from_str(config_->logging.level);
  spdlog::set_level(level);
  spdlog::info("configuration reloaded from {}; new sessions use it", config_->path);
  if (notifier_) (void)notifier_->ready();
}

void Daemon::tick() {
  const uint64_t now = nowMs();
  std::vector<ClientSession*> all;
  all.reserve(sessions_.size());
  for (auto& [id, s] : sessions_) all.push_back(s.get());
  const bool overdue = shutting_down_ && now >= shutdown_deadline_ms_;
  for (ClientSession* s : all) {
    if (overdue && s->state() != ClientState::kClosing && s->state() != ClientState::kClosed) {
      // The client (and the statement's history record) learn why the statement never finished.
      s->terminate("57P01",
                   "terminating connection: pgwarden is shutting down and the statement did not "
                   "finish within limits.shutdown_timeout");
    }
    s->tick(now);
  }
  if (overdue) {
    // MCP calls still running are cancelled; their statements are recorded as they end.
    if (mcp_) mcp_->close();
    pools_.closeAll("pgwarden is shutting down");
  }
  pools_.tick(now);
  catalog_->tick(now);
  auth_limiter_.expire(now);
  if (notifier_ && notifier_->watchdogPingPeriod().count() > 0 &&
      now - last_watchdog_ms_ >= static_cast<uint64_t>(notifier_->watchdogPingPeriod().count())) {
    last_watchdog_ms_ = now;
    (void)notifier_->watchdogPing();
  }
  // `systemctl status` shows the connection counts, refreshed at most once a second.
  if (notifier_ && notifier_->enabled() && !shutting_down_ && now - last_status_ms_ >= 1000) {
    last_status_ms_ = now;
    std::string text = "accepting connections: " + std::to_string(sessions_.size()) +
                       " clients, " + std::to_string(pools_.openConnections()) +
                       " server connections";
    if (text != last_status_) {
      last_status_ = std::move(text);
      (void)notifier_->status(last_status_);
    }
  }
  std::vector<CancelForwarder*> cancels;
  for (auto& c : cancels_) cancels.push_back(c.get());
  for (CancelForwarder* c : cancels) {
    if (now >= c->deadlineMs()) c->close();
  }
}

void Daemon::sweep() {
  session_graveyard_.clear();
  cancel_graveyard_.clear();
  pools_.sweep();
  finishShutdownIfDone();
}

void Daemon::onJanitor(uv_timer_t* t) { static_cast<Daemon*>(t->data)->tick(); }

void Daemon::onCheck(uv_check_t* c) {
  auto* self = static_cast<Daemon*>(c->data);
  self->sweep();
}

void Daemon::onSignal(uv_signal_t* s, int signum) {
  auto* self = static_cast<Daemon*>(s->data);
  switch (signum) {
    case SIGTERM: self->requestShutdown(false); break;
    case SIGINT: self->requestShutdown(true); break;
    case SIGHUP: self->reload(); break;
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
