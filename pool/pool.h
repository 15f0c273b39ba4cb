// Server connection pools, one per (server role, server database), session pooling: a client
// holds one server connection for its lifetime; when it leaves, the connection is reset and lent
// to the next. Limits per pool, a bounded wait for a free connection, a pause between failed
// logins, and a clear error for clients when the upstream cannot be reached. With several worker
// loops, max_size caps the pools of every loop together through a shared ConnectionSlots.
#pragma once

#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/param_list.h"
#include "pool/connection_slots.h"
#include "pool/pool_settings.h"
#include "metrics/counters.h"
#include "pool/next_turn.h"
#include "pool/pooled_connection.h"

namespace pgwarden::pool {

class HostHealth;
class PoolManager;

// A client session (or pgwarden's own job) waiting for a connection.
class PoolWaiter {
 public:
  // The connection is the waiter's now (state kIdle; the waiter attaches it).
  virtual void onConnectionReady(PooledConnection& c) = 0;
  // No connection: `sqlstate` and `message` are what the client should see (FATAL).
  virtual void onServerFailed(const std::string& sqlstate, const std::string& message) = 0;
  // The waiter now waits in `to` (a read replica did not answer: its waiters moved to the
  // primary's pool); cancelWait goes to `to` from now on. Called on the loop, nothing else done.
  virtual void onWaitMoved(Pool& to) = 0;

 protected:
  ~PoolWaiter() = default;
};

// The message a client gets when the upstream cannot be reached. It names no address.
inline constexpr const char* kUnreachableMessage =
    "the database is unreachable: pgwarden could not connect to the PostgreSQL server behind "
    "it; try again in a moment";

// What clients hear while PostgreSQL refuses new backends (53300), with the server's words.
std::string refusalMessage(std::string_view server_message);

struct PoolStats {
  std::string role;
  std::string database;
  int total = 0;
  int connecting = 0;
  int idle = 0;
  int active = 0;
  int resetting = 0;  // resetting or draining
  int waiting = 0;    // clients waiting
  int close_needed = 0;   // to close when next released (RECONNECT)
  bool internal = false;  // pgwarden's own pool (catalog statistics)
  bool writes = false;    // a write pool (guarded_writes)
  std::string host;       // the upstream host (host:port) its connections go to
};

class Pool {
 public:
  // `max_size` 0: the configured pool.max_size and min_size; otherwise a fixed-size pool with
  // no minimum (pgwarden's own connections, e.g. for catalog statistics).
  // `writes`: the write pool of guarded_writes groups (docs/writes.md): its connections log in as
  // upstream.write_user, are not read-only, and check on login that the role is no superuser.
  // `host`: the upstream host its connections go to (0 the primary, 1.. upstream.replicas).
  Pool(PoolManager& manager, std::string role, std::string database, int max_size = 0,
       bool writes = false, size_t host = 0);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const std::string& role() const { return role_; }
  const std::string& database() const { return database_; }
  bool writes() const { return writes_; }
  bool internal() const { return fixed_max_ > 0; }
  size_t host() const { return host_; }
  // History's name for that host: "primary", or the replica's host:port (HostHealth::label).
  std::string_view hostLabel() const;
  PoolManager& manager() { return manager_; }
  // What this pool's new connections are opened with: the manager's settings, with the
  // replica's address in upstream.host and port for a replica's pool.
  const std::shared_ptr<const PoolSettings>& settings() const;

  // Queues `w`. From the next loop turn on it gets an idle connection, or waits for one while a
  // new one is opened below max_size. Never calls `w` back before returning: the caller may be
  // in the middle of its own input processing.
  void acquire(PoolWaiter* w);
  // The waiter went away (client disconnected) before it got a connection.
  void cancelWait(PoolWaiter* w);
  // An idle connection now, without waiting, when one is free and nobody waits before the caller
  // (transaction pooling takes one per transaction this way); null otherwise: acquire().
  PooledConnection* takeIdle();

  // The ParameterStatus values a connection logged in with, as one list shared by every
  // connection of this pool that reported the same (they nearly always do): an equal list held
  // already, or `params` itself, kept for the next login.
  std::shared_ptr<const ParamList> shareParams(std::shared_ptr<const ParamList> params);

  // From the connections. A connection that became idle goes to a waiter on the next turn.
  void onLoginDone(PooledConnection& c);
  void onLoginFailed(PooledConnection& c, const std::string& why);
  void onIdle(PooledConnection& c);  // a reset finished, or a transaction-pooled client let go
  void onLendable();                 // an idle connection's cancel fence cleared
  void onClosed(PooledConnection& c);
  // A slot of the shared cap was handed to this loop: serve() takes it if this pool asked.
  void onSlotFreed();

  // Hands idle connections to waiters, first come first served, and opens what is missing. Run
  // by the manager on the loop turn after acquire() or a connection came back; the only place
  // a waiter gets a connection.
  void serve();

  void tick(uint64_t now_ms);
  // Closes idle connections and fails waiters (shutdown).
  void closeAll(const std::string& why);
  // The admin console's RECONNECT: idle connections close now, the others when they are next
  // released (or finish logging in); new ones open as clients need them.
  void reconnect();
  bool isCloseNeeded(const PooledConnection& c) const { return close_needed_.count(&c) > 0; }
  bool empty() const { return conns_.empty() && waiters_.empty() && !serve_due_; }
  PoolStats stats() const;
  // Every connection of the pool, for the admin console's SHOW SERVERS.
  void forEachConnection(const std::function<void(const PooledConnection&)>& fn) const {
    for (const auto& c : conns_) fn(*c);
  }

 private:
  struct Waiter {
    PoolWaiter* waiter;
    uint64_t deadline_ms;
  };
  void scheduleServe();
  void spawnAsNeeded();
  // A connection RECONNECT marked, back from its client or its login: closed (true).
  bool closeIfNeeded(PooledConnection& c);
  // A replica's login failed without an answer from it: the replica leaves the rotation and
  // this pool's waiters move to the primary's pool (true); false for the primary.
  bool failOver(const PooledConnection& c);
  // A slot of the shared cap for one more connection (always granted without shared slots);
  // `for_waiter` records this loop's demand when refused.
  bool takeSlot(bool for_waiter);
  // This pool's demand for shared slots is met or gone (its waiters left).
  void releaseDemand();
  // Another loop's clients wait for a slot this pool holds with an idle connection: the oldest
  // idle one closes, and its slot goes to them (PgBouncer closes idle connections to make room).
  void yieldIdleSlot();
  // The warmest idle connection that may be lent (dropping entries that are no longer idle).
  PooledConnection* popLendable();
  int countState(ServerState s) const;
  // Connections not closing or closed.
  int countOpen() const;
  int maxSize() const;
  int minSize() const;

  PoolManager& manager_;
  std::string role_;
  std::string database_;
  std::vector<std::unique_ptr<PooledConnection>> conns_;
  std::vector<PooledConnection*> idle_;  // LIFO: the warmest connection first
  std::deque<Waiter> waiters_;
  std::unordered_set<const PooledConnection*> close_needed_;  // RECONNECT: close when released
  std::shared_ptr<const ParamList> shared_params_;  // the last login's (shareParams)
  uint64_t retry_after_ms_ = 0;  // no new login before this (after a failed one)
  int fixed_max_ = 0;
  bool writes_ = false;
  size_t host_ = 0;
  bool serve_due_ = false;  // serve() is scheduled with the manager
  // The cap shared with the other worker loops (null: this pool caps itself alone). Every
  // connection in conns_ holds one slot, given back when it leaves conns_.
  ConnectionSlots* slots_ = nullptr;
  ConnectionSlots::Key slot_key_;
  bool wants_slot_ = false;  // a waiter's tryTake was refused and not withdrawn since
};

// All pools of the process, plus the things every server connection needs from the daemon.
class PoolManager {
 public:
  // The pools' time in milliseconds.
  using Clock = std::function<uint64_t()>;

  // `factory` makes every pool's connections; `clock` defaults to the loop's uv_now (tests drive
  // a clock of their own).
  PoolManager(uv_loop_t* loop, metrics::Counters& counters, std::unique_ptr<ConnectionFactory> factory,
              Clock clock = {});
  ~PoolManager();

  uv_loop_t* loop() const { return loop_; }
  metrics::Counters& counters() { return counters_; }
  ConnectionFactory& factory() { return *factory_; }
  uint64_t nowMs() const { return clock_ ? clock_() : uv_now(loop_); }
  const std::shared_ptr<const PoolSettings>& config() const { return config_; }
  void setConfig(std::shared_ptr<const PoolSettings> config);
  // Read replicas: `health` (owned by the daemon, outliving this manager, thread-safe) names the
  // hosts and which are in the rotation. Call before the first pool() and setConfig().
  void setHealth(HostHealth* health) { health_ = health; }
  HostHealth* health() const { return health_; }
  // The settings for host `i`'s connections (Pool::settings).
  const std::shared_ptr<const PoolSettings>& hostSettings(size_t i) const;
  uint64_t nextServerId() { return ++last_server_id_; }

  // Worker loops: pool.max_size becomes a cap over the pools of every loop's manager for the
  // same (role, database, writes), counted in `slots` (owned by the daemon, outliving this
  // manager), where this loop is `loop_index` (from ConnectionSlots::attach). Call before the
  // first pool(); null (the default) leaves each pool capping itself. The internal fixed-size
  // pools never use it. The daemon's wake for this loop must call onSlotFreed() on its thread.
  void setSlots(ConnectionSlots* slots, int loop_index) {
    slots_ = slots;
    slot_loop_ = loop_index;
  }
  ConnectionSlots* slots() const { return slots_; }
  int slotLoop() const { return slot_loop_; }
  // A slot was handed to this loop: the pools that asked for one serve on the next turn.
  void onSlotFreed();

  // The pool for (upstream role, server database), created on first use. `internal` pools are
  // pgwarden's own (one connection), separate from the ones clients use.
  // `writes`: the write pool for the database (role upstream.write_user), never lent to a
  // read-only group's session.
  // `replica_ok`: a read-only session of a group with read_replicas: the pool of a replica in
  // the rotation (HostHealth::pickForRead) when there is one, else the primary's.
  Pool& pool(const std::string& database, bool internal = false, bool writes = false,
             bool replica_ok = false);
  // The pool of `database` on upstream host `host` (0: the primary).
  Pool& hostPool(const std::string& database, size_t host);
  void tick(uint64_t now_ms);
  void closeAll(const std::string& why);
  // RECONNECT for the pools of `database` (a server database; empty: every pool but
  // pgwarden's own).
  void reconnect(const std::string& database);
  // Runs `pool.serve()` on the next loop turn.
  void scheduleServe(Pool& pool);
  // Releases the loop handle behind scheduleServe (before the loop is closed); nothing is handed
  // out after this.
  void close() { next_turn_.close(); }
  // Frees connections whose close callback ran (called once per loop iteration).
  void sweep();
  void bury(std::unique_ptr<PooledConnection> c) { graveyard_.push_back(std::move(c)); }

  // PostgreSQL refused a login for want of connection slots (SQLSTATE 53300): its message, kept
  // until any login succeeds again; "" while logins succeed. Readiness reports it. Meanwhile
  // `pool` (kept even when empty) tries one login per upstream.login_retry to find out when
  // the server takes new connections again.
  const std::string& refusal() const { return refusal_; }
  void noteRefusal(const Pool& pool, std::string_view server_message);
  void clearRefusal();
  bool probing(const Pool& pool) const { return !closed_ && refused_pool_ == &pool; }
  size_t openConnections() const;
  std::vector<PoolStats> stats() const;
  void forEachPool(const std::function<void(const Pool&)>& fn) const {
    for (const auto& [key, p] : pools_) fn(*p);
  }

 private:
  Pool& poolOn(const std::string& database, bool internal, bool writes, size_t host);

  uv_loop_t* loop_;
  metrics::Counters& counters_;
  std::unique_ptr<ConnectionFactory> factory_;
  Clock clock_;
  std::shared_ptr<const PoolSettings> config_;
  HostHealth* health_ = nullptr;
  // config_ with each replica's address (index = host; [0] is config_ itself).
  std::vector<std::shared_ptr<const PoolSettings>> host_settings_;
  // Before pools_: a pool being destroyed gives its slots back.
  ConnectionSlots* slots_ = nullptr;
  int slot_loop_ = -1;
  std::map<std::string, std::unique_ptr<Pool>> pools_;  // key: role + '\0' + database
  std::vector<std::unique_ptr<PooledConnection>> graveyard_;
  // Pools whose serve() is due, each at most once (a pool with serve() due is never erased).
  std::vector<Pool*> due_;
  NextTurn next_turn_;
  uint64_t last_server_id_ = 0;
  std::string refusal_;
  const Pool* refused_pool_ = nullptr;
  bool closed_ = false;  // closeAll ran (shutdown)
};

}  // namespace pgwarden::pool
