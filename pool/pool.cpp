// Pools: lending, waiting with a deadline, spawning within limits, pausing after failed logins,
// closing connections idle for too long, and freeing closed connections outside callbacks.
#include "pool/pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_text.h"
#include "pool/host_health.h"

namespace pgwarden::pool {

namespace {

bool isOpen(ServerState s) { return s != ServerState::kClosing && s != ServerState::kClosed; }

}  // namespace

std::string refusalMessage(std::string_view server_message) {
  return "the database server refuses new connections: " + std::string(server_message);
}

Pool::Pool(PoolManager& manager, std::string role, std::string database, int max_size, bool writes,
           size_t host)
    : manager_(manager),
      role_(std::move(role)),
      database_(std::move(database)),
      fixed_max_(max_size),
      writes_(writes),
      host_(host) {
  if (fixed_max_ == 0 && manager_.slots() != nullptr) {
    slots_ = manager_.slots();
    // Each host caps its own connections: pool.max_size per host.
    slot_key_ = ConnectionSlots::key(
        role_, host_ == 0 ? database_ : database_ + '\0' + std::to_string(host_), writes_);
  }
}

const std::shared_ptr<const PoolSettings>& Pool::settings() const {
  return manager_.hostSettings(host_);
}

std::string_view Pool::hostLabel() const {
  HostHealth* health = manager_.health();
  if (host_ == 0 || health == nullptr || host_ >= health->size()) return "primary";
  return health->label(host_);
}

int Pool::maxSize() const { return fixed_max_ > 0 ? fixed_max_ : manager_.config()->pool.max_size; }

// The write pool keeps no idle connections of its own: writable sessions are opened on demand.
// With shared slots min_size holds per loop, and those connections count in the global cap too
// (they take a slot when one is free, and yield it to another loop's waiting clients).
int Pool::minSize() const { return fixed_max_ > 0 || writes_ ? 0 : manager_.config()->pool.min_size; }

Pool::~Pool() {
  if (slots_ == nullptr) return;
  for (size_t i = 0; i < conns_.size(); ++i) slots_->give(slot_key_, manager_.slotLoop());
  releaseDemand();
}

int Pool::countState(ServerState s) const {
  int n = 0;
  for (const auto& c : conns_) n += c->state() == s ? 1 : 0;
  return n;
}

int Pool::countOpen() const {
  int n = 0;
  for (const auto& c : conns_) n += isOpen(c->state()) ? 1 : 0;
  return n;
}

void Pool::acquire(PoolWaiter* w) {
  const auto& cfg = *manager_.config();
  waiters_.push_back({w, manager_.nowMs() + static_cast<uint64_t>(cfg.pool.acquire_timeout.count())});
  scheduleServe();
}

void Pool::scheduleServe() {
  if (serve_due_) return;
  serve_due_ = true;
  manager_.scheduleServe(*this);
}

void Pool::cancelWait(PoolWaiter* w) {
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                [w](const Waiter& x) { return x.waiter == w; }),
                 waiters_.end());
  if (waiters_.empty()) releaseDemand();
}

bool Pool::takeSlot(bool for_waiter) {
  if (slots_ == nullptr) return true;
  const auto want = for_waiter ? ConnectionSlots::Want::kWaiter : ConnectionSlots::Want::kSpare;
  if (slots_->tryTake(slot_key_, maxSize(), manager_.slotLoop(), want)) return true;
  if (for_waiter) wants_slot_ = true;
  return false;
}

void Pool::releaseDemand() {
  if (!wants_slot_) return;
  wants_slot_ = false;
  slots_->noLongerWants(slot_key_, manager_.slotLoop());
}

void Pool::onSlotFreed() {
  if (wants_slot_) scheduleServe();
}

void Pool::yieldIdleSlot() {
  if (slots_ == nullptr || !waiters_.empty()) return;
  // idle_ is LIFO: the front is the connection idle for longest.
  auto it = std::find_if(idle_.begin(), idle_.end(),
                         [](const PooledConnection* c) { return c->state() == ServerState::kIdle; });
  if (it == idle_.end() || !slots_->othersWant(slot_key_, manager_.slotLoop())) return;
  (*it)->close("its slot is wanted by another worker loop");
}

void Pool::spawnAsNeeded() {
  if (manager_.nowMs() < retry_after_ms_) {
    releaseDemand();  // a slot handed over now would sit unused through the pause
    return;
  }
  const int connecting = countState(ServerState::kResolving) +
                         countState(ServerState::kConnecting) + countState(ServerState::kLogin);
  // Connections being reset or drained come back soon: count them as supply too.
  int fenced = 0;  // idle, lendable once a cancel request for it is answered
  for (const auto& c : conns_) fenced += c->state() == ServerState::kIdle && !c->lendable() ? 1 : 0;
  const int coming = connecting + countState(ServerState::kResetting) +
                     countState(ServerState::kDraining) + fenced;
  const int total = static_cast<int>(conns_.size());
  const int for_waiters = static_cast<int>(waiters_.size()) - coming;
  int wanted = std::max(for_waiters, minSize() - total);
  // While the server refuses new backends, one login per login_retry finds out when it takes
  // them again, client or not (readiness waits for that login).
  if (connecting == 0 && manager_.probing(*this)) wanted = std::max(wanted, 1);
  bool refused = false;
  for (int i = 0; i < wanted && static_cast<int>(conns_.size()) < maxSize(); ++i) {
    if (!takeSlot(i < for_waiters)) {
      refused = i < for_waiters;
      break;
    }
    auto c = manager_.factory().create(*this, manager_.nextServerId());
    PooledConnection* raw = c.get();
    conns_.push_back(std::move(c));
    raw->start();
    // start() may fail at once (and then sets a retry pause): stop spawning.
    if (manager_.nowMs() < retry_after_ms_) break;
  }
  if (!refused) releaseDemand();
}

PooledConnection* Pool::popLendable() {
  for (size_t i = idle_.size(); i-- > 0;) {
    PooledConnection* c = idle_[i];
    if (c->state() != ServerState::kIdle) {
      idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (!c->lendable()) continue;
    idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
    return c;
  }
  return nullptr;
}

PooledConnection* Pool::takeIdle() {
  if (!waiters_.empty()) return nullptr;  // first come, first served
  PooledConnection* c = popLendable();
  if (c) ++manager_.counters().pool_assignments;
  return c;
}

void Pool::onLendable() {
  if (!waiters_.empty()) scheduleServe();
}

void Pool::serve() {
  serve_due_ = false;
  // A waiter may acquire or cancel from inside its callback: the queues are read afresh each time.
  while (!waiters_.empty()) {
    PooledConnection* c = popLendable();
    if (!c) break;
    ++manager_.counters().pool_assignments;
    PoolWaiter* w = waiters_.front().waiter;
    waiters_.pop_front();
    w->onConnectionReady(*c);
  }
  if (!waiters_.empty()) {
    spawnAsNeeded();
  } else {
    releaseDemand();
  }
}

std::shared_ptr<const ParamList> Pool::shareParams(std::shared_ptr<const ParamList> params) {
  if (params == nullptr) return params;
  if (shared_params_ != nullptr && *shared_params_ == *params) return shared_params_;
  shared_params_ = std::move(params);
  return shared_params_;
}

void Pool::onLoginDone(PooledConnection& c) {
  retry_after_ms_ = 0;
  manager_.counters().serverLogin(true, manager_.nowMs());
  manager_.clearRefusal();
  spdlog::debug("server {} db={}: logged in (backend pid {})", c.id(), logsafe(database_),
                c.backendPid());
  if (closeIfNeeded(c)) return;
  idle_.push_back(&c);
  if (!waiters_.empty()) scheduleServe();
}

void Pool::onLoginFailed(PooledConnection& c, const std::string& why) {
  const auto& cfg = *manager_.config();
  retry_after_ms_ = manager_.nowMs() + static_cast<uint64_t>(cfg.upstream.login_retry.count());
  spdlog::warn("pool db={} host={}: server login failed: {}; next attempt in {} ms",
               logsafe(database_), settings()->upstream.host, logsafe(why, kLogMessageMaxBytes),
               cfg.upstream.login_retry.count());
  if (failOver(c)) return;
  // The clients waiting now would wait for a server that just told us no: answer them at once.
  // Only a missing database is the client's business; every other cause is ours to log.
  std::string sqlstate = "08006";
  std::string message = kUnreachableMessage;
  // Waiters that other open connections can still serve keep waiting. `c` is closing already,
  // so countOpen() does not count it.
  int others = countOpen();
  if (c.loginSqlstate() == "3D000") {
    sqlstate = "3D000";
    message = "database does not exist on the server";
  } else if (writes_ && c.loginSqlstate() == "42501") {
    // The write role is a superuser (or could become one): pgwarden's own refusal, in its words.
    sqlstate = "42501";
    message = c.loginMessage();
  } else if (c.loginSqlstate() == "53300") {
    // PostgreSQL is out of connection slots (max_connections, or a role's or database's limit):
    // the clients hear the server's own reason rather than wait for the acquire timeout.
    manager_.noteRefusal(*this, c.loginMessage());
    sqlstate = "53300";
    message = refusalMessage(c.loginMessage());
    // Only connections on their way can serve them: one lent to a client stays with it for
    // the client's whole session.
    others = countState(ServerState::kResolving) + countState(ServerState::kConnecting) +
             countState(ServerState::kLogin) + countState(ServerState::kResetting) +
             countState(ServerState::kDraining);
  }
  while (static_cast<int>(waiters_.size()) > std::max(others, 0)) {
    PoolWaiter* w = waiters_.back().waiter;
    waiters_.pop_back();
    w->onServerFailed(sqlstate, message);
  }
  if (waiters_.empty()) releaseDemand();
}

bool Pool::failOver(const PooledConnection& c) {
  HostHealth* health = manager_.health();
  // Only a replica that did not answer (no login error of its own, or one saying it is starting
  // up or shutting down) leaves: a missing database or a refused role is no reason to move.
  const std::string& code = c.loginSqlstate();
  if (host_ == 0 || health == nullptr || !(code.empty() || code == "57P03" || code == "57P01")) {
    return false;
  }
  health->markDown(host_, c.lastError());
  if (waiters_.empty()) return true;
  Pool& primary = manager_.hostPool(database_, 0);
  std::deque<Waiter> moving;
  moving.swap(waiters_);
  releaseDemand();
  for (const Waiter& w : moving) {
    primary.acquire(w.waiter);
    w.waiter->onWaitMoved(primary);
  }
  return true;
}

void Pool::onIdle(PooledConnection& c) {
  if (closeIfNeeded(c)) return;
  idle_.push_back(&c);
  if (!waiters_.empty()) scheduleServe();
}

bool Pool::closeIfNeeded(PooledConnection& c) {
  if (close_needed_.erase(&c) == 0) return false;
  c.close("reconnect (admin console)");
  if (!waiters_.empty()) scheduleServe();
  return true;
}

void Pool::reconnect() {
  std::vector<PooledConnection*> snapshot;
  for (auto& c : conns_) {
    if (isOpen(c->state())) snapshot.push_back(c.get());
  }
  for (PooledConnection* c : snapshot) {
    if (c->state() == ServerState::kIdle) {
      idle_.erase(std::remove(idle_.begin(), idle_.end(), c), idle_.end());
      c->close("reconnect (admin console)");
    } else {
      close_needed_.insert(c);
    }
  }
  if (!waiters_.empty()) scheduleServe();
}

void Pool::onClosed(PooledConnection& c) {
  close_needed_.erase(&c);
  idle_.erase(std::remove(idle_.begin(), idle_.end(), &c), idle_.end());
  for (auto it = conns_.begin(); it != conns_.end(); ++it) {
    if (it->get() == &c) {
      manager_.bury(std::move(*it));
      conns_.erase(it);
      if (slots_ != nullptr) slots_->give(slot_key_, manager_.slotLoop());
      break;
    }
  }
  // A waiter may have been counting on this one: serve() opens a replacement.
  if (!waiters_.empty()) scheduleServe();
}

void Pool::tick(uint64_t now_ms) {
  const auto& cfg = *manager_.config();
  std::vector<PooledConnection*> snapshot;
  snapshot.reserve(conns_.size());
  for (auto& c : conns_) snapshot.push_back(c.get());
  // Idle connections close only while more than min_size stay open.
  int open = countOpen();
  for (PooledConnection* c : snapshot) {
    const bool was_open = isOpen(c->state());
    c->tick(now_ms);
    if (was_open && !isOpen(c->state())) --open;  // a deadline closed it
    if (c->state() == ServerState::kIdle && cfg.pool.idle_timeout.count() > 0 &&
        open > minSize() &&
        now_ms - c->idleSinceMs() >= static_cast<uint64_t>(cfg.pool.idle_timeout.count())) {
      --open;
      c->close("idle timeout");
    }
  }
  while (!waiters_.empty() && waiters_.front().deadline_ms <= now_ms) {
    PoolWaiter* w = waiters_.front().waiter;
    waiters_.pop_front();
    if (!manager_.refusal().empty()) {
      w->onServerFailed("53300", refusalMessage(manager_.refusal()));
      continue;
    }
    w->onServerFailed("53300", "no database connection became free within " +
                                   std::to_string(cfg.pool.acquire_timeout.count()) +
                                   " ms (pool size " + std::to_string(maxSize()) +
                                   "); try again in a moment");
  }
  yieldIdleSlot();
  spawnAsNeeded();
}

void Pool::closeAll(const std::string& why) {
  while (!waiters_.empty()) {
    PoolWaiter* w = waiters_.front().waiter;
    waiters_.pop_front();
    w->onServerFailed("57P01", why);
  }
  releaseDemand();
  std::vector<PooledConnection*> snapshot;
  for (auto& c : conns_) snapshot.push_back(c.get());
  for (PooledConnection* c : snapshot) c->close(why);
}

PoolStats Pool::stats() const {
  PoolStats s;
  s.role = role_;
  s.database = database_;
  s.internal = fixed_max_ > 0;
  s.writes = writes_;
  s.host = settings()->upstream.host + ":" + std::to_string(settings()->upstream.port);
  for (const auto& c : conns_) {
    if (close_needed_.count(c.get())) ++s.close_needed;
    switch (c->state()) {
      case ServerState::kResolving:
      case ServerState::kConnecting:
      case ServerState::kLogin: ++s.connecting; break;
      case ServerState::kIdle: ++s.idle; break;
      case ServerState::kActive: ++s.active; break;
      case ServerState::kResetting:
      case ServerState::kDraining: ++s.resetting; break;
      case ServerState::kClosing:
      case ServerState::kClosed: break;
    }
  }
  s.total = static_cast<int>(conns_.size());
  s.waiting = static_cast<int>(waiters_.size());
  return s;
}

PoolManager::PoolManager(uv_loop_t* loop, metrics::Counters& counters,
                         std::unique_ptr<ConnectionFactory> factory, Clock clock)
    : loop_(loop),
      counters_(counters),
      factory_(std::move(factory)),
      clock_(std::move(clock)),
      next_turn_(loop, [this] {
        // Pools scheduled while these are served wait for the next turn.
        std::vector<Pool*> due;
        due.swap(due_);
        for (Pool* p : due) p->serve();
      }) {}

PoolManager::~PoolManager() = default;

void PoolManager::setConfig(std::shared_ptr<const PoolSettings> config) {
  config_ = std::move(config);
  host_settings_.assign(1, config_);
  // The hosts stay as they were at start (HostHealth's list); everything else follows a reload.
  for (size_t i = 1; health_ != nullptr && i < health_->size(); ++i) {
    auto s = std::make_shared<PoolSettings>(*config_);
    s->upstream.host = health_->host(i).host;
    s->upstream.port = health_->host(i).port;
    host_settings_.push_back(std::move(s));
  }
}

const std::shared_ptr<const PoolSettings>& PoolManager::hostSettings(size_t i) const {
  return i < host_settings_.size() ? host_settings_[i] : config_;
}

Pool& PoolManager::pool(const std::string& database, bool internal, bool writes, bool replica_ok) {
  const bool replicas =
      replica_ok && !internal && !writes && health_ != nullptr && health_->hasReplicas();
  return poolOn(database, internal, writes, replicas ? health_->pickForRead() : 0);
}

Pool& PoolManager::hostPool(const std::string& database, size_t host) {
  return poolOn(database, false, false, host);
}

Pool& PoolManager::poolOn(const std::string& database, bool internal, bool writes, size_t host) {
  const std::string& role = writes ? config_->upstream.write_user : config_->upstream.user;
  std::string key = role + '\0' + database;
  if (internal) key += std::string("\0internal", 9);
  if (writes) key += std::string("\0writes", 7);
  if (host > 0) key += std::string("\0host", 5) + std::to_string(host);
  auto it = pools_.find(key);
  if (it == pools_.end()) {
    auto p = std::make_unique<Pool>(*this, role, database, internal ? 1 : 0, writes, host);
    it = pools_.emplace(key, std::move(p)).first;
  }
  return *it->second;
}

void PoolManager::tick(uint64_t now_ms) {
  for (auto it = pools_.begin(); it != pools_.end();) {
    it->second->tick(now_ms);
    // Pools are made on demand from client-chosen names: drop the empty ones so the map stays
    // bounded by what is in use (the one finding out when the server takes logins again stays).
    if (it->second->empty() && config_->pool.min_size == 0 && it->second.get() != refused_pool_) {
      it = pools_.erase(it);
    } else {
      ++it;
    }
  }
}

void PoolManager::scheduleServe(Pool& pool) {
  due_.push_back(&pool);
  next_turn_.schedule();
}

void PoolManager::closeAll(const std::string& why) {
  closed_ = true;  // no more logins to find out whether the server takes them
  for (auto& [k, p] : pools_) p->closeAll(why);
}

void PoolManager::reconnect(const std::string& database) {
  for (auto& [k, p] : pools_) {
    if (p->internal()) continue;
    if (database.empty() || p->database() == database) p->reconnect();
  }
}

void PoolManager::onSlotFreed() {
  for (auto& [k, p] : pools_) p->onSlotFreed();
}

void PoolManager::sweep() { graveyard_.clear(); }

void PoolManager::noteRefusal(const Pool& pool, std::string_view server_message) {
  refusal_ = std::string(server_message.substr(0, kMaxLoginMessage));
  if (refusal_.empty()) refusal_ = "too many connections";
  refused_pool_ = &pool;
}

void PoolManager::clearRefusal() {
  refusal_.clear();
  refused_pool_ = nullptr;
}

size_t PoolManager::openConnections() const {
  size_t n = 0;
  for (const auto& [k, p] : pools_) n += static_cast<size_t>(p->stats().total);
  return n;
}

std::vector<PoolStats> PoolManager::stats() const {
  std::vector<PoolStats> out;
  for (const auto& [k, p] : pools_) out.push_back(p->stats());
  return out;
}

}  // namespace pgwarden::pool
